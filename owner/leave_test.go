package owner

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
)

// A leaving node whose every other member refuses its handoffs because it
// is leaving too returns an error at once, its partition still its own
// (kept in its data directory): neither nil, which a caller would read as
// "handed off", nor a wait for its ctx.
func TestLeaveFailsWhenEveryOtherMemberIsLeaving(t *testing.T) {
	m := &mesh{}
	rf1 := func(c *Config) { c.ReplicationFactor = 1 }
	a, _ := m.addWith(t, "a", rf1)
	b, _ := m.addWith(t, "b", rf1)
	b.leaving.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, a.learn(ctx, 1, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a"}}))
	a.ring = fixedRing{&ring.Table{Members: []ring.Member{{Name: "a"}, {Name: "b"}}}}

	err := a.Leave(ctx)
	require.ErrorContains(t, err, "1 partitions still owned, kept in the data directory: every other member left or is leaving")
	require.NoError(t, ctx.Err(), "Leave waited for its ctx")
	c, _ := a.claims.Get(1)
	require.Equal(t, "a", c.Owner)
}

// A node alone in its table keeps its partitions for its next start:
// Leave returns nil at once.
func TestLeaveOfTheLastNodeKeepsItsPartitions(t *testing.T) {
	a, _ := (&mesh{}).add(t, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, a.learn(ctx, 1, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a"}}))
	a.ring = fixedRing{&ring.Table{Members: []ring.Member{{Name: "a"}}}}
	require.NoError(t, a.Leave(ctx))
	c, _ := a.claims.Get(1)
	require.Equal(t, "a", c.Owner)
}
