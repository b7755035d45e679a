package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPruneResponsesDeletesOnlyOlderRecords(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	clock := time.Unix(1000, 0)
	s.now = func() time.Time { return clock }
	commit := func(p int, id string) {
		require.NoError(t, s.Commit(ctx, &Batch{Partition: p, RequestID: []byte(id), Response: []byte("r-" + id),
			Writes: []KV{{Key: []byte("k-" + id), Value: []byte("v")}}}))
	}
	commit(0, "old0")
	commit(1, "old1")
	clock = time.Unix(2000, 0)
	commit(0, "new0")

	n, err := s.PruneResponses(ctx, time.Unix(2000, 0))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, id := range []string{"old0", "old1"} {
		_, ok, err := s.Response(int(id[3]-'0'), []byte(id))
		require.NoError(t, err)
		require.False(t, ok, id)
	}
	resp, ok, err := s.Response(0, []byte("new0"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "r-new0", string(resp))
	requireValue(t, s, 0, "k-old0", "v") // pruning forgets responses, not data

	n, err = s.PruneResponses(ctx, time.Unix(1500, 0))
	require.NoError(t, err)
	require.Zero(t, n)
}
