package owner

import (
	"context"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// claimOn makes claim k final on the given stores, with k=v1 written
// under it, and returns it.
func claimOn(t *testing.T, p int, k store.Claim, stores ...*store.Store) store.Claim {
	for _, s := range stores {
		_, err := s.Choose(context.Background(), p, k, true)
		require.NoError(t, err)
		require.NoError(t, s.Commit(context.Background(), &store.Batch{Partition: p, Epoch: k.Epoch, Writes: []store.KV{{Key: []byte("k"), Value: []byte("v1")}}}))
	}
	return k
}

// A replica that lost its data directory is readmitted by a Sync (the
// install raises its promise), but it forgot the claims it recorded before
// the loss. A proposer from the older base then counts it in a majority
// and makes a second successor of that base final: two owners acknowledge
// writes at once.
//
// K (epoch 1) is owned by a with replicas {a,b,c}. b acquires it with the
// ring's new replica set {b,a,f} (K2, epoch 2); a and b accept and record
// it, c misses the Accept and every Choose. a loses its directory. b's
// resync (K3, epoch 3) syncs a copy to a, whose Accept and Choose are
// lost. c, cut off from b and still knowing only K, acquires from K: a and
// c are a majority of K's replicas, neither remembers K2.
func TestReadmittedAmnesiacReplicaDoesNotLetAStaleBaseGetASecondSuccessor(t *testing.T) {
	const p = 1
	m := &mesh{}
	_, sa := m.add(t, "a")
	b, sb := m.add(t, "b")
	c, sc := m.add(t, "c")
	m.add(t, "f")
	m.add(t, "d")
	m.add(t, "e")
	table := &ring.Table{}

	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "b", "c"}, BaseReplicas: []string{"a"}}, sa, sb, sc)

	// K2: c misses the Accept and every Choose.
	m.setDrop(func(from, to, kind string) bool { return to == "c" && (kind == "accept" || kind == "choose") })
	ok, _ := b.acquire(p, k, table, []string{"b", "a", "f"})
	require.True(t, ok)
	k2, serving := b.Serving(p)
	require.True(t, serving)
	require.NoError(t, writeVia(t, b, p, "k", "v2"))

	// a loses its data directory and comes back blank.
	m.add(t, "a")

	// K3: b's resync syncs a, whose Accept and Choose are lost.
	m.setDrop(func(from, to, kind string) bool {
		return to == "c" && (kind == "accept" || kind == "choose") || to == "a" && (kind == "accept" || kind == "choose")
	})
	ok, _ = b.acquire(p, k2, table, []string{"b", "a", "f"})
	require.True(t, ok)
	k3, serving := b.Serving(p)
	require.True(t, serving)
	require.Equal(t, "b", k3.Owner)
	require.NoError(t, writeVia(t, b, p, "k", "v3"))

	// c, cut off from b, acquires from K with replicas {c,d,e}.
	m.setDrop(func(from, to, kind string) bool {
		return from == "c" && to == "b" || from == "b" && to == "c"
	})
	acquired := false
	for range 3 {
		ok, seen := c.acquire(p, k, table, []string{"c", "d", "e"})
		c.parts[p].done(ok, time.Time{}, 0, seen)
		if acquired = ok; ok {
			break
		}
	}
	require.True(t, acquired, "c and a majority of b's replicas can take over")
	kc, _ := c.Serving(p)
	require.GreaterOrEqual(t, kc.Base, k3.Epoch, "c's claim %+v is no successor of b's newest, %+v", kc, k3)
	v, _, err := sc.Get(p, []byte("k"))
	require.NoError(t, err)
	require.Equal(t, "v3", string(v), "c serves without the write b acknowledged under %+v", k3)
	cErr := writeVia(t, c, p, "k", "from c")
	bErr := writeVia(t, b, p, "k", "from b")
	require.Falsef(t, cErr == nil && bErr == nil,
		"two owners acknowledged writes at once: b under %+v, c under %+v (both successors of %+v)", k3, kc, k)
}

