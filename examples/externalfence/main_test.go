package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/internal/pgserver"
	"github.com/singlewriter/singlewriter/router"
)

func TestStaleOwnersUpdateChangesNoRow(t *testing.T) {
	if _, err := pgserver.BinDir(); errors.Is(err, pgserver.ErrNotInstalled) {
		t.Skip("PostgreSQL server programs are not installed (apt-get install postgresql); this example needs them")
	}
	var out bytes.Buffer
	o, err := run(t.Context(), &out)
	require.NoError(t, err, out.String())
	t.Log("\n" + out.String())

	require.NotEqual(t, o.OldOwner, o.NewOwner)
	require.Greater(t, o.NewEpoch, o.OldEpoch, "the partition moved at a higher epoch")
	require.Equal(t, []attempt{
		{Node: o.OldOwner, Epoch: o.OldEpoch, Status: "approved", Rows: 1},
		{Node: o.OldOwner, Epoch: o.OldEpoch, Status: "sent", Rows: 1}, // <=: a second write in the same epoch
		{Node: o.NewOwner, Epoch: o.NewEpoch, Status: "paid", Rows: 1},
		{Node: o.OldOwner, Epoch: o.OldEpoch, Status: "cancelled", Rows: 0}, // the paused handler: fenced
	}, o.Attempts)

	require.ErrorIs(t, o.StaleCall, router.ErrHandler, "the fenced handler failed its call")
	require.ErrorContains(t, o.StaleCall, "fenced")
	require.Equal(t, invoice{ID: invoiceID, Status: "paid", WrittenBy: o.NewOwner, Fence: int64(o.NewEpoch)}, o.Row,
		"the row holds the new owner's write and epoch")

	require.Equal(t, int64(1), o.UnfencedRows, "without the predicate the stale write applies")
	require.Equal(t, invoice{ID: copyID, Status: "cancelled", WrittenBy: o.OldOwner, Fence: int64(o.OldEpoch)}, o.Copy)
}
