package owner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
)

// The tests below tie the Proposer to the sentences of "The acquire
// protocol" in DESIGN.md.

var base3 = store.Claim{Epoch: 4, Owner: "a", Replicas: []string{"a", "b", "c"}}

func promise(m store.Meta) PromiseReply { return PromiseReply{OK: true, Meta: m} }

func chosenAt(c store.Claim, promised epoch.Epoch, pos store.Position) store.Meta {
	return store.Meta{Promised: promised, HasChosen: true, Final: true, Chosen: c, Position: pos}
}

func TestProposerPreparesTheBaseReplicasAboveEverySeenEpoch(t *testing.T) {
	a := NewProposer(0, "d", base3, 9, []string{"d", "a", "b"})
	require.Equal(t, epoch.Epoch(10), a.Ballot())
	msgs := a.Start()
	require.Len(t, msgs, 3)
	for i, m := range msgs {
		require.Equal(t, base3.Replicas[i], m.To)
		require.Equal(t, Prepare{P: 0, Ballot: 10, Base: base3}, *m.Prepare)
	}
}

func TestProposerRestartsFromANewerChosenClaim(t *testing.T) {
	a := NewProposer(0, "d", base3, 0, []string{"d"})
	a.Start()
	newer := store.Claim{Epoch: 6, Base: 4, Owner: "b", Replicas: []string{"b"}}
	require.Nil(t, a.OnPromise("b", PromiseReply{Meta: chosenAt(newer, 6, store.Position{})}))
	require.Equal(t, Done, a.Phase())
	require.Equal(t, &newer, a.Outcome().Newer)
	require.True(t, a.Outcome().NewerFinal)
}

func TestProposerReportsTheRefusingPromise(t *testing.T) {
	a := NewProposer(0, "d", base3, 0, []string{"d"})
	a.Start()
	a.OnPromise("a", PromiseReply{Meta: store.Meta{Promised: 12, HasChosen: true, Chosen: base3}})
	require.Equal(t, Done, a.Phase())
	require.Equal(t, epoch.Epoch(12), a.Outcome().Rejected)
}

func TestProposerReproposesTheHighestAcceptedSuccessorOfItsBase(t *testing.T) {
	a := NewProposer(0, "d", base3, 7, []string{"d"})
	a.Start()
	older := store.Claim{Epoch: 6, Base: 4, Owner: "b", Replicas: []string{"b"}}
	higher := store.Claim{Epoch: 7, Base: 4, Owner: "c", Replicas: []string{"c", "a"}}
	otherBase := store.Claim{Epoch: 9, Base: 2, Owner: "x", Replicas: []string{"x"}}
	ma, mb := chosenAt(base3, 8, store.Position{Epoch: 4, LSN: 3}), chosenAt(base3, 8, store.Position{Epoch: 4, LSN: 5})
	ma.Accepted, mb.Accepted = older, higher
	mc := chosenAt(base3, 8, store.Position{})
	mc.Accepted = otherBase // a proposal for another base is no successor of ours
	require.Nil(t, a.OnPromise("a", promise(ma)))
	syncs := a.OnPromise("b", promise(mb))
	require.Len(t, syncs, 2, "one Sync per replica of the re-proposed value")
	for _, m := range syncs {
		require.Equal(t, Sync{P: 0, Ballot: 8, Base: base3, Source: "b", Pos: store.Position{Epoch: 4, LSN: 5}}, *m.Sync,
			"the data comes from the most advanced promiser")
	}
	require.Equal(t, []string{"c", "a"}, []string{syncs[0].To, syncs[1].To})
	require.Nil(t, a.OnPromise("c", promise(mc)), "late promises change nothing")
}

