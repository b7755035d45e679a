package owner

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// ownerSource is a Transport whose fetches are served by the Owner src,
// recording each request and how many entries it returned.
type ownerSource struct {
	Transport
	mu      sync.Mutex
	src     *Owner
	fetches []FetchRequest
	entries []int
	// gate, if not nil, holds every live fetch until it is closed.
	gate chan struct{}
}

func (f *ownerSource) Fetch(ctx context.Context, _ string, req FetchRequest) (Page, error) {
	f.mu.Lock()
	src, gate := f.src, f.gate
	f.mu.Unlock()
	if gate != nil && req.Live {
		select {
		case <-gate:
		case <-ctx.Done():
			return Page{}, ctx.Err()
		}
	}
	pg, err := src.HandleFetch(req)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches = append(f.fetches, req)
	f.entries = append(f.entries, len(pg.Entries))
	return pg, err
}

// fetched returns how many entries the fetches that match which returned.
func (f *ownerSource) fetched(which func(FetchRequest) bool) (requests, entries int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, req := range f.fetches {
		if which(req) {
			requests++
			entries += f.entries[i]
		}
	}
	return requests, entries
}

func live(req FetchRequest) bool    { return req.Live }
func changes(req FetchRequest) bool { return !req.Live && req.Tracker != 0 }
func whole(req FetchRequest) bool   { return !req.Live && req.Tracker == 0 }

// preCopyPair returns a source Owner "b" whose store holds keys entries
// in partition 1, written at epoch 11, and a target Owner "r" fetching
// from it through the returned ownerSource.
func preCopyPair(t *testing.T, keys int) (src *store.Store, srcDir string, fetcher *ownerSource, r *Owner, rs *store.Store, rdir string) {
	t.Helper()
	ctx := context.Background()
	srcDir = t.TempDir()
	src, err := store.Open(store.Config{Dir: srcDir, NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	for i := range keys {
		require.NoError(t, src.Commit(ctx, &store.Batch{Partition: 1, Epoch: 11, Writes: []store.KV{{Key: fmt.Appendf(nil, "key-%04d", i), Value: []byte("v")}}}))
	}
	fetcher = &ownerSource{src: servingSource(t, src)}
	rdir = t.TempDir()
	rs, err = store.Open(store.Config{Dir: rdir, NoSync: true})
	require.NoError(t, err)
	r, err = New(Config{Self: "r", Partitions: 4, Store: rs, Transport: fetcher})
	require.NoError(t, err)
	r.synced.Store(true)
	t.Cleanup(func() { r.Close(); rs.Close() })
	return src, srcDir, fetcher, r, rs, rdir
}

// sourceClaim is the claim the source "b" serves partition 1 under.
var sourceClaim = store.Claim{Epoch: 11, Owner: "b", Replicas: []string{"b"}}

// servingSource returns an Owner "b" over src serving partition 1 under
// sourceClaim: it serves live pages only while it serves the partition.
func servingSource(t *testing.T, src *store.Store) *Owner {
	t.Helper()
	b, err := New(Config{Self: "b", Partitions: 4, Store: src, Transport: unreachableSource{}})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	_, err = src.Choose(context.Background(), 1, sourceClaim, true)
	require.NoError(t, err)
	require.NoError(t, b.startServing(1, sourceClaim))
	return b
}

// changeAndPromise writes to partition 1 of src at epoch 11 as its owner
// still serving it would (an update, a deletion, a new key), then
// promises ballot 17 as its drain ends, and returns the Sync of that
// proposal from src's data.
func changeAndPromise(t *testing.T, src *store.Store) Sync {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, src.Commit(ctx, &store.Batch{Partition: 1, Epoch: 11, Writes: []store.KV{
		{Key: []byte("key-0003"), Value: []byte("changed")}, {Key: []byte("key-0004")}, {Key: []byte("new"), Value: []byte("n")},
	}}))
	m, err := src.Promise(ctx, 1, 17)
	require.NoError(t, err)
	return Sync{P: 1, Ballot: 17, Base: sourceClaim, Source: "b", Pos: m.Position}
}

// requireSameData asserts that partition 1 of got holds what src holds.
func requireSameData(t *testing.T, src, got *store.Store, pos store.Position) {
	t.Helper()
	requireSameDataAt(t, src, got, 1, pos)
}

// requireSameDataAt asserts that partition p of got, at pos, holds what
// src holds there.
func requireSameDataAt(t *testing.T, src, got *store.Store, p int, pos store.Position) {
	t.Helper()
	want, next, err := src.Export(p, pos, nil, 1<<30)
	require.NoError(t, err)
	require.Nil(t, next)
	have, next, err := got.Export(p, pos, nil, 1<<30)
	require.NoError(t, err)
	require.Nil(t, next)
	require.Equal(t, want, have)
}

// A replica that pre-copied a partition while its owner still served it
// fetches, once the owner promised, only the entries that changed since:
// the partition is unserved for the time those take, not the whole copy.
func TestSyncAfterAPreCopyFetchesOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	const keys = 2000
	src, _, fetcher, r, rs, _ := preCopyPair(t, keys)

	reply, err := r.HandlePreCopy(ctx, PreCopy{P: 1, Source: "b"})
	require.NoError(t, err)
	require.True(t, reply.Done)
	_, n := fetcher.fetched(live)
	require.Equal(t, keys, n)

	req := changeAndPromise(t, src)
	require.NoError(t, syncCopy(ctx, r, req))
	requireSameData(t, src, rs, req.Pos)
	requests, n := fetcher.fetched(changes)
	require.Equal(t, 1, requests)
	require.Equal(t, 3, n, "the update, the deletion and the new key")
	requests, _ = fetcher.fetched(whole)
	require.Zero(t, requests, "nothing fetched whole")
	require.Equal(t, uint64(1), r.Stats().PreCopiesInstalled)
	require.Zero(t, r.Stats().CopiesInstalled)
}

