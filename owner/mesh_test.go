package owner

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// mesh connects in-process Owners: each one's Transport calls the
// receiver's handlers directly. drop, when set, loses the messages it
// names (the sender sees an error, as from a broken connection).
type mesh struct {
	mu    sync.Mutex
	nodes map[string]*Owner
	drop  func(from, to, kind string) bool
}

func (m *mesh) route(from, to, kind string) (*Owner, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drop != nil && m.drop(from, to, kind) {
		return nil, errors.New("message lost")
	}
	n, ok := m.nodes[to]
	if !ok {
		return nil, errors.New("no such node")
	}
	return n, nil
}

func (m *mesh) setDrop(f func(from, to, kind string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drop = f
}

// meshNode is one Owner's Transport over a mesh.
type meshNode struct {
	self string
	m    *mesh
}

func (t meshNode) Prepare(ctx context.Context, to string, req Prepare) (PromiseReply, error) {
	n, err := t.m.route(t.self, to, "prepare")
	if err != nil {
		return PromiseReply{}, err
	}
	return n.HandlePrepare(ctx, req)
}

func (t meshNode) Accept(ctx context.Context, to string, req Accept) (AcceptReply, error) {
	n, err := t.m.route(t.self, to, "accept")
	if err != nil {
		return AcceptReply{}, err
	}
	return n.HandleAccept(ctx, req)
}

func (t meshNode) Sync(ctx context.Context, to string, req Sync) (SyncReply, error) {
	n, err := t.m.route(t.self, to, "sync")
	if err != nil {
		return SyncReply{}, err
	}
	return n.HandleSync(ctx, req)
}

func (t meshNode) Choose(ctx context.Context, to string, req Choose) (ChooseReply, error) {
	n, err := t.m.route(t.self, to, "choose")
	if err != nil {
		return ChooseReply{}, err
	}
	return n.HandleChoose(ctx, req)
}

func (t meshNode) PreCopy(ctx context.Context, to string, req PreCopy) (SyncReply, error) {
	n, err := t.m.route(t.self, to, "pre-copy")
	if err != nil {
		return SyncReply{}, err
	}
	return n.HandlePreCopy(ctx, req)
}

func (t meshNode) Fetch(_ context.Context, from string, req FetchRequest) (Page, error) {
	n, err := t.m.route(t.self, from, "fetch")
	if err != nil {
		return Page{}, err
	}
	return n.HandleFetch(req)
}

func (t meshNode) Handoff(_ context.Context, to string, req Handoff) error {
	n, err := t.m.route(t.self, to, "handoff")
	if err != nil {
		return err
	}
	return n.HandleHandoff(req)
}

func (t meshNode) Replicate(ctx context.Context, to string, req Replicate) ([]error, error) {
	n, err := t.m.route(t.self, to, "replicate")
	if err != nil {
		return nil, err
	}
	return n.HandleReplicate(ctx, req), nil
}

// add starts an Owner named name over a fresh store in the mesh (a node
// that lost its data directory comes back this way) and returns it.
func (m *mesh) add(t *testing.T, name string) (*Owner, *store.Store) {
	t.Helper()
	return m.addWith(t, name, func(*Config) {})
}

// addWith is add with the node's Config changed by configure first.
func (m *mesh) addWith(t *testing.T, name string, configure func(*Config)) (*Owner, *store.Store) {
	t.Helper()
	s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	require.NoError(t, err)
	cfg := Config{Self: name, Partitions: 4, Store: s, Transport: meshNode{self: name, m: m}, ReplicationFactor: 3}
	configure(&cfg)
	o, err := New(cfg)
	require.NoError(t, err)
	o.synced.Store(true) // the mesh has no gossip: as if a claims table had come
	t.Cleanup(func() { o.Close(); s.Close() })
	m.mu.Lock()
	if m.nodes == nil {
		m.nodes = map[string]*Owner{}
	}
	m.nodes[name] = o
	m.mu.Unlock()
	return o, s
}

// writeVia commits key=value through o's lease of partition p and returns
// the commit's outcome (nil: acknowledged by a majority).
func writeVia(t *testing.T, o *Owner, p int, key, value string) error {
	t.Helper()
	l, err := o.Lease(p)
	if err != nil {
		return err
	}
	defer l.Release()
	c := o.Submit(l, &store.Batch{Partition: p, Writes: []store.KV{{Key: []byte(key), Value: []byte(value)}}})
	<-c.Done()
	return c.Err()
}
