package owner

import (
	"context"
	"testing"

	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// Every Prepare answered without a promise counts in RefusedPrepares: on a
// replica that remembers, one below its promise and one from a base older
// than a final claim it knows; on one that lost its data directory, one it
// answers with the newer final claim it knows and one it takes no part in.
func TestRefusedPreparesCountsEveryRefusal(t *testing.T) {
	const p = 1
	ctx := context.Background()
	m := &mesh{}
	a, sa := m.add(t, "a")
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "b", "c"}, BaseReplicas: []string{"a"}}, sa)
	k2 := store.Claim{Epoch: 5, Base: 1, Owner: "b", Replicas: []string{"b", "a", "c"}, BaseReplicas: k.Replicas}

	r, err := a.HandlePrepare(ctx, Prepare{P: p, Ballot: 5, Base: k})
	require.NoError(t, err)
	require.True(t, r.OK)
	r, err = a.HandlePrepare(ctx, Prepare{P: p, Ballot: 3, Base: k})
	require.NoError(t, err)
	require.False(t, r.OK, "a promised 5")
	_, err = sa.Choose(ctx, p, k2, true)
	require.NoError(t, err)
	r, err = a.HandlePrepare(ctx, Prepare{P: p, Ballot: 7, Base: k})
	require.NoError(t, err)
	require.False(t, r.OK, "a knows a final claim newer than the base")
	require.EqualValues(t, 2, a.Stats().RefusedPrepares)

	c, sc := m.add(t, "c") // c lost its data directory, then learned k2
	_, err = sc.Choose(ctx, p, k2, true)
	require.NoError(t, err)
	r, err = c.HandlePrepare(ctx, Prepare{P: p, Ballot: 9, Base: k})
	require.NoError(t, err)
	require.False(t, r.OK, "c knows a final claim newer than the base")
	_, err = c.HandlePrepare(ctx, Prepare{P: p, Ballot: 9, Base: k2})
	require.ErrorIs(t, err, errNoPart, "c forgot what it promised for k2")
	require.EqualValues(t, 2, c.Stats().RefusedPrepares)
}
