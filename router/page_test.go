package router

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/singlewriter/singlewriter/internal/wire"
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
		require.LessOrEqual(t, wire.HeaderSize+len(owner.Page{Entries: entries, Next: next, Tracker: math.MaxUint64}.Encode()), frameLimit(defaultMaxPayload))
		pages++
		if next == nil {
			break
		}
		after = next
	}
	require.Greater(t, pages, 1, "the partition spans several pages")
}

// A page's first entry goes on it however large, and the cursor of the
// next page repeats its key: an entry of the longest key and the largest
// value a call may write, followed by another, must still fit the frame,
// or every sync of its partition fails and the partition is never served
// again once its replica set changes.
func TestPageOfTheLargestEntryFitsTheFrame(t *testing.T) {
	s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	require.NoError(t, err)
	defer s.Close()
	key := bytes.Repeat([]byte("k"), store.MaxKeySize)
	batches := []*store.Batch{
		{Partition: 1, Epoch: 1, Writes: []store.KV{{Key: key, Value: make([]byte, defaultMaxPayload)}}},
		{Partition: 1, Epoch: 1, Writes: []store.KV{{Key: []byte("z"), Value: []byte{1}}}},
	}
	for _, b := range batches {
		require.NoError(t, s.Commit(context.Background(), b))
	}
	m, err := s.Meta(1)
	require.NoError(t, err)
	entries, next, err := s.Export(1, m.Position, nil, owner.FetchPageBytes)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.NotNil(t, next)
	require.LessOrEqual(t, wire.HeaderSize+len(owner.Page{Entries: entries, Next: next, Tracker: math.MaxUint64}.Encode()), frameLimit(defaultMaxPayload))
}
