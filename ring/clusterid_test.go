package ring

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A node whose cluster ID differs from its seeds' (a data directory of
// another cluster of the same name) is refused at Join; a node without
// one yet joins whatever it finds.
func TestNodeOfAnotherClusterIDIsRefusedAtJoin(t *testing.T) {
	cfg := testConfig("a")
	cfg.ClusterID = "x"
	a := start(t, cfg)

	cfg = testConfig("other", a.GossipAddr())
	cfg.ClusterID = "y"
	other, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = other.Join(ctx)
	require.ErrorIs(t, err, ErrIncompatible)
	require.NoError(t, other.Close())

	fresh := start(t, testConfig("fresh", a.GossipAddr()))
	waitTable(t, a, 10*time.Second, "a, fresh", hasMembers("a", "fresh"))
	waitTable(t, fresh, 10*time.Second, "a, fresh", hasMembers("a", "fresh"))
}

// Members that each set another cluster ID once joined (two nodes that
// each created a cluster) leave each other out of their tables; a member
// that sets the same ID stays.
func TestMembersOfAnotherClusterIDAreLeftOut(t *testing.T) {
	rs := startCluster(t, 3)
	for _, r := range rs {
		waitTable(t, r, 10*time.Second, "a, b, c", hasMembers("a", "b", "c"))
	}
	for i, id := range []string{"x", "x", "y"} {
		require.NoError(t, rs[i].SetClusterID(id, 5*time.Second))
	}
	require.NoError(t, rs[0].SetClusterID("x", time.Second), "setting the same ID again is fine")
	require.ErrorIs(t, rs[0].SetClusterID("z", time.Second), ErrInvalidConfig)
	for _, r := range rs[:2] {
		waitTable(t, r, 10*time.Second, "a, b", hasMembers("a", "b"))
	}
	waitTable(t, rs[2], 10*time.Second, "c alone", hasMembers("c"))
}

// Founders lists the members started as founders that have no cluster ID,
// and none once a member has one.
func TestFoundersListsMembersThatMayCreateACluster(t *testing.T) {
	cfg := testConfig("b")
	cfg.Founder = true
	b := start(t, cfg)
	cfg = testConfig("a", b.GossipAddr())
	cfg.Founder = true
	a := start(t, cfg)
	start(t, testConfig("c", b.GossipAddr()))
	waitTable(t, b, 10*time.Second, "a, b, c", hasMembers("a", "b", "c"))
	require.Equal(t, []string{"a", "b"}, a.Founders())
	require.NoError(t, a.SetClusterID("x", 5*time.Second))
	require.Empty(t, a.Founders(), "a member has a cluster ID: the cluster exists")
	require.Eventually(t, func() bool { return len(b.Founders()) == 0 }, 10*time.Second, 10*time.Millisecond)
}
