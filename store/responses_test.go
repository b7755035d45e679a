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

// TestResponseBoundFollowsEveryChangeOfTheFile checks the shortcut that
// skips the file for a request ID above every ID it holds: the bound must
// grow with each background flush and be forgotten by any other write.
func TestResponseBoundFollowsEveryChangeOfTheFile(t *testing.T) {
	ctx := context.Background()
	s, err := Open(Config{Dir: t.TempDir(), NoSync: true, FlushBytes: 1, FlushInterval: time.Hour})
	require.NoError(t, err)
	defer s.Close()
	flushed := func(id string) { // committed, then flushed in the background
		t.Helper()
		n := s.flushes.Load()
		require.NoError(t, s.Commit(ctx, &Batch{Partition: 0, Epoch: 1, RequestID: []byte(id), Response: []byte("r-" + id)}))
		require.Eventually(t, func() bool { return s.flushes.Load() > n }, 10*time.Second, time.Millisecond)
	}
	requireResponse := func(id string) {
		t.Helper()
		r, ok, err := s.Response(0, []byte(id))
		require.NoError(t, err)
		require.True(t, ok, id)
		require.Equal(t, "r-"+id, string(r))
	}
	bound := func() string {
		s.memMu.RLock()
		defer s.memMu.RUnlock()
		return string(s.fileIDs[0])
	}

	flushed("id-2")
	_, ok, err := s.Response(0, []byte("id-1")) // below the bound: looked up in the file
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, "id-2", bound(), "the lookup learns the file's highest ID")
	_, ok, err = s.Response(0, []byte("id-9")) // above it: not looked up
	require.NoError(t, err)
	require.False(t, ok)

	flushed("id-3")
	require.Equal(t, "id-3", bound())
	requireResponse("id-3") // found above the old bound: the flush raised it
	flushed("id-0")
	require.Equal(t, "id-3", bound())
	requireResponse("id-0")

	// A partition installed by a transfer holds IDs the bound never saw.
	src := openTest(t)
	require.NoError(t, src.Commit(ctx, &Batch{Partition: 0, Epoch: 1, RequestID: []byte("id-7"), Response: []byte("r-id-7")}))
	srcMeta, err := src.Promise(ctx, 0, 2)
	require.NoError(t, err)
	entries, _ := exportAll(t, src, 0, 1<<20)
	require.NoError(t, install(ctx, s, 0, 2, entries, srcMeta.Position))
	requireResponse("id-7")
}