// A replica that accepted a successor of a claim, lost its data directory
// and was given a copy again by a competing proposal from the same claim
// (its Sync raises the promise) must take no part in choosing that
// successor any more: it forgot what it accepted, and a proposer counting
// it in a majority could choose a second successor.
//
// K (epoch 1, replicas a, b, c): d's proposal is accepted by a and b, so it
// is chosen, but no Choose arrives. a loses its directory. e's proposal
// learns d's value from b's promise and syncs a, then loses its Accepts.
// c's proposal, cut off from b, asks a and c, which accepted nothing.
func TestReadmittedReplicaTakesNoPartInTheChoiceItForgot(t *testing.T) {
	const p = 1
	m := &mesh{}
	_, sa := m.add(t, "a")
	_, sb := m.add(t, "b")
	c, sc := m.add(t, "c")
	d, _ := m.add(t, "d")
	e, _ := m.add(t, "e")
	table := &ring.Table{}
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "b", "c"}, BaseReplicas: []string{"a"}}, sa, sb, sc)

	m.setDrop(func(from, to, kind string) bool { return kind == "choose" || to == "c" && kind == "accept" })
	ok, _ := d.acquire(p, k, table, []string{"d", "a", "c"})
	require.False(t, ok, "d's proposal is chosen but cannot be made final")
	m.add(t, "a")

	m.setDrop(func(from, to, kind string) bool { return kind == "choose" || kind == "accept" })
	var meta store.Meta
	for range 3 { // until e's ballot is above the promises of d's proposal
		ok, seen := e.acquire(p, k, table, []string{"e", "a", "c"})
		require.False(t, ok)
		e.parts[p].done(false, time.Time{}, 0, seen)
		var err error
		meta, err = m.nodes["a"].store.Meta(p)
		require.NoError(t, err)
		if meta.Promised != 0 {
			break
		}
	}
	require.NotZero(t, meta.Promised, "e's Sync readmitted a")

	m.setDrop(func(from, to, kind string) bool { return from == "c" && to == "b" || from == "b" && to == "c" })
	for range 3 {
		ok, seen := c.acquire(p, k, table, []string{"c", "d", "e"})
		c.parts[p].done(ok, time.Time{}, 0, seen)
		if ok {
			got, _ := c.Serving(p)
			require.Equal(t, "d", got.Owner, "a second successor of %+v was chosen, %+v, though d's proposal was", k, got)
		}
	}
}

// A Sync from a proposal that lost its race (its node paused between the
// promises and the Syncs) reaches a replica that, meanwhile, voted in the
// choice of a successor of a newer claim and then lost its data directory.
// Had it been readmitted under the Sync's base, older than that choice, it
// would take part in it again with a blank memory, and a second successor
// of the newer claim could be chosen: two owners at the same epoch. The
// replica refuses the Sync: the claims table it got from the cluster on
// joining knows a newer final claim. (Had that table lagged, the stale
// Sync would readmit it: see docs/PROTOCOL.md, Amnesia.)
//
// K (epoch 1, owner c, replicas a, b, c). c prepares ballot 2 from K (b and
// c promise) and pauses before its Sync to a goes out. b acquires K1 from K
// (epoch 3, replicas b, a, d), then K2 from K1 (epoch 4, replicas b, e, f):
// a accepts and records both, d misses K2. a loses its directory; c's Sync
// arrives. d, cut off from b, acquires from K1 with a and d.
func TestStaleSyncDoesNotReadmitAReplicaThatKnowsANewerClaim(t *testing.T) {
	ctx := context.Background()
	const p = 1
	m := &mesh{}
	_, sa := m.add(t, "a")
	b, sb := m.add(t, "b")
	c, sc := m.add(t, "c")
	d, _ := m.add(t, "d")
	m.add(t, "e")
	m.add(t, "f")
	m.add(t, "g")
	table := &ring.Table{}

	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "c", Replicas: []string{"a", "b", "c"}, BaseReplicas: []string{"c"}}, sa, sb, sc)
	// c, K's owner, is ahead of its backups.
	require.NoError(t, sc.Commit(ctx, &store.Batch{Partition: p, Epoch: 1, Writes: []store.KV{{Key: []byte("k"), Value: []byte("v1b")}}}))

	// c's proposal from K: b and c promise ballot 2; its Sync to a is held
	// back (c pauses), and its Accepts never arrive.
	m.setDrop(func(from, to, kind string) bool {
		return to == "a" && (kind == "prepare" || kind == "sync") || kind == "accept"
	})
	ok, _ := c.acquire(p, k, table, []string{"c", "a", "b"})
	require.False(t, ok)
	cm, err := sc.Meta(p)
	require.NoError(t, err)
	// The Sync c's proposal sent to a (Proposer.startSync: source c, the
	// most advanced promiser).
	stale := Sync{P: p, Ballot: cm.Promised, Base: k, Source: "c", Pos: cm.Position}
	require.EqualValues(t, 2, stale.Ballot)

	// c is paused: it hears nothing more (but answers a Fetch later).
	toC := func(to, kind string) bool { return to == "c" && kind != "fetch" }
	m.setDrop(func(from, to, kind string) bool { return toC(to, kind) })
	ok, _ = b.acquire(p, k, table, []string{"b", "a", "d"})
	require.True(t, ok, "K1")
	k1, _ := b.Serving(p)

	m.setDrop(func(from, to, kind string) bool { return toC(to, kind) || to == "d" })
	ok, _ = b.acquire(p, k1, table, []string{"b", "e", "f"})
	require.True(t, ok, "K2")
	k2, _ := b.Serving(p)
	require.Equal(t, k1.Epoch, k2.Base)

	// a loses its data directory, joins again (its claims table comes
	// from a peer), and c's Sync arrives.
	na, _ := m.add(t, "a")
	na.claims.Merge(p, k2)
	require.Error(t, syncCopy(ctx, na, stale), "the stale Sync readmits a")

	// d, cut off from b, acquires from K1 (the newest claim it knows).
	m.setDrop(func(from, to, kind string) bool {
		return toC(to, kind) || from == "b" && to == "d" || from == "d" && to == "b"
	})
	ok, _ = d.acquire(p, k1, table, []string{"d", "a", "g"})
	if ok {
		k3, _ := d.Serving(p)
		bErr := writeVia(t, b, p, "k", "from b")
		dErr := writeVia(t, d, p, "k", "from d")
		require.Falsef(t, bErr == nil && dErr == nil,
			"two owners acknowledged writes at once: b under %+v, d under %+v, both successors of %+v", k2, k3, k1)
	}
}

