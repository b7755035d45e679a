package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/stretchr/testify/require"
)

// fill writes n keys (and every third a dedup record) to partition p at e
// and returns the partition's position after them.
func fill(t *testing.T, s *Store, p int, e epoch.Epoch, n int) Position {
	t.Helper()
	for i := range n {
		b := &Batch{Partition: p, Epoch: e, Writes: []KV{{Key: fmt.Appendf(nil, "key-%03d", i), Value: fmt.Appendf(nil, "value-%d", i)}}}
		if i%3 == 0 {
			b.RequestID = fmt.Appendf(nil, "req-%03d", i)
			b.Response = fmt.Appendf(nil, "resp-%d", i)
		}
		require.NoError(t, s.Commit(context.Background(), b))
	}
	m, err := s.Meta(p)
	require.NoError(t, err)
	return m.Position
}

// exportAll pages through partition p of s.
func exportAll(t *testing.T, s *Store, p, maxBytes int) (entries []Entry, pages int) {
	t.Helper()
	m, err := s.Meta(p)
	require.NoError(t, err)
	pos := m.Position
	var after []byte
	for {
		page, next, err := s.Export(p, pos, after, maxBytes)
		require.NoError(t, err)
		entries = append(entries, page...)
		pages++
		if next == nil {
			return entries, pages
		}
		require.NotEmpty(t, page, "a page with a next cursor must make progress")
		after = next
	}
}

func TestTransferRoundTripsPartitionAcrossStores(t *testing.T) {
	ctx := context.Background()
	src, dst := openTest(t), openTest(t)
	fill(t, src, 5, 2, 60)
	fill(t, src, 6, 2, 5) // a neighbour that must not leak
	// The destination holds stale data from an earlier life of the partition.
	fill(t, dst, 5, 1, 7)
	require.NoError(t, put(ctx, dst, 5, 1, "stale-only", "x"))

	// The new owner (epoch 3) freezes the source with a promise.
	srcMeta, err := src.Promise(ctx, 5, 3)
	require.NoError(t, err)

	entries, pages := exportAll(t, src, 5, 64)
	require.Greater(t, pages, 20, "small maxBytes must force many pages")
	require.NoError(t, install(ctx, dst, 5, 3, entries, srcMeta.Position))
	requireAbsent(t, dst, 5, "stale-only")

	want, _ := exportAll(t, src, 5, 1<<20)
	got, _ := exportAll(t, dst, 5, 1<<20)
	require.Len(t, want, 60+20)
	require.Equal(t, want, got)
	requireValue(t, dst, 5, "key-042", "value-42")
	resp, ok, err := dst.Response(5, []byte("req-042"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "resp-42", string(resp))
	m, err := dst.Meta(5)
	require.NoError(t, err)
	require.Equal(t, Position{Epoch: 2, LSN: 60}, m.Position)
	require.Equal(t, epoch.Epoch(3), m.Promised)
}

func TestExportPagesCoverEveryEntryOnceForAnyPageSize(t *testing.T) {
	s := openTest(t)
	fill(t, s, 0, 0, 25)
	want, pages := exportAll(t, s, 0, 1<<20)
	require.Equal(t, 1, pages)
	for _, maxBytes := range []int{1, 10, 30, 100, 333} {
		got, _ := exportAll(t, s, 0, maxBytes)
		require.Equal(t, want, got, "maxBytes %d", maxBytes)
	}
	entries, next, err := s.Export(9, Position{}, nil, 100)
	require.NoError(t, err)
	require.Empty(t, entries, "an untouched partition exports nothing")
	require.Nil(t, next)
	m, err := s.Meta(0)
	require.NoError(t, err)
	_, _, err = s.Export(0, m.Position, []byte{9, 'k'}, 100)
	require.ErrorIs(t, err, ErrInvalid)
}

func TestStaleTransferOpsAreRejectedAndWriteNothing(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	fill(t, s, 0, 4, 3)
	before, err := s.Meta(0)
	require.NoError(t, err)

	zombie := []Entry{{Kind: KindData, Key: []byte("zombie"), Value: []byte("x")}}
	require.ErrorIs(t, install(ctx, s, 0, 3, zombie, Position{Epoch: 9, LSN: 9}), epoch.ErrStale)
	// A copy for ballot 4 arriving after data was written at epoch 4 (a
	// late or repeated sync) passes the fence but is older than the data.
	require.ErrorIs(t, install(ctx, s, 0, 4, zombie, Position{Epoch: 2, LSN: 1}), epoch.ErrStale)

	after, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, before, after)
	requireAbsent(t, s, 0, "zombie")
	requireValue(t, s, 0, "key-002", "value-2")
	require.ErrorIs(t, install(ctx, s, 0, 4, []Entry{{Kind: 7, Key: []byte("k")}}, Position{}), ErrInvalid)
	require.ErrorIs(t, install(ctx, s, 0, 4, []Entry{{Kind: KindResponse, Key: []byte("r"), Value: []byte("short")}}, Position{}), ErrInvalid)
}

func TestDropKeepsMetaAndAuditButNotData(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	_, err := s.Promise(ctx, 2, 1)
	require.NoError(t, err)
	claim := Claim{Epoch: 1, Owner: "a", Replicas: []string{"a"}}
	require.NoError(t, choose(ctx, s, 2, claim))
	fill(t, s, 2, 1, 4)

	require.NoError(t, s.Drop(ctx, 2, 1))
	require.NoError(t, s.Drop(ctx, 99, 1), "dropping an untouched partition is a no-op")
	requireAbsent(t, s, 2, "key-001")
	_, ok, err := s.Response(2, []byte("req-000"))
	require.NoError(t, err)
	require.False(t, ok)
	m, err := s.Meta(2)
	require.NoError(t, err)
	require.Equal(t, Meta{Promised: 1, Chosen: claim, HasChosen: true}, m, "meta kept; position zero: no data held")
	audit, err := s.Audit(2)
	require.NoError(t, err)
	require.Len(t, audit, 1)
	ps, err := s.Partitions()
	require.NoError(t, err)
	require.Equal(t, []int{2}, ps)
}

