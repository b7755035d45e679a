package owner

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// servedAfter sets up b serving claim k2 of partition p, acquired from
// a's claim k1, with a, b and c its replicas.
func servedAfter(t *testing.T, p int) (m *mesh, b *Owner, stores []*store.Store, k1, k2 store.Claim) {
	t.Helper()
	m = &mesh{}
	_, sa := m.add(t, "a")
	b, sb := m.add(t, "b")
	_, sc := m.add(t, "c")
	k1 = claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "b", "c"}, BaseReplicas: []string{"a"}}, sa, sb, sc)
	ok, _ := b.acquire(p, k1, &ring.Table{}, []string{"b", "a", "c"})
	require.True(t, ok)
	k2, serving := b.Serving(p)
	require.True(t, serving)
	return m, b, []*store.Store{sb, sa, sc}, k1, k2
}

// An attempt that started from a claim older than the one this node
// already serves (its claims table was read before the newer claim was
// merged) learns that the newer claim is its own. It must not start
// serving that claim again: the start marker would take the number of a
// batch in flight, and the batches after it would be numbered again.
func TestAttemptFromAStaleBaseDoesNotRestartTheClaimServedHere(t *testing.T) {
	const p = 1
	_, b, stores, k1, k2 := servedAfter(t, p)
	sb := stores[0]
	require.NoError(t, writeVia(t, b, p, "k", "v2"))
	before, err := sb.Meta(p)
	require.NoError(t, err)

	ok, _ := b.acquire(p, k1, &ring.Table{}, []string{"b", "a", "c"})
	require.True(t, ok, "the newer claim is ours and served")
	served, serving := b.Serving(p)
	require.True(t, serving)
	require.Equal(t, k2, served)
	after, err := sb.Meta(p)
	require.NoError(t, err)
	require.Equal(t, before.Position, after.Position, "a second start marker of the served claim was committed")
	require.NoError(t, writeVia(t, b, p, "k", "v3"))
}

// An attempt planned from a claim older than the newest one known by the
// time it runs (an attempt that ended meanwhile made the newer one) sends
// nothing: its Prepares, from the older claim, could only raise promises
// above the claim this node serves and fence it.
func TestAttemptPlannedFromAnOlderClaimSendsNothing(t *testing.T) {
	const p = 1
	m, b, _, k1, k2 := servedAfter(t, p)
	var prepares atomic.Int32
	m.setDrop(func(_, _, kind string) bool {
		if kind == "prepare" {
			prepares.Add(1)
		}
		return false
	})
	require.True(t, b.parts[p].tryBusy(time.Now()))
	b.wg.Add(1)
	b.attempt(Step{P: p, Action: Acquire, Claim: k1}, &ring.Table{})
	require.Zero(t, prepares.Load(), "the attempt from the older claim sent Prepares")
	served, serving := b.Serving(p)
	require.True(t, serving)
	require.Equal(t, k2, served)
	require.True(t, b.parts[p].tryBusy(time.Now()), "the attempt left the partition busy or backing off")
}

