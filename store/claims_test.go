package store

import (
	"context"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/stretchr/testify/require"
)

func TestChooseRecordsOnlyNewerClaimsAndAuditsThem(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	at := time.Unix(1700000000, 0)
	s.now = func() time.Time { return at }

	root := Claim{Epoch: 0, Owner: "a", Replicas: []string{"a"}}
	require.NoError(t, choose(ctx, s, 1, root), "the root claim at epoch 0 is recorded")
	require.NoError(t, choose(ctx, s, 1, Claim{Epoch: 0, Owner: "b"}), "not newer: a no-op, not an error")
	next := Claim{Epoch: 4, Owner: "b", Replicas: []string{"a", "b"}}
	require.NoError(t, choose(ctx, s, 1, next))
	require.NoError(t, choose(ctx, s, 1, Claim{Epoch: 2, Owner: "c"}), "older: a no-op")

	m, err := s.Meta(1)
	require.NoError(t, err)
	require.True(t, m.HasChosen)
	require.Equal(t, next, m.Chosen)
	require.Equal(t, epoch.Epoch(0), m.Promised, "learning a claim is not a promise")

	audit, err := s.Audit(1)
	require.NoError(t, err)
	require.Len(t, audit, 2)
	require.Equal(t, epoch.Epoch(0), audit[0].Epoch)
	require.Equal(t, "a", audit[0].Owner)
	require.Equal(t, epoch.Epoch(4), audit[1].Epoch)
	require.Equal(t, "b", audit[1].Owner)
	require.True(t, at.Equal(audit[1].At))
}

func TestChooseClearsSettledAcceptedProposalOnly(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	require.NoError(t, s.Accept(ctx, 0, Claim{Epoch: 5, Owner: "b"}))
	_, err := s.Choose(ctx, 0, Claim{Epoch: 3, Owner: "a"}, true)
	require.NoError(t, err)
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, Claim{Epoch: 5, Owner: "b"}, m.Accepted, "a proposal above the chosen claim stays")

	require.NoError(t, choose(ctx, s, 0, Claim{Epoch: 5, Owner: "b"}))
	m, err = s.Meta(0)
	require.NoError(t, err)
	require.Empty(t, m.Accepted.Owner, "the proposal was chosen: settled")
}

func TestClaimWithoutOwnerIsInvalid(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	require.ErrorIs(t, s.Accept(ctx, 0, Claim{Epoch: 1}), ErrInvalid)
	require.ErrorIs(t, choose(ctx, s, 0, Claim{Epoch: 1}), ErrInvalid)
	_, err := s.Promise(ctx, -1, 1)
	require.ErrorIs(t, err, ErrInvalid)
}

func TestPartitionsListsTouchedPartitionsAscending(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	_, err := s.Promise(ctx, 300, 1)
	require.NoError(t, err)
	require.NoError(t, choose(ctx, s, 10, Claim{Owner: "a"}))
	require.NoError(t, put(ctx, s, 2, 0, "k", "v"))
	require.NoError(t, s.Drop(ctx, 5, 0)) // untouched: stays absent
	ps, err := s.Partitions()
	require.NoError(t, err)
	require.Equal(t, []int{2, 10, 300}, ps)
	m, err := s.Meta(5)
	require.NoError(t, err)
	require.Equal(t, Meta{}, m)
}

func TestChooseMarksFinalAndReturnsThePreviousMeta(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	c := Claim{Epoch: 2, Base: 0, Owner: "b", Replicas: []string{"b"}, BaseReplicas: []string{"a"}}
	prev, err := s.Choose(ctx, 0, c, false)
	require.NoError(t, err)
	require.False(t, prev.HasChosen)
	m, _ := s.Meta(0)
	require.Equal(t, c, m.Chosen)
	require.False(t, m.Final, "recorded, not final")

	prev, err = s.Choose(ctx, 0, c, true)
	require.NoError(t, err)
	require.True(t, prev.HasChosen)
	require.False(t, prev.Final)
	m, _ = s.Meta(0)
	require.True(t, m.Final, "the same claim can be marked final later")

	older := Claim{Epoch: 1, Owner: "c"}
	prev, err = s.Choose(ctx, 0, older, true)
	require.NoError(t, err)
	require.Equal(t, c, prev.Chosen, "the previous meta names the newer claim that stays")
	m, _ = s.Meta(0)
	require.Equal(t, c, m.Chosen)
	audit, _ := s.Audit(0)
	require.Len(t, audit, 1, "marking final is not a new epoch transition")
}

func TestChooseKeepsNoRecordThatCannotCountTowardFinality(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	c := Claim{Epoch: 3, Owner: "b", Replicas: []string{"b"}, BaseReplicas: []string{"a"}}
	newer := Claim{Epoch: 5, Owner: "c", Replicas: []string{"c"}, BaseReplicas: []string{"a"}}
	_, err := s.Promise(ctx, 0, 5)
	require.NoError(t, err)
	require.NoError(t, s.Accept(ctx, 0, newer))
	prev, err := s.Choose(ctx, 0, c, false)
	require.NoError(t, err)
	require.Equal(t, epoch.Epoch(5), prev.Promised)
	m, _ := s.Meta(0)
	require.False(t, m.HasChosen, "a newer successor of the base was accepted first: the record would not count, it is not kept")
	audit, _ := s.Audit(0)
	require.Empty(t, audit)

	_, err = s.Choose(ctx, 0, c, true)
	require.NoError(t, err)
	m, _ = s.Meta(0)
	require.True(t, m.HasChosen && m.Final, "a final claim is recorded whatever the promise")
	require.Equal(t, c, m.Chosen)
}