func TestDropKeepsTheCopyOfANewerProposal(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	fill(t, s, 0, 1, 2)
	// A proposal at ballot 3 synced this replica after the claim at epoch
	// 2, which does not name it, was chosen: its copy is not garbage.
	require.NoError(t, install(ctx, s, 0, 3, []Entry{{Kind: KindData, Key: []byte("k"), Value: []byte("v")}}, Position{Epoch: 1, LSN: 2}))
	require.NoError(t, s.Drop(ctx, 0, 2))
	requireValue(t, s, 0, "k", "v")
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, Position{Epoch: 1, LSN: 2}, m.Position)

	require.NoError(t, s.Drop(ctx, 0, 3))
	requireAbsent(t, s, 0, "k")
}

// A proposal's copy is fetched page by page from a replica that may drop
// its copy (it learned a claim without it) or install another one at any
// moment. A page read after that, labelled with the position the fetcher
// asked for, would give the fetcher an empty or different copy that
// claims to be the data at that position; Export refuses instead.
func TestExportRefusesACopyThatMovedAfterItsPositionWasRead(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	at := fill(t, s, 0, 1, 5)
	entries, _, err := s.Export(0, at, nil, 1<<20)
	require.NoError(t, err)
	require.NotEmpty(t, entries)

	require.NoError(t, s.Drop(ctx, 0, 2))
	entries, _, err = s.Export(0, at, nil, 1<<20)
	require.ErrorIs(t, err, ErrPosition, "a dropped copy is not the copy at %v", at)
	require.Empty(t, entries)

	other := Position{Epoch: 2, LSN: 1}
	require.NoError(t, install(ctx, s, 0, 3, []Entry{{Kind: KindData, Key: []byte("k"), Value: []byte("v")}}, other))
	_, _, err = s.Export(0, at, nil, 1<<20)
	require.ErrorIs(t, err, ErrPosition, "another copy is not the copy at %v", at)
	entries, _, err = s.Export(0, other, nil, 1<<20)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

func TestKeepRaisesThePromiseOnlyWhileTheCopyIsAtItsPosition(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	at := fill(t, s, 0, 1, 5)

	require.NoError(t, s.Keep(ctx, 0, 3, at))
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, epoch.Epoch(3), m.Promised)
	require.ErrorIs(t, s.Keep(ctx, 0, 2, at), epoch.ErrStale, "a lower ballot is fenced, like an Install")
	m, err = s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, epoch.Epoch(3), m.Promised)
	require.Equal(t, at, m.Position)

	require.NoError(t, s.Drop(ctx, 0, 3))
	err = s.Keep(ctx, 0, 4, at)
	require.ErrorIs(t, err, ErrPosition, "a dropped copy is not kept at %v", at)
	m, err = s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, epoch.Epoch(3), m.Promised, "a refused Keep promises nothing")
	require.Equal(t, Position{}, m.Position)
}

// Install replaces a partition in one step: a reader never sees part of
// the new copy together with data the copy replaced. The file holds a, the
// memtable holds b; once a reader sees the installed a, it must see the
// installed b too, not the memtable's.
func TestInstallIsNeverSeenHalfApplied(t *testing.T) {
	ctx := context.Background()
	s, err := Open(Config{Dir: t.TempDir()}) // synced: the commit's fsync is the window
	require.NoError(t, err)
	defer s.Close()
	const rounds = 100
	require.NoError(t, put(ctx, s, 0, 1, "a", "first"))
	_, err = s.Promise(ctx, 0, 2) // a slow operation: flushes a into the file
	require.NoError(t, err)

	var torn atomic.Value
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			a, _, errA := s.Get(0, []byte("a"))
			b, _, errB := s.Get(0, []byte("b"))
			if errA != nil || errB != nil {
				continue
			}
			var k int
			if _, err := fmt.Sscanf(string(a), "new-%d", &k); err == nil && string(b) == fmt.Sprintf("old-%d", k) {
				torn.Store(fmt.Sprintf("a=%s b=%s", a, b))
			}
		}
	})
	for k := 1; k <= rounds && torn.Load() == nil; k++ {
		e := epoch.Epoch(2 * k)
		require.NoError(t, put(ctx, s, 0, e, "b", fmt.Sprintf("old-%d", k)))
		entries := []Entry{
			{Kind: KindData, Key: []byte("a"), Value: fmt.Appendf(nil, "new-%d", k)},
			{Kind: KindData, Key: []byte("b"), Value: fmt.Appendf(nil, "new-%d", k)},
		}
		require.NoError(t, install(ctx, s, 0, e+1, entries, Position{Epoch: e, LSN: uint64(1000 + k)}))
	}
	close(done)
	wg.Wait()
	require.Nil(t, torn.Load(), "a reader saw half an Install")
}

func TestReadmitOnlyRaisesAmnesiaAndKeepsItAcrossARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openDir(t, dir)
	require.NoError(t, s.Readmit(ctx, 0, 5))
	require.NoError(t, s.Readmit(ctx, 0, 3), "an older base changes nothing")
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, epoch.Epoch(6), m.Amnesia, "no part in choosing the successor of the claim at 5 or older")
	require.Equal(t, Meta{Amnesia: 6}, m, "a readmitted replica still looks blank until its copy arrives")
	require.NoError(t, s.Close())
	s = openDir(t, dir)
	m, err = s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, epoch.Epoch(6), m.Amnesia)
}