func TestProposerAcceptsOnlyOnceTheNewOwnerHoldsTheData(t *testing.T) {
	a := NewProposer(0, "d", base3, 0, []string{"d", "a", "b"})
	a.Start()
	a.OnPromise("a", promise(chosenAt(base3, 5, store.Position{Epoch: 4, LSN: 9})))
	require.NotEmpty(t, a.OnPromise("b", promise(chosenAt(base3, 5, store.Position{Epoch: 4, LSN: 9}))))
	require.Nil(t, a.OnSynced("a", true))
	require.Nil(t, a.OnSynced("b", true), "a majority without the owner is not enough")
	accepts := a.OnSynced("d", true)
	require.Len(t, accepts, 3)
	require.Equal(t, base3, accepts[0].Accept.Base)
	require.Equal(t, store.Claim{Epoch: 5, Base: 4, Owner: "d", Replicas: []string{"d", "a", "b"}, BaseReplicas: base3.Replicas}, accepts[0].Accept.Value)
}

func TestProposerChosenValueIsFinalOnlyAfterAMajorityOfBaseReplicasRecordedIt(t *testing.T) {
	a := NewProposer(0, "a", base3, 0, []string{"a"})
	a.Start()
	a.OnPromise("a", promise(chosenAt(base3, 5, store.Position{})))
	a.OnPromise("b", promise(chosenAt(base3, 5, store.Position{})))
	a.OnSynced("a", true)
	a.OnAccepted("a", AcceptReply{OK: true})
	choose := a.OnAccepted("b", AcceptReply{OK: true})
	require.Len(t, choose, 3)
	require.Equal(t, Announcing, a.Phase(), "chosen, not yet final")
	require.False(t, choose[0].Choose.Final)

	a.OnChosen("a", ChooseReply{Recorded: true})
	a.OnChosen("b", ChooseReply{Recorded: false}) // b promised a higher ballot first: its record does not count
	require.Equal(t, Announcing, a.Phase())
	a.OnChosen("c", ChooseReply{Recorded: true})
	require.Equal(t, Done, a.Phase())
	require.Equal(t, "a", a.Outcome().Chosen.Owner)
}

func TestPlanResumesOwnClaimsAcquiresDesiredOnesAndReleasesSuperseded(t *testing.T) {
	tbl := &ring.Table{Owners: []string{"me", "me", "x", "me"}}
	claims := []store.Claim{
		{Epoch: 3, Owner: "me"}, // ours, not served: resume
		{Epoch: 2, Owner: "x"},  // desired: acquire
		{Epoch: 5, Owner: "me"}, // ours but fenced, not desired: wait
		{Epoch: 9, Owner: "y"},  // we serve epoch 8: superseded
	}
	serving := func(p int) (store.Claim, bool) {
		if p == 3 {
			return store.Claim{Epoch: 8, Owner: "me"}, true
		}
		return store.Claim{}, false
	}
	fenced := func(p int, c store.Claim) bool { return p == 2 }
	steps := Plan("me", tbl, claims, serving, fenced, func(int) bool { return false })
	require.Equal(t, []Step{
		{P: 0, Action: Resume, Claim: claims[0]},
		{P: 1, Action: Acquire, Claim: claims[1]},
		{P: 3, Action: Release, Claim: claims[3]},
	}, steps)
}

func TestPlanAcquiresReplicatedClaimsAgainInsteadOfResumingOrWhenReplicasChange(t *testing.T) {
	tbl := &ring.Table{
		Owners:   []string{"me", "me", "me", "me"},
		Replicas: [][]string{{"me", "b", "c"}, {"me", "b", "c"}, {"me", "c", "b"}, {"me", "b", "c"}},
	}
	claims := []store.Claim{
		{Epoch: 3, Owner: "me", Replicas: []string{"me", "b", "c"}}, // ours, replicated, not served: acquire
		{Epoch: 4, Owner: "me", Replicas: []string{"me", "b", "d"}}, // served; d left the ring: acquire
		{Epoch: 5, Owner: "me", Replicas: []string{"me", "b", "c"}}, // served, same set in another order: nothing
		{Epoch: 6, Owner: "me", Replicas: []string{"me", "b", "c"}}, // served, a replica lags: acquire
	}
	serving := func(p int) (store.Claim, bool) { return claims[p], p > 0 }
	lagging := func(p int) bool { return p == 3 }
	steps := Plan("me", tbl, claims, serving, func(int, store.Claim) bool { return false }, lagging)
	require.Equal(t, []Step{
		{P: 0, Action: Acquire, Claim: claims[0]},
		{P: 1, Action: Acquire, Claim: claims[1]},
		{P: 3, Action: Acquire, Claim: claims[3]},
	}, steps)
}

