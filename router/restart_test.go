package router

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// singleCopyCluster starts three nodes with replication factor 1 and
// increments key, owned by node i (the victim), 5 times through node 1.
func singleCopyCluster(ctx context.Context, t *testing.T, i int) (c *testCluster, victim *Node, key []byte) {
	c = newReplicatedCluster(t, 3, 1, func(n *Node) {
		n.Handle("inc", counter)
		n.Handle("get", get)
	})
	victim = c.nodes[i]
	key = keyOwnedBy(victim, victim.Name())
	for range 5 {
		_, err := c.nodes[1].Call(ctx, key, "inc", nil)
		require.NoError(t, err)
	}
	return c, victim, key
}

// With replication factor 1 a partition has one copy: while its owner is
// down nobody may serve it, and the owner gets it back with its data when
// it restarts on the same directory. (With replicas, the survivors take it
// over: TestReplicatedClusterLosesNothingWhenANodeCrashesUnderTraffic.)
func TestRestartedNodeGetsItsPartitionsAndDataBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, victim, key := singleCopyCluster(ctx, t, 2)
	p := victim.Partition(key)
	cfg := c.restartConfig(victim)
	before, _ := victim.Owner(p)

	require.NoError(t, victim.Close()) // no Leave: as after a crash
	// Wait until the survivors' failure detector removed the victim, so
	// that the ring now wants another node to own p.
	waitFor(t, 30*time.Second, func() error {
		for _, n := range c.nodes[:2] {
			if len(n.Members()) != 2 {
				return fmt.Errorf("%s still sees %v", n.Name(), n.Members())
			}
		}
		return nil
	})
	short, cancelShort := context.WithTimeout(context.Background(), time.Second)
	_, err := c.nodes[0].Call(short, key, "get", nil)
	cancelShort()
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	for _, n := range c.nodes[:2] {
		_, serving := n.Serving(p)
		require.False(t, serving, "%s serves partition %d while its only replica is down", n.Name(), p)
		require.False(t, n.Settled(), "%s: the ring places partition %d on a survivor, its claim names the victim", n.Name(), p)
	}

	restarted := c.start(cfg)
	c.waitConverged()
	for _, n := range c.live() {
		require.True(t, n.Settled(), "%s has not settled", n.Name())
	}
	v, err := restarted.Call(ctx, key, "get", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(5), binary.BigEndian.Uint64(v), "the value from before the crash")
	after, _ := restarted.Owner(p)
	require.GreaterOrEqual(t, after.Epoch, before.Epoch)
}

// A node that lost its data directory and restarts with Bootstrap set must
// join the cluster its seeds belong to. Creating a second one, it would
// claim every partition for itself and serve the calls that enter there
// from its empty store: every counter would start again from zero.
func TestBootstrapNodeThatLostItsDataDirJoinsItsSeedsCluster(t *testing.T) {
	c := newTestCluster(t, 3, func(n *Node) { n.Handle("inc", counter) })
	first := c.nodes[0]
	require.True(t, first.cfg.Bootstrap)
	cluster := first.owner.Claims().Cluster()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	keys := make([][]byte, 16)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "acct-%d", i)
		for range 3 {
			_, err := c.nodes[1].Call(ctx, keys[i], "inc", nil)
			require.NoError(t, err)
		}
	}
	cfg := c.restartConfig(first)
	require.NoError(t, first.Close())
	require.NoError(t, os.RemoveAll(cfg.DataDir))

	restarted := c.start(cfg)
	require.Equal(t, cluster, restarted.owner.Claims().Cluster(), "a second cluster was created")
	c.waitConverged()
	for _, k := range keys {
		v, err := restarted.Call(ctx, k, "inc", nil)
		require.NoError(t, err)
		require.Equal(t, uint64(4), binary.BigEndian.Uint64(v), "key %s", k)
	}
}

// A bootstrap node whose seeds answer but belong to no cluster yet (they
// started first and wait for one) creates the cluster, and gives them its
// claims at once: with push/pull an hour apart they would wait that long.
func TestBootstrapNodeWithSeedsOfNoClusterCreatesIt(t *testing.T) {
	c := &testCluster{t: t, dir: t.TempDir(), setup: func(n *Node) { n.Handle("inc", counter) }}
	start := func(name string, bootstrap bool) *Node {
		cfg := c.config(name, bootstrap)
		cfg.PushPullInterval = time.Hour
		return c.start(cfg)
	}
	waiting := start("n1", false)
	require.Empty(t, waiting.owner.Claims().Cluster())
	first := start("n0", true)
	cluster := first.owner.Claims().Cluster()
	require.NotEmpty(t, cluster, "n0 did not bootstrap")
	c.waitConverged()
	require.Equal(t, cluster, waiting.owner.Claims().Cluster())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := waiting.Call(ctx, []byte("k"), "inc", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), binary.BigEndian.Uint64(v))
}

