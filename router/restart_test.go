package router

import (
	"context"
	"encoding/binary"
	"fmt"
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
	}

	restarted := c.start(cfg)
	c.waitConverged()
	v, err := restarted.Call(ctx, key, "get", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(5), binary.BigEndian.Uint64(v), "the value from before the crash")
	after, _ := restarted.Owner(p)
	require.GreaterOrEqual(t, after.Epoch, before.Epoch)
}