// A proposer to which no more answers can come ends with the chosen claim
// a replica refused it for, to be made final, rather than waiting for
// refusals from replicas that may never answer (one that lost its data).
func TestProposerThatGivesUpReportsTheChosenClaimItWasRefusedFor(t *testing.T) {
	newer := store.Claim{Epoch: 6, Base: 4, Owner: "b", Replicas: []string{"b", "a", "c"}}
	a := NewProposer(0, "d", base3, 7, []string{"d"})
	a.Start()
	require.Nil(t, a.OnPromise("a", PromiseReply{Meta: store.Meta{Promised: 6, HasChosen: true, Chosen: newer}}))
	require.Equal(t, Preparing, a.Phase(), "one refusal of three leaves a majority possible")
	a.GiveUp()
	require.Equal(t, Done, a.Phase())
	require.Equal(t, Outcome{Newer: &newer}, a.Outcome())

	b := NewProposer(0, "d", base3, 7, []string{"d"})
	b.Start()
	require.Nil(t, b.OnPromise("a", promise(chosenAt(base3, 8, store.Position{}))))
	b.GiveUp()
	require.Equal(t, Outcome{Failed: true}, b.Outcome())
}

// Promisers that all accepted one successor of the base show it chosen (they
// are a majority), and each of them counts a record of it: the attempt
// makes it final instead of proposing its value again. Promisers that
// accepted different claims, or not all of them one, show nothing chosen,
// and the attempt proposes the highest-ballot value.
func TestProposerMakesFinalTheClaimEveryPromiserAccepted(t *testing.T) {
	next := store.Claim{Epoch: 6, Base: 4, Owner: "b", Replicas: []string{"b", "a", "c"}, BaseReplicas: base3.Replicas}
	older := next
	older.Epoch = 5
	accepted := func(c store.Claim) PromiseReply {
		m := chosenAt(base3, 8, store.Position{Epoch: 4, LSN: 3})
		m.Accepted = c
		return promise(m)
	}

	a := NewProposer(0, "d", base3, 7, []string{"d"})
	a.Start()
	require.Nil(t, a.OnPromise("a", accepted(next)))
	require.Nil(t, a.OnPromise("b", accepted(next)), "the value was proposed again")
	require.Equal(t, Outcome{Newer: &next}, a.Outcome())

	for _, other := range []store.Claim{older, {}} {
		b := NewProposer(0, "d", base3, 7, []string{"d"})
		b.Start()
		b.OnPromise("a", accepted(next))
		require.NotEmpty(t, b.OnPromise("b", accepted(other)), "promisers that accepted %+v and %+v showed a claim chosen", next, other)
		require.Equal(t, Syncing, b.Phase())
	}
}

func TestProposerCopiesFromThePreferredSourceAmongTheMostAdvanced(t *testing.T) {
	at, behind := store.Position{Epoch: 4, LSN: 9}, store.Position{Epoch: 4, LSN: 8}
	for _, c := range []struct {
		prefer string
		bAt    store.Position
		want   string
	}{{"", at, "a"}, {"b", at, "b"}, {"c", at, "a"}, {"b", behind, "a"}} {
		a := NewProposer(0, "d", base3, 0, []string{"d", "a", "b"})
		a.PreferSource(c.prefer)
		a.Start()
		require.Nil(t, a.OnPromise("a", promise(chosenAt(base3, 5, at))))
		syncs := a.OnPromise("b", promise(chosenAt(base3, 5, c.bAt)))
		require.NotEmpty(t, syncs)
		require.Equal(t, c.want, syncs[0].Sync.Source, "preferring %q, b at %v", c.prefer, c.bAt)
	}
}