// With replication factor 1 a node is its partitions' only copy. If it
// comes back under its name without its data directory, it must not serve
// them from its empty store: every counter would start again from zero and
// every stored response would be forgotten, with no error anywhere. It
// logs them and leaves them unavailable, until its operator restores the
// directory or restarts it with AcceptDataLoss.
func TestNodeThatLostItsOnlyCopyDoesNotServeItEmpty(t *testing.T) {
	// n2's partitions were acquired from the root claims; those that
	// stayed on n0, the bootstrap node, keep their root claims (epoch 0).
	for _, i := range []int{2, 0} {
		t.Run(fmt.Sprintf("n%d", i), func(t *testing.T) { lostOnlyCopy(t, i) })
	}
}

func lostOnlyCopy(t *testing.T, i int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, victim, key := singleCopyCluster(ctx, t, i)
	p := victim.Partition(key)
	if claim, _ := victim.Owner(p); i == 0 {
		require.Zero(t, claim.Epoch, "the bootstrap node's partition left its root claim")
	}
	entry := c.nodes[1]
	cfg := c.restartConfig(victim)
	require.NoError(t, victim.Close())
	require.NoError(t, os.RemoveAll(cfg.DataDir))

	logged := &partitionErrors{p: p, first: make(chan struct{})}
	cfg.Logger = slog.New(logged)
	amnesiac := c.start(cfg)
	select {
	case <-logged.first:
	case <-ctx.Done():
		t.Fatalf("%s did not report partition %d as lost", amnesiac.Name(), p)
	}
	short, cancelShort := context.WithTimeout(context.Background(), time.Second)
	_, err := entry.Call(short, key, "get", nil)
	cancelShort()
	require.ErrorIs(t, err, ErrUnavailable, "partition %d was served from an empty store", p)
	_, serving := amnesiac.Serving(p)
	require.False(t, serving)
	require.False(t, amnesiac.Settled(), "a node that does not serve its own partition reports itself settled")
	require.EqualValues(t, 1, logged.n.Load(), "the loss is logged once, not at every retry")

	require.NoError(t, amnesiac.Close())
	cfg.Logger, cfg.AcceptDataLoss = nil, true
	c.start(cfg)
	v, err := entry.Call(ctx, key, "inc", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), binary.BigEndian.Uint64(v), "with AcceptDataLoss the partition is served again, empty")
	c.waitConverged()
}

// partitionErrors is a slog.Handler that counts the error records about
// partition p, and closes first at the first one.
type partitionErrors struct {
	p     int
	n     atomic.Int64
	first chan struct{}
}

func (h *partitionErrors) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h *partitionErrors) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *partitionErrors) WithGroup(string) slog.Handler                { return h }

func (h *partitionErrors) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "partition" && a.Value.Int64() == int64(h.p) && h.n.Add(1) == 1 {
			close(h.first)
		}
		return true
	})
	return nil
}

// A backup that lost its data directory and came back at once, before
// failure detection (so the ring never changed), must get its copies back
// without any traffic: the owners learn of a backup without a copy only
// when a write to it fails, and a partition left one copy short would be
// lost with the next disk. Settled stays false until then.
func TestBackupThatLostItsDataDirGetsItsCopiesBackWithoutTraffic(t *testing.T) {
	c := newTestCluster(t, 3, func(n *Node) { n.Handle("inc", counter) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	victim := c.nodes[2]
	keys := map[string][]byte{} // key -> its counter
	for i := range 24 {
		k := fmt.Appendf(nil, "acct-%d", i)
		v, err := c.nodes[0].Call(ctx, k, "inc", nil)
		require.NoError(t, err)
		keys[string(k)] = v
	}
	cfg := c.restartConfig(victim)
	require.NoError(t, victim.Close()) // no Leave: as after a crash
	require.NoError(t, os.RemoveAll(cfg.DataDir))
	restarted := c.start(cfg)

	waitFor(t, 60*time.Second, func() error {
		if !restarted.Settled() {
			return errors.New("not settled")
		}
		return nil
	})
	for p, cl := range restarted.owner.Claims().Snapshot() {
		m, err := restarted.store.Meta(p)
		require.NoError(t, err)
		require.True(t, slices.Contains(cl.Replicas, restarted.Name()), "partition %d: replicas %v", p, cl.Replicas)
		require.NotZero(t, m.Promised, "partition %d: no copy", p)
	}
	for k, want := range keys {
		got, ok, err := restarted.store.Get(restarted.Partition([]byte(k)), []byte(k))
		require.NoError(t, err)
		require.True(t, ok, "key %s is missing from the copy", k)
		require.Equal(t, want, got, "key %s", k)
	}
}
