package store

import (
	"context"
	"errors"
	"testing"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/internal/testhook"
	"github.com/stretchr/testify/require"
)

// staleWrite promises epoch 2 on a fresh partition, then commits a write at
// epoch 1, and reports the commit's error and whether the write landed.
func staleWrite(t *testing.T) (applied bool, m Meta, err error) {
	t.Helper()
	ctx := context.Background()
	s := openTest(t)
	_, promiseErr := s.Promise(ctx, 3, 2)
	require.NoError(t, promiseErr)
	err = put(ctx, s, 3, 1, "k", "zombie")
	_, applied, getErr := s.Get(3, []byte("k"))
	require.NoError(t, getErr)
	m, metaErr := s.Meta(3)
	require.NoError(t, metaErr)
	return applied, m, err
}

func TestStaleEpochWriteIsRejectedAndWritesNothing(t *testing.T) {
	applied, m, err := staleWrite(t)
	require.ErrorIs(t, err, epoch.ErrStale)
	var se *epoch.StaleError
	require.True(t, errors.As(err, &se))
	require.Equal(t, epoch.Epoch(1), se.Got)
	require.Equal(t, epoch.Epoch(2), se.Promised)
	require.False(t, applied, "a refused batch must write nothing")
	require.Equal(t, Position{}, m.Position, "a refused batch must not move the position")
}

// The control: the test above must fail when fencing is off, or it proves
// nothing.
func TestWithoutFencingStaleWriteIsApplied(t *testing.T) {
	testhook.DisableFencing(t)
	applied, m, err := staleWrite(t)
	require.NoError(t, err)
	require.True(t, applied)
	require.Equal(t, Position{Epoch: 1, LSN: 1}, m.Position)
	require.Equal(t, epoch.Epoch(2), m.Promised, "the promise still never decreases")
}

func TestPromiseFencesOldEpochButAdmitsNew(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	require.NoError(t, put(ctx, s, 0, 1, "a", "old owner"))

	m, err := s.Promise(ctx, 0, 5)
	require.NoError(t, err)
	require.Equal(t, epoch.Epoch(5), m.Promised)
	require.Equal(t, Position{Epoch: 1, LSN: 1}, m.Position)

	require.ErrorIs(t, put(ctx, s, 0, 1, "a", "zombie"), epoch.ErrStale)
	require.ErrorIs(t, put(ctx, s, 0, 4, "a", "zombie"), epoch.ErrStale)
	requireValue(t, s, 0, "a", "old owner")

	require.NoError(t, put(ctx, s, 0, 5, "a", "new owner"))
	requireValue(t, s, 0, "a", "new owner")
	require.NoError(t, put(ctx, s, 0, 6, "a", "newer"), "a write above the promise raises it")
	m, err = s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, epoch.Epoch(6), m.Promised)
	require.ErrorIs(t, put(ctx, s, 0, 5, "a", "zombie"), epoch.ErrStale)
}

// A replica can learn a claim without having promised its ballot: the
// proposer's majority did not include it. The old owner's batches that
// reach it afterwards are stale, and refused as such, with or without the
// copy it drops when the new claim does not name it (whose position would
// refuse them too, but as ErrPosition, which says nothing of the fence).
func TestBatchBelowAClaimKnownChosenIsStaleWithoutAPromise(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	require.NoError(t, put(ctx, s, 0, 1, "a", "old owner"))
	require.NoError(t, put(ctx, s, 1, 1, "a", "old owner"))
	next := Claim{Epoch: 3, Base: 1, Owner: "b", Replicas: []string{"b", "c", "d"}}
	for p := range 2 {
		_, err := s.Choose(ctx, p, next, true)
		require.NoError(t, err)
	}
	require.NoError(t, s.Drop(ctx, 1, next.Epoch))

	for p := range 2 {
		err := s.Commit(ctx, &Batch{Partition: p, Epoch: 1, Prev: &Position{Epoch: 1, LSN: 1}, Writes: []KV{{Key: []byte("a"), Value: []byte("zombie")}}})
		var se *epoch.StaleError
		require.True(t, errors.As(err, &se), "partition %d: %v", p, err)
		require.Equal(t, epoch.Epoch(3), se.Promised)
		m, err := s.Meta(p)
		require.NoError(t, err)
		require.Equal(t, epoch.Epoch(1), m.Promised, "learning a claim promises nothing")
	}
	requireValue(t, s, 0, "a", "old owner")
	require.NoError(t, put(ctx, s, 0, 3, "a", "new owner"), "the chosen claim's own epoch passes")
	requireValue(t, s, 0, "a", "new owner")
}

func TestPromiseMustBeStrictlyHigherAndRefusalReturnsCurrentMeta(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	_, err := s.Promise(ctx, 0, 0)
	require.ErrorIs(t, err, epoch.ErrStale, "epoch 0 is the root claim, never promised")

	_, err = s.Promise(ctx, 0, 3)
	require.NoError(t, err)
	require.NoError(t, put(ctx, s, 0, 3, "k", "v"))
	for _, e := range []epoch.Epoch{3, 2} {
		m, err := s.Promise(ctx, 0, e)
		require.ErrorIs(t, err, epoch.ErrStale)
		require.Equal(t, Meta{Promised: 3, Position: Position{Epoch: 3, LSN: 1}}, m)
	}
	m, err := s.Promise(ctx, 0, 4)
	require.NoError(t, err)
	require.Equal(t, epoch.Epoch(4), m.Promised)
}

func TestAcceptBelowPromiseIsRejected(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	_, err := s.Promise(ctx, 0, 5)
	require.NoError(t, err)
	require.ErrorIs(t, s.Accept(ctx, 0, Claim{Epoch: 4, Owner: "b"}), epoch.ErrStale)
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Empty(t, m.Accepted.Owner)

	c := Claim{Epoch: 7, Owner: "b", Replicas: []string{"a", "b", "c"}}
	require.NoError(t, s.Accept(ctx, 0, c))
	m, err = s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, c, m.Accepted)
	require.Equal(t, epoch.Epoch(7), m.Promised, "accepting a ballot promises it")
}

func TestPositionGrowsByOnePerBatchAcrossEpochs(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	require.NoError(t, put(ctx, s, 0, 1, "a", "1"))
	require.NoError(t, put(ctx, s, 0, 1, "a", "2"))
	require.NoError(t, s.Commit(ctx, &Batch{Partition: 0, Epoch: 2}), "an empty batch is a start marker")
	require.ErrorIs(t, put(ctx, s, 0, 1, "a", "zombie"), epoch.ErrStale)
	require.NoError(t, put(ctx, s, 0, 2, "a", "3"))
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, Position{Epoch: 2, LSN: 4}, m.Position)
	require.True(t, Position{Epoch: 1, LSN: 9}.Less(m.Position))
	require.False(t, m.Position.Less(Position{Epoch: 2, LSN: 4}))
}