// What a second start of the served claim did: with the claim's batches in
// flight, its marker took the number of one of them, and a backup that got
// the two in the other order than the owner's store confirmed the one it
// had not applied, or applied the one the owner refused. Writers keep
// batches in flight, each to a key of its own, while the served claim is
// started again and again; the three replicas must end holding the same
// keys, among them every acknowledged one.
func TestStartingTheServedClaimAgainUnderWritesLeavesTheReplicasEqual(t *testing.T) {
	const p, writers, total = 1, 4, 5000
	_, b, stores, _, k2 := servedAfter(t, p)
	var wg sync.WaitGroup
	var writes atomic.Int64
	tried := make([]int, writers)
	acked := make([][]bool, writers)
	for w := range writers {
		wg.Go(func() {
			for writes.Add(1) <= total {
				err := writeVia(t, b, p, fmt.Sprint(w, "-", tried[w]), "v")
				acked[w] = append(acked[w], err == nil)
				tried[w]++
			}
		})
	}
	for writes.Load() < total {
		b.startServing(p, k2)
	}
	wg.Wait()

	// The backups apply behind the owner: wait until all are at its position.
	var want store.Meta
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		want, err = stores[0].Meta(p)
		require.NoError(t, err)
		same := true
		for _, s := range stores[1:] {
			m, err := s.Meta(p)
			require.NoError(t, err)
			same = same && m.Position == want.Position
		}
		if same {
			break
		}
		require.True(t, time.Now().Before(deadline), "the replicas did not reach the owner's position %v", want.Position)
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	for w := range writers {
		for i, ack := range acked[w] {
			key := []byte(fmt.Sprint(w, "-", i))
			for j, s := range stores {
				_, ok, err := s.Get(p, key)
				require.NoError(t, err)
				if ack {
					require.True(t, ok, "replica %d lacks acknowledged key %s", j, key)
				}
				_, owner, err := stores[0].Get(p, key)
				require.NoError(t, err)
				require.Equal(t, owner, ok, "key %s: replica %d differs from the owner at the same position %v", key, j, want.Position)
			}
		}
	}
}

// A claim with two replicas has its successor C chosen (both accepted it)
// but recorded by one only: the other promised a competing proposal's
// higher ballot before C's record reached it. That replica accepted C
// and nothing since, so its record still counts and C is made final: a
// majority of two is both, and without it C could never be made final
// while the replica that recorded C answers every proposer from the base
// with C. Seen in the robustness soak at cluster formation: the partition
// stayed unserved.
func TestChosenClaimOneOfTwoReplicasRecordedIsMadeFinal(t *testing.T) {
	const p = 1
	m := &mesh{}
	a, sa := m.add(t, "a")
	_, sb := m.add(t, "b")
	c, _ := m.add(t, "c")
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "b"}, BaseReplicas: []string{"a"}}, sa, sb)

	// a proposes C; b accepts it, but C's records to b are lost.
	m.setDrop(func(_, to, kind string) bool { return to == "b" && kind == "choose" })
	ok, _ := a.acquire(p, k, &ring.Table{}, []string{"a", "b", "c"})
	require.False(t, ok, "C was made final without b's record")
	mb, err := sb.Meta(p)
	require.NoError(t, err)
	require.False(t, mb.HasChosen && mb.Chosen.Epoch > k.Epoch, "b recorded C: %+v", mb)
	require.Equal(t, "a", mb.Accepted.Owner, "b did not accept C")

	// c, from the base, prepares a higher ballot: b promises it, a answers
	// with C, which c then makes final and acquires from.
	m.setDrop(nil)
	ok, _ = c.acquire(p, k, &ring.Table{}, []string{"c", "a", "b"})
	require.True(t, ok, "the partition cannot be acquired any more")
	served, serving := c.Serving(p)
	require.True(t, serving)
	require.Equal(t, mb.Accepted.Epoch, served.Base, "c did not build on C")
}

