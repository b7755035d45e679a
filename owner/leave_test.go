package owner

import (
	"context"
	"runtime"
	"sync"
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
	require.ErrorContains(t, err, "1 partitions still held (1 owned), kept in the data directory: every other member left or is leaving")
	require.NoError(t, ctx.Err(), "Leave waited for its ctx")
	c, _ := a.claims.Get(1)
	require.Equal(t, "a", c.Owner)
}

// A node alone in its table (the last one, or one cut off from the
// others) keeps its partitions for its next start, and Leave says so at
// once: nil would tell its operator that its data directory may go. One
// that holds nothing returns nil.
func TestLeaveOfTheLastNodeKeepsItsPartitionsAndSaysSo(t *testing.T) {
	a, _ := (&mesh{}).add(t, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a.ring = fixedRing{&ring.Table{Members: []ring.Member{{Name: "a"}}}}
	require.NoError(t, a.Leave(ctx), "nothing held")

	b, _ := (&mesh{}).add(t, "b")
	require.NoError(t, b.learn(ctx, 1, store.Claim{Epoch: 1, Owner: "b", Replicas: []string{"b"}}))
	require.NoError(t, b.learn(ctx, 2, store.Claim{Epoch: 1, Owner: "c", Replicas: []string{"c", "b"}}))
	b.ring = fixedRing{&ring.Table{Members: []ring.Member{{Name: "b"}}}}
	require.ErrorContains(t, b.Leave(ctx), "2 partitions still held (1 owned), kept in the data directory")
	require.NoError(t, ctx.Err(), "Leave waited for its ctx")
	c, _ := b.claims.Get(1)
	require.Equal(t, "b", c.Owner)
}

// holdFirstAccept is a Transport that holds the first Accept it sends
// until release is closed, having closed held.
type holdFirstAccept struct {
	Transport
	once          sync.Once
	held, release chan struct{}
}

func (h *holdFirstAccept) Accept(ctx context.Context, to string, req Accept) (AcceptReply, error) {
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.held)
		<-h.release
	}
	return h.Transport.Accept(ctx, to, req)
}

// An acquisition that began before Leave may make the leaving node the
// owner after Leave found it owning nothing. With one replica, the
// previous owner then drops its copy: the only one would sit on a node
// that left. Leave waits for it, and hands the claim it made off.
func TestLeaveWaitsForAnAcquisitionThatBeganBeforeIt(t *testing.T) {
	const p = 1
	m := &mesh{}
	hold := &holdFirstAccept{held: make(chan struct{}), release: make(chan struct{})}
	a, _ := m.addWith(t, "a", func(c *Config) {
		c.ReplicationFactor = 1
		hold.Transport = c.Transport
		c.Transport = hold
	})
	b, sb := m.addWith(t, "b", func(c *Config) { c.ReplicationFactor = 1 })
	table := fixedRing{&ring.Table{Members: []ring.Member{{Name: "a"}, {Name: "b"}}}}
	a.ring, b.ring = table, table
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "b", Replicas: []string{"b"}}, sb)
	a.claims.Merge(p, k)
	b.claims.Merge(p, k)

	require.True(t, a.parts[p].tryBusy(time.Now()))
	a.wg.Add(1)
	go a.attempt(Step{P: p, Action: Acquire, Claim: k}, table.Table())
	<-hold.held // a has b's promise and copy; its Accept is on its way

	left := make(chan error, 1)
	go func() { left <- a.Leave(ctx) }()
	for !a.leaving.Load() {
		runtime.Gosched() // until Leave has begun: it then looks at what a owns
	}
	close(hold.release)
	require.NoError(t, <-left)
	for a.attempting() {
		runtime.Gosched() // the acquisition's end, if Leave did not wait for it
	}
	c, _ := a.claims.Get(p)
	require.NotEqual(t, "a", c.Owner, "the partition's claim names the node that left")
	_, serving := a.Serving(p)
	require.False(t, serving, "the node that left serves the partition")
}

// An attempt started after Leave began (a Handoff that read leaving just
// before Leave set it) takes nothing: Leave may have found the node owning
// nothing and no attempt running.
func TestAttemptStartedAfterLeaveBeganTakesNothing(t *testing.T) {
	const p = 1
	m := &mesh{}
	rf1 := func(c *Config) { c.ReplicationFactor = 1 }
	a, _ := m.addWith(t, "a", rf1)
	b, sb := m.addWith(t, "b", rf1)
	table := fixedRing{&ring.Table{Members: []ring.Member{{Name: "a"}, {Name: "b"}}}}
	a.ring, b.ring = table, table
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "b", Replicas: []string{"b"}}, sb)
	a.claims.Merge(p, k)
	b.claims.Merge(p, k)

	require.True(t, a.parts[p].tryBusy(time.Now()))
	a.leaving.Store(true)
	a.wg.Add(1)
	a.attempt(Step{P: p, Action: Acquire, Claim: k}, table.Table())
	c, _ := b.claims.Get(p)
	require.Equal(t, k, c, "the leaving node acquired the partition")
	require.False(t, a.attempting())
}