// A replica that lost its data directory records no claim that is not
// known final: before the loss it may have promised a higher ballot to a
// proposer that then replaced the claim, and its record would count as if
// it had not. A final claim it learns, as any node does.
func TestReplicaThatLostItsDataRecordsOnlyFinalClaims(t *testing.T) {
	const p = 1
	ctx := context.Background()
	m := &mesh{}
	_, sa := m.add(t, "a")
	_, sb := m.add(t, "b")
	_, sc := m.add(t, "c")
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "b", "c"}, BaseReplicas: []string{"a"}}, sa, sb, sc)
	b, sb := m.add(t, "b") // b lost its data directory
	next := store.Claim{Epoch: 2, Base: k.Epoch, Owner: "c", Replicas: []string{"c", "a", "b"}, BaseReplicas: k.Replicas}

	r, err := b.HandleChoose(ctx, Choose{P: p, Claim: next})
	require.Error(t, err, "b took part in making a claim final")
	require.False(t, r.Recorded)
	meta, err := sb.Meta(p)
	require.NoError(t, err)
	require.False(t, meta.HasChosen, "b recorded a claim it cannot vouch for")

	_, err = b.HandleChoose(ctx, Choose{P: p, Claim: next, Final: true})
	require.NoError(t, err)
	meta, err = sb.Meta(p)
	require.NoError(t, err)
	require.True(t, meta.HasChosen && meta.Final && meta.Chosen.Equal(next), "b did not learn the final claim: %+v", meta)
}

// A replica that lost its data directory takes no replicated batch. A
// delayed start marker of a claim over no data follows the zero position,
// where a blank store stands: applied, it would make the replica look as
// if it remembered, and it would take part again, with a blank memory, in
// the choice of a successor it had helped decide. Only a Sync readmits it
// (store.Readmit). Found by a helper review, with two owners acknowledging
// writes.
//
// K (epoch 1, replicas a, w, x; its marker committed on a and x) is
// succeeded by d's claim D, chosen and recorded by a and w while x hears
// nothing. w loses its directory, then K's marker reaches it. c, which
// knows only K and is cut off from a and d, asks w and x.
func TestReplicaThatLostItsDataTakesNoReplicatedBatch(t *testing.T) {
	ctx := context.Background()
	const p = 1
	m := &mesh{}
	_, sa := m.add(t, "a")
	_, sw := m.add(t, "w")
	_, sx := m.add(t, "x")
	d, _ := m.add(t, "d")
	c, _ := m.add(t, "c")
	table := &ring.Table{}
	k := store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "w", "x"}, BaseReplicas: []string{"a"}}
	for _, s := range []*store.Store{sa, sw, sx} {
		_, err := s.Promise(ctx, p, 1)
		require.NoError(t, err)
		_, err = s.Choose(ctx, p, k, true)
		require.NoError(t, err)
	}
	for _, s := range []*store.Store{sa, sx} {
		require.NoError(t, s.Commit(ctx, &store.Batch{Partition: p, Epoch: 1}))
	}

	m.setDrop(func(from, to, _ string) bool { return to == "x" || from == "x" })
	ok, _ := d.acquire(p, k, table, []string{"d", "a", "w"})
	require.True(t, ok)
	dc, _ := d.Serving(p)

	w, sw := m.add(t, "w")
	errs := w.HandleReplicate(ctx, Replicate{Batches: []store.Batch{{Partition: p, Epoch: 1, Prev: &store.Position{}}}})
	require.Error(t, errs[0], "the replica that lost its data applied a replicated batch")
	mw, err := sw.Meta(p)
	require.NoError(t, err)
	require.Zero(t, mw.Promised)

	cut := func(x, y string) func(from, to, _ string) bool {
		return func(from, to, _ string) bool { return from == x && to == y || from == y && to == x }
	}
	ca, cd := cut("c", "a"), cut("c", "d")
	m.setDrop(func(from, to, kind string) bool { return ca(from, to, kind) || cd(from, to, kind) })
	for range 3 {
		ok, seen := c.acquire(p, k, table, []string{"c", "w", "x"})
		c.parts[p].done(ok, time.Time{}, 0, seen)
	}
	got, serving := c.Serving(p)
	require.False(t, serving && got.Base == k.Epoch, "a second successor of K was made final: %+v, beside %+v", got, dc)
}