// A source that restarted since the pre-copy no longer knows what changed:
// the sync copies the whole partition instead, even once the restarted
// source tracks changes for another pre-copy (tracker IDs are not reused
// across restarts).
func TestPreCopyWhoseSourceForgotItsChangesFallsBackToAWholeCopy(t *testing.T) {
	ctx := context.Background()
	src, srcDir, fetcher, r, rs, _ := preCopyPair(t, 100)
	_, err := r.HandlePreCopy(ctx, PreCopy{P: 1, Source: "b"})
	require.NoError(t, err)
	req := changeAndPromise(t, src)

	// The source restarts on its directory: its trackers are gone.
	fetcher.mu.Lock()
	fetcher.src.Close()
	require.NoError(t, src.Close())
	reopened, err := store.Open(store.Config{Dir: srcDir, NoSync: true})
	require.NoError(t, err)
	defer reopened.Close()
	b, err := New(Config{Self: "b", Partitions: 4, Store: reopened, Transport: unreachableSource{}})
	require.NoError(t, err)
	defer b.Close()
	fetcher.src = b
	fetcher.mu.Unlock()
	// Another replica's pre-copy starts a tracker on the restarted source.
	_, err = reopened.Track(1)
	require.NoError(t, err)

	require.NoError(t, syncCopy(ctx, r, req))
	requireSameData(t, reopened, rs, req.Pos)
	requests, _ := fetcher.fetched(changes)
	require.Equal(t, 1, requests, "the changes were asked for, and refused")
	_, n := fetcher.fetched(whole)
	require.Equal(t, 100, n, "then the whole partition was copied (one key deleted, one new)")
	require.Equal(t, uint64(1), r.Stats().CopiesInstalled)
}

// A pre-copy no Sync took is discarded when the node closes: nothing is
// left staged in its file.
func TestPreCopyNotTakenLeavesNothingStaged(t *testing.T) {
	ctx := context.Background()
	_, _, _, r, rs, rdir := preCopyPair(t, 100)
	reply, err := r.HandlePreCopy(ctx, PreCopy{P: 1, Source: "b"})
	require.NoError(t, err)
	require.True(t, reply.Done)
	r.Close()
	require.NoError(t, rs.Close())
	require.Zero(t, stagedCopies(t, rdir))
}

// A resync catches up the replica that missed a batch: it pre-copies the
// partition while its owner still serves it, then fetches only what
// changed (the partition is drained for that, not for a whole copy). The
// other replica, which holds every batch, copies nothing.
func TestResyncPreCopiesToTheReplicaThatMissedABatch(t *testing.T) {
	const p = 1
	m := &mesh{}
	c, sc := m.add(t, "c")
	b, sb := m.add(t, "b")
	d, sd := m.add(t, "d")
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "c", Replicas: []string{"c", "b", "d"}}, sc, sb, sd)
	require.NoError(t, c.startServing(p, k))
	require.NoError(t, writeVia(t, c, p, "k", "v2"))
	m.setDrop(func(_, to, kind string) bool { return to == "b" && kind == "replicate" })
	require.NoError(t, writeVia(t, c, p, "k", "v3"), "c and d are a majority")
	require.Eventually(t, func() bool { return slices.Equal(c.parts[p].lagged(), []string{"b"}) }, 5*time.Second, time.Millisecond,
		"b's stream records it missed the batch")
	m.setDrop(nil)

	ok, _ := c.acquire(p, k, &ring.Table{}, []string{"c", "b", "d"})
	require.True(t, ok)
	pos, err := sc.Meta(p)
	require.NoError(t, err)
	require.Eventually(t, func() bool { m, err := sb.Meta(p); return err == nil && m.Position == pos.Position }, 5*time.Second, time.Millisecond,
		"b applies the new claim's start marker")
	requireSameDataAt(t, sc, sb, p, pos.Position)
	require.Equal(t, uint64(1), b.Stats().PreCopiesInstalled)
	require.Zero(t, b.Stats().CopiesInstalled)
	require.Zero(t, d.Stats().PreCopiesInstalled+d.Stats().CopiesInstalled)
}

