package router

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/internal/faultnet"
	"github.com/singlewriter/singlewriter/internal/rpc"
	"github.com/stretchr/testify/require"
)

// testCluster is a set of nodes on loopback sockets in one process.
type testCluster struct {
	t     testing.TB
	dir   string
	nodes []*Node
	// setup registers handlers on a node before it starts.
	setup func(n *Node)
	// rf is the nodes' ReplicationFactor; zero is the default, 3.
	rf int
	// nets, if not nil, gives node i the loopback IP 127.0.1.(i+1) and a
	// faultnet network there, to cut links.
	nets map[string]*faultnet.Net
}

// newTestCluster starts size nodes with the default replication factor.
func newTestCluster(t testing.TB, size int, setup func(n *Node)) *testCluster {
	t.Helper()
	return newReplicatedCluster(t, size, 0, setup)
}

// newReplicatedCluster starts size nodes with replication factor rf (1 for
// the tests of a partition's single copy).
func newReplicatedCluster(t testing.TB, size, rf int, setup func(n *Node)) *testCluster {
	t.Helper()
	return startCluster(t, &testCluster{t: t, dir: t.TempDir(), setup: setup, rf: rf}, size)
}

// newFaultyCluster is newReplicatedCluster with a faultnet network per node.
func newFaultyCluster(t testing.TB, size, rf int, setup func(n *Node)) *testCluster {
	t.Helper()
	return startCluster(t, &testCluster{t: t, dir: t.TempDir(), setup: setup, rf: rf, nets: map[string]*faultnet.Net{}}, size)
}

func startCluster(t testing.TB, c *testCluster, size int) *testCluster {
	t.Helper()
	for i := range size {
		c.add(fmt.Sprintf("n%d", i), i == 0)
	}
	c.waitConverged()
	return c
}

func (c *testCluster) config(name string, bootstrap bool) Config {
	var seeds []string
	for _, n := range c.nodes {
		if n.ctx.Err() == nil {
			seeds = append(seeds, n.GossipAddr())
		}
	}
	cfg := Config{
		Name:              name,
		DataDir:           filepath.Join(c.dir, name),
		Seeds:             seeds,
		Bootstrap:         bootstrap,
		ReplicationFactor: c.rf,
		SettleTime:        50 * time.Millisecond,
		DrainTimeout:      time.Second,
		PushPullInterval:  200 * time.Millisecond,
	}
	if c.nets != nil {
		fn := faultnet.New(net.IPv4(127, 0, 1, byte(len(c.nets)+1)), uint64(len(c.nets)))
		c.nets[name] = fn
		cfg.Network = fn
		cfg.GossipAddr, cfg.RPCAddr = fn.IP().String()+":0", fn.IP().String()+":0"
	}
	return cfg
}

// isolate cuts every link between node name and the others.
func (c *testCluster) isolate(name string) {
	for other, fn := range c.nets {
		if other != name {
			fn.Block(c.nets[name].IP())
			c.nets[name].Block(fn.IP())
		}
	}
}

// heal removes every network rule.
func (c *testCluster) heal() {
	for _, fn := range c.nets {
		fn.Heal()
	}
}

// add starts a node and joins it to the others.
func (c *testCluster) add(name string, bootstrap bool) *Node {
	c.t.Helper()
	return c.start(c.config(name, bootstrap))
}

func (c *testCluster) start(cfg Config) *Node {
	c.t.Helper()
	n, err := New(cfg)
	require.NoError(c.t, err)
	if c.setup != nil {
		c.setup(n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(c.t, n.Start(ctx))
	c.t.Cleanup(func() { n.Close() })
	c.nodes = append(c.nodes, n)
	return n
}

// restartConfig returns n's Config for a restart in place: n's addresses,
// and the other live nodes as seeds.
func (c *testCluster) restartConfig(n *Node) Config {
	cfg := n.cfg
	cfg.GossipAddr, cfg.RPCAddr = n.GossipAddr(), n.server.Addr().String()
	cfg.Seeds = nil
	for _, other := range c.live() {
		if other != n {
			cfg.Seeds = append(cfg.Seeds, other.GossipAddr())
		}
	}
	return cfg
}

// live returns the nodes not closed.
func (c *testCluster) live() []*Node {
	var live []*Node
	for _, n := range c.nodes {
		if n.ctx.Err() == nil {
			live = append(live, n)
		}
	}
	return live
}

// waitConverged waits until every live node sees every live node, every
// partition is served by its desired owner with its desired replica set,
// and all nodes agree on claims.
func (c *testCluster) waitConverged() {
	c.t.Helper()
	live := c.live()
	waitFor(c.t, 60*time.Second, func() error {
		for _, n := range live {
			if got := len(n.Members()); got != len(live) {
				return fmt.Errorf("%s sees %d members, want %d", n.Name(), got, len(live))
			}
		}
		first := live[0]
		t := first.ring.Table()
		for p := range first.cfg.Partitions {
			want := t.Owners[p]
			for _, n := range live {
				cl, ok := n.Owner(p)
				if !ok || cl.Owner != want {
					return fmt.Errorf("%s: partition %d claimed by %q, desired %q", n.Name(), p, cl.Owner, want)
				}
				if !slices.Equal(slices.Sorted(slices.Values(cl.Replicas)), slices.Sorted(slices.Values(t.Replicas[p]))) {
					return fmt.Errorf("%s: partition %d has replicas %v, desired %v", n.Name(), p, cl.Replicas, t.Replicas[p])
				}
			}
			if owner := c.node(want); owner != nil {
				if _, ok := owner.Serving(p); !ok {
					return fmt.Errorf("partition %d: desired owner %s does not serve it yet", p, want)
				}
			}
		}
		return nil
	})
}

// waitDropped waits until no live node sees the node named name.
func (c *testCluster) waitDropped(name string) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, func() error {
		for _, n := range c.live() {
			if slices.Contains(n.Members(), name) {
				return fmt.Errorf("%s still sees %s", n.Name(), name)
			}
		}
		return nil
	})
}