// The mirror of the case above. Both replicas of a base of two accepted
// its successor C, and neither recorded it yet. A proposer c prepares a
// higher ballot from the base and both promise it. Re-proposing C's value
// at that ballot would let one replica (a) accept the re-proposal while
// C's record reaches the other (b) first: b's record counts, so b refuses
// the re-proposal, and a's does not (a's accepted proposal is no longer
// C), so neither claim could ever be made final. The proposer instead
// sees that both promisers accepted C and would count its record, and
// makes C final. C's owner then cannot serve it (its replicas promised
// the higher ballot) and acquires the partition from C.
func TestPromisersOfABaseOfTwoThatAcceptedOneClaimGetItMadeFinal(t *testing.T) {
	const p = 1
	m := &mesh{}
	_, sa := m.add(t, "a")
	_, sb := m.add(t, "b")
	c, _ := m.add(t, "c")
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "b"}, BaseReplicas: []string{"a"}}, sa, sb)
	want := []string{"c", "a", "b"}

	// c proposes C; a and b accept it, and every record of it is lost.
	m.setDrop(func(_, _, kind string) bool { return kind == "choose" })
	ok, _ := c.acquire(p, k, &ring.Table{}, want)
	require.False(t, ok, "C was made final without records")
	mb, err := sb.Meta(p)
	require.NoError(t, err)
	cc := mb.Accepted
	require.Equal(t, "c", cc.Owner, "b did not accept C")

	// c tries again from the base; its Accepts to b are lost. Then C's
	// record reaches b alone.
	m.setDrop(func(_, to, kind string) bool { return to == "b" && kind == "accept" })
	_, seen := c.acquire(p, k, &ring.Table{}, want)
	c.parts[p].done(false, time.Now(), 0, seen) // as the planner does: the next ballot is above it
	m.setDrop(func(_, to, kind string) bool { return to == "a" && kind == "choose" })
	c.drive(NewAnnouncer(p, cc), false)
	m.setDrop(nil)

	final, _ := c.claims.Get(p)
	require.Equal(t, cc, final, "C was not made final")
	ok, _ = c.acquire(p, cc, &ring.Table{}, want)
	require.True(t, ok, "the partition cannot be acquired from C")
	served, serving := c.Serving(p)
	require.True(t, serving)
	require.Equal(t, cc.Epoch, served.Base, "c did not build on C")
}

// The same with three replicas, one of which lost its data: a claim C
// chosen by a and b, recorded by a only, while b promised a competing
// ballot before C's record reached it, and c, which never accepted C,
// lost its directory. b's record counts (it accepted C and nothing
// since), so C is made final; without that, a refuses every proposer from
// the base (it recorded C), c takes no part, and the partition would never
// be served again. Found by the simulation with -sim.wipe.
func TestChosenClaimIsMadeFinalWhenTheReplicaThatMissedItLostItsData(t *testing.T) {
	const p = 1
	m := &mesh{}
	a, sa := m.add(t, "a")
	_, sb := m.add(t, "b")
	_, sc := m.add(t, "c")
	d, _ := m.add(t, "d")
	table := &ring.Table{}
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "b", "c"}, BaseReplicas: []string{"a"}}, sa, sb, sc)

	// a proposes C: a and b accept it, only a records it.
	m.setDrop(func(_, to, kind string) bool {
		return to == "b" && kind == "choose" || to == "c" && (kind == "accept" || kind == "choose")
	})
	ok, _ := a.acquire(p, k, table, []string{"a", "b", "c"})
	require.False(t, ok, "C was made final with one record")

	// d's Prepare raises b's promise above C's epoch; its Syncs are lost,
	// and so are the records of C its attempt then asks for.
	m.setDrop(func(_, _, kind string) bool { return kind == "sync" || kind == "choose" })
	var mb store.Meta
	for range 3 { // until d's ballot is above C's
		_, seen := d.acquire(p, k, table, []string{"d", "a", "b"})
		d.parts[p].done(false, time.Now(), 0, seen)
		var err error
		mb, err = sb.Meta(p)
		require.NoError(t, err)
		if mb.Promised > mb.Accepted.Epoch {
			break
		}
	}
	require.Greater(t, mb.Promised, mb.Accepted.Epoch, "b did not promise above C")
	require.Equal(t, "a", mb.Accepted.Owner, "b did not accept C")

	m.add(t, "c") // c lost its data directory
	m.setDrop(nil)
	ok, _ = d.acquire(p, k, table, []string{"d", "a", "b"})
	require.True(t, ok, "the partition cannot be acquired any more")
	served, serving := d.Serving(p)
	require.True(t, serving)
	require.Equal(t, mb.Accepted.Epoch, served.Base, "d did not build on C")
}