// An attempt that pre-copies a partition still served gives its slot
// back: a takeover of a partition nobody serves does not wait behind
// maxConcurrentAttempts pre-copies of large partitions.
func TestPreCopiesDoNotStarveATakeover(t *testing.T) {
	// d is not a replica of the claims served: it is pre-copied to, and
	// its pre-copies wait for their first page.
	c := requireTakeoverBesideCopies(t, []string{"c", "b"}, func(cfg *Config) { cfg.DrainTimeout = time.Hour })
	for p := range maxConcurrentAttempts {
		_, serving := c.Serving(p)
		require.True(t, serving, "partition %d is served while it is pre-copied", p)
	}
}

// Live pages come only from a node that serves the partition: a pre-copy
// from one that does not (a restarted owner, say) would hold back, for a
// whole copy's time, the acquisition of a partition nobody serves.
func TestPreCopyFromANodeThatDoesNotServeThePartitionFailsAtOnce(t *testing.T) {
	ctx := context.Background()
	src, _, fetcher, r, _, _ := preCopyPair(t, 10)
	fetcher.mu.Lock()
	fetcher.src.Close() // stops serving
	b, err := New(Config{Self: "b", Partitions: 4, Store: src, Transport: unreachableSource{}})
	require.NoError(t, err)
	defer b.Close()
	fetcher.src = b
	fetcher.mu.Unlock()

	_, err = r.HandlePreCopy(ctx, PreCopy{P: 1, Source: "b"})
	require.ErrorContains(t, err, "does not serve it")
	_, n := fetcher.fetched(live)
	require.Zero(t, n)
}

// A Sync that comes while the pre-copy it can use is still being fetched
// (its proposer stopped waiting for it) waits for it, instead of staging
// a whole copy beside it. (In an acquisition the source, drained by then,
// refuses the pre-copy's next page, and the Sync copies the whole
// partition; here the source still serves, and the pre-copy completes.)
func TestSyncWaitsForThePreCopyStillBeingFetched(t *testing.T) {
	ctx := context.Background()
	src, _, fetcher, r, rs, _ := preCopyPair(t, 100)
	r.cfg.DrainTimeout = time.Hour // the first page's bound: the gate holds it
	gate := make(chan struct{})
	fetcher.mu.Lock()
	fetcher.gate = gate
	fetcher.mu.Unlock()
	reply, err := r.HandlePreCopy(ctx, PreCopy{P: 1, Source: "b", Wait: time.Millisecond})
	require.NoError(t, err)
	require.False(t, reply.Done)

	req := changeAndPromise(t, src)
	synced := make(chan error, 1)
	go func() { synced <- syncCopy(ctx, r, req) }()
	require.Eventually(t, r.parts[1].copying, 5*time.Second, time.Millisecond)
	close(gate)
	require.NoError(t, <-synced)
	requireSameData(t, src, rs, req.Pos)
	require.Equal(t, uint64(1), r.Stats().PreCopiesInstalled)
	require.Zero(t, r.Stats().CopiesInstalled)
}

// preCopyCounter is a Transport that counts the PreCopy requests sent.
type preCopyCounter struct {
	Transport
	sent *int32
}

func (t preCopyCounter) PreCopy(ctx context.Context, to string, req PreCopy) (SyncReply, error) {
	atomic.AddInt32(t.sent, 1)
	return t.Transport.PreCopy(ctx, to, req)
}

// An owner that restarted does not serve its claim: it acquires it again
// at once, its new replica copying the partition whole in its Sync, with
// no pre-copy from a partition nobody serves.
func TestRestartedOwnerDoesNotPreCopy(t *testing.T) {
	const p = 1
	var sent int32
	m := &mesh{}
	c, sc := m.addWith(t, "c", func(cfg *Config) { cfg.Transport = preCopyCounter{Transport: cfg.Transport, sent: &sent} })
	_, sb := m.add(t, "b")
	d, _ := m.add(t, "d")
	m.add(t, "x")
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "c", Replicas: []string{"c", "b", "x"}}, sc, sb)

	ok, _ := c.acquire(p, k, &ring.Table{}, []string{"c", "b", "d"})
	require.True(t, ok)
	require.Zero(t, atomic.LoadInt32(&sent))
	require.Equal(t, uint64(1), d.Stats().CopiesInstalled)
}
