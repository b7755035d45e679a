package router

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With replication factor 1 a partition has one copy: while its owner is
// down nobody may serve it, and the owner gets it back with its data when
// it restarts on the same directory. (With replicas, the survivors take it
// over: TestReplicatedClusterLosesNothingWhenANodeCrashesUnderTraffic.)
func TestRestartedNodeGetsItsPartitionsAndDataBack(t *testing.T) {
	c := newReplicatedCluster(t, 3, 1, func(n *Node) {
		n.Handle("inc", counter)
		n.Handle("get", get)
	})
	victim := c.nodes[2]
	// One key owned by the victim, and its value before the crash.
	var key []byte
	for i := 0; key == nil; i++ {
		k := fmt.Appendf(nil, "acct-%d", i)
		if cl, _ := victim.Owner(victim.Partition(k)); cl.Owner == victim.Name() {
			key = k
		}
	}
	p := victim.Partition(key)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 5 {
		_, err := c.nodes[0].Call(ctx, key, "inc", nil)
		require.NoError(t, err)
	}
	cfg := victim.cfg
	cfg.GossipAddr, cfg.RPCAddr = victim.GossipAddr(), victim.server.Addr().String()
	cfg.Seeds = []string{c.nodes[0].GossipAddr(), c.nodes[1].GossipAddr()}
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
	cfg := first.cfg
	cfg.GossipAddr, cfg.RPCAddr = first.GossipAddr(), first.server.Addr().String()
	cfg.Seeds = []string{c.nodes[1].GossipAddr(), c.nodes[2].GossipAddr()}
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
