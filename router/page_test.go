package router

import (
	"context"
	"fmt"
	"testing"

	"github.com/singlewriter/singlewriter/owner"
	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// A partition of many small entries (keys and dedup records of a busy
// partition) must still move: each page of it must fit the frame the RPC
// server allows, or every sync of the partition fails.
func TestPageOfManySmallEntriesFitsTheFrame(t *testing.T) {
	s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	require.NoError(t, err)
	defer s.Close()
	for b := range 60 {
		batch := &store.Batch{Partition: 1, Epoch: 1}
		for i := range 1000 {
			batch.Writes = append(batch.Writes, store.KV{Key: fmt.Appendf(nil, "k%d-%d", b, i), Value: []byte{1}})
		}
		require.NoError(t, s.Commit(context.Background(), batch))
	}
	m, err := s.Meta(1)
	require.NoError(t, err)
	pos := m.Position
	var after []byte
	pages := 0
	for {
		entries, next, err := s.Export(1, pos, after, owner.FetchPageBytes)
		require.NoError(t, err)
		require.LessOrEqual(t, len(encodePage(entries, next)), owner.FetchPageBytes+64<<10)
		pages++
		if next == nil {
			break
		}
		after = next
	}
	require.Greater(t, pages, 1, "the partition spans several pages")
}