func (c *testCluster) node(name string) *Node {
	for _, n := range c.live() {
		if n.Name() == name {
			return n
		}
	}
	return nil
}

// waitFor polls cond until it returns nil or the timeout ends. It waits on
// a condition, never for a fixed time.
// callAsync runs n.Call of method on key, without a payload, in a
// goroutine, and returns the channel its error arrives on.
func callAsync(ctx context.Context, n *Node, key []byte, method string) <-chan error {
	errs := make(chan error, 1)
	go func() {
		_, err := n.Call(ctx, key, method, nil)
		errs <- err
	}()
	return errs
}

func waitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// counter is a handler that increments the key's 8-byte counter and
// returns the new value.
func counter(_ context.Context, req *Request) ([]byte, error) {
	v, _ := req.State.Get()
	var n uint64
	if len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	out := binary.BigEndian.AppendUint64(nil, n+1)
	req.State.Put(out)
	return out, nil
}

// keyInPartition returns a key of the form prefix-i in partition p.
func keyInPartition(n *Node, p int, prefix string) []byte {
	for i := 0; ; i++ {
		if k := fmt.Appendf(nil, "%s-%d", prefix, i); n.Partition(k) == p {
			return k
		}
	}
}

// keyOwnedBy returns a key that n knows to be owned by the node named owner.
func keyOwnedBy(n *Node, owner string) []byte {
	for i := 0; ; i++ {
		k := fmt.Appendf(nil, "k-%d", i)
		if cl, _ := n.Owner(n.Partition(k)); cl.Owner == owner {
			return k
		}
	}
}

// get is a handler that returns the key's value.
func get(_ context.Context, req *Request) ([]byte, error) {
	v, _ := req.State.Get()
	return v, nil
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// holdingCounter is a counter handler that records the payload of every
// call it runs, and holds the call whose payload is "hold" until release.
type holdingCounter struct {
	// started is closed when the held call has started.
	started, proceed chan struct{}
	// release lets the held call go on; it may be called more than once.
	release func()
	mu      sync.Mutex
	ran     []string
}

func newHoldingCounter() *holdingCounter {
	h := &holdingCounter{started: make(chan struct{}), proceed: make(chan struct{})}
	h.release = sync.OnceFunc(func() { close(h.proceed) })
	return h
}

func (h *holdingCounter) handle(ctx context.Context, req *Request) ([]byte, error) {
	h.mu.Lock()
	h.ran = append(h.ran, string(req.Payload))
	h.mu.Unlock()
	if string(req.Payload) == "hold" {
		close(h.started)
		select {
		case <-h.proceed:
		case <-ctx.Done(): // the test failed and closes the node
			return nil, ctx.Err()
		}
	}
	return counter(ctx, req)
}

// runs returns the payloads of the calls run so far, in order.
func (h *holdingCounter) runs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ran)
}

// waitQueued waits until want calls wait in key's queue on its owner
// (behind the one running), and returns them.
func waitQueued(t testing.TB, owner *Node, key []byte, want int) []*job {
	t.Helper()
	pe := owner.exec.parts[owner.Partition(key)]
	var queued []*job
	waitFor(t, 10*time.Second, func() error {
		pe.mu.Lock()
		defer pe.mu.Unlock()
		queued = slices.Clone(pe.queues[string(key)])
		if len(queued) != want {
			return fmt.Errorf("%d calls queued for %q, want %d", len(queued), key, want)
		}
		return nil
	})
	return queued
}

// newCountingPair starts two nodes, each configured by setup, with an
// "inc" handler that counts its runs, and checks that a call from n0 for a
// key n1 owns runs once. It returns the cluster, that key and the count.
func newCountingPair(t *testing.T, setup func(n *Node)) (*testCluster, []byte, *atomic.Int64) {
	t.Helper()
	var ran atomic.Int64
	c := newTestCluster(t, 2, func(n *Node) {
		setup(n)
		n.Handle("inc", func(ctx context.Context, req *Request) ([]byte, error) {
			ran.Add(1)
			return counter(ctx, req)
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := keyOwnedBy(c.nodes[0], "n1")
	_, err := c.nodes[0].Call(ctx, key, "inc", nil)
	require.NoError(t, err, "a call forwarded between the two nodes")
	require.Equal(t, int64(1), ran.Load())
	return c, key, &ran
}

// callAsOutsider sends n an "inc" call for key from a process that greets
// it with the handshake any node of its cluster sends (its fingerprint is
// all defaults here, so guessable), over connections opened by dial (nil:
// plain TCP).
func callAsOutsider(n *Node, key []byte, dial func(context.Context, string) (net.Conn, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	outsider := rpc.NewClient(rpc.ClientConfig{Hello: rpc.Hello{Cluster: fmt.Sprintf("%+v", n.cfg.fingerprint()), Node: "outsider"}, Dial: dial})
	defer outsider.Close()
	req := callRequest{ID: newRequestID(time.Now()), Key: key, Method: "inc"}
	_, err := outsider.Call(ctx, n.server.Addr().String(), msgCall, req.encode())
	return err
}
