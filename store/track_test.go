package store

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/stretchr/testify/require"
)

// batch commits writes (key=value; an empty value deletes the key) and,
// if requestID is set, a dedup record to partition p at epoch e.
func batch(t *testing.T, s *Store, p int, e epoch.Epoch, requestID string, kv ...string) {
	t.Helper()
	b := &Batch{Partition: p, Epoch: e}
	for i := 0; i < len(kv); i += 2 {
		w := KV{Key: []byte(kv[i])}
		if kv[i+1] != "" {
			w.Value = []byte(kv[i+1])
		}
		b.Writes = append(b.Writes, w)
	}
	if requestID != "" {
		b.RequestID, b.Response = []byte(requestID), []byte("response of "+requestID)
	}
	require.NoError(t, s.Commit(context.Background(), b))
}

// changesOf pages through ExportChanges of tracker id at pos.
func changesOf(s *Store, p int, id uint64, pos Position, maxBytes int) ([]Entry, error) {
	var all []Entry
	for after := []byte(nil); ; {
		page, next, err := s.ExportChanges(p, id, pos, after, maxBytes)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == nil {
			return all, nil
		}
		after = next
	}
}

func TestLiveCopyCompletedByItsChangesIsThePartitionAtItsPosition(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(map[bool]string{false: "log", true: "transactions"}[slow], func(t *testing.T) {
			ctx := context.Background()
			src, err := Open(Config{Dir: t.TempDir(), NoSync: true, MaxSize: map[bool]int{false: 0, true: 1 << 30}[slow]})
			require.NoError(t, err)
			t.Cleanup(func() { _ = src.Close() })
			dst := openTest(t)
			fill(t, src, 5, 2, 60)
			fill(t, src, 6, 2, 5) // another partition's writes are not its changes
			id, err := src.Track(5)
			require.NoError(t, err)

			c, err := dst.NewCopy(5, Position{})
			require.NoError(t, err)
			defer c.Discard()
			pages := 0
			for after := []byte(nil); ; pages++ {
				page, next, err := src.ExportLive(5, id, after, 64)
				require.NoError(t, err)
				require.NoError(t, c.Add(ctx, page))
				if pages == 3 {
					// Written while the copy is read: keys already read,
					// keys not read yet, new keys, a deletion, a dedup record.
					batch(t, src, 5, 2, "req-new", "key-000", "changed", "key-059", "changed too")
					batch(t, src, 5, 2, "", "key-001", "", "key-new", "new")
					batch(t, src, 6, 2, "", "key-002", "elsewhere")
				}
				if next == nil {
					break
				}
				after = next
			}
			require.Greater(t, pages, 10)
			batch(t, src, 5, 2, "", "key-010", "after the last page")
			m, err := src.Promise(ctx, 5, 3) // the new owner's promise freezes it
			require.NoError(t, err)

			changes, err := changesOf(src, 5, id, m.Position, 64)
			require.NoError(t, err)
			var changed []string
			for _, en := range changes {
				changed = append(changed, fmt.Sprintf("%d:%s", en.Kind, en.Key))
			}
			require.Equal(t, []string{"1:key-000", "3:key-001", "1:key-010", "1:key-059", "1:key-new", "2:req-new"}, changed)
			require.NoError(t, c.Add(ctx, changes))
			require.NoError(t, c.Install(ctx, 3, m.Position))

			want, _ := exportAll(t, src, 5, 1<<20)
			got, _ := exportAll(t, dst, 5, 1<<20)
			require.Equal(t, want, got)
			requireAbsent(t, dst, 5, "key-001")
			requireValue(t, dst, 5, "key-000", "changed")

			_, err = changesOf(src, 5, id, m.Position, 64)
			require.ErrorIs(t, err, ErrUntracked, "the tracker is dropped after its last page")
		})
	}
}

func TestTrackerGivesUpWhenItsPartitionIsReplaced(t *testing.T) {
	ctx := context.Background()
	for name, replace := range map[string]func(s *Store) error{
		"drop":    func(s *Store) error { return s.Drop(ctx, 5, 2) },
		"install": func(s *Store) error { return install(ctx, s, 5, 3, nil, Position{Epoch: 3}) },
	} {
		t.Run(name, func(t *testing.T) {
			s := openTest(t)
			fill(t, s, 5, 2, 10)
			fill(t, s, 6, 2, 10)
			id, err := s.Track(5)
			require.NoError(t, err)
			other, err := s.Track(6)
			require.NoError(t, err)
			require.NoError(t, replace(s))

			_, _, err = s.ExportLive(5, id, nil, 1<<20)
			require.ErrorIs(t, err, ErrUntracked)
			m, err := s.Meta(5)
			require.NoError(t, err)
			_, err = changesOf(s, 5, id, m.Position, 1<<20)
			require.ErrorIs(t, err, ErrUntracked)

			_, _, err = s.ExportLive(6, other, nil, 1<<20)
			require.NoError(t, err, "another partition's tracker goes on")
		})
	}
}

func TestChangeAfterTheTrackerWasSealedBreaksIt(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	fill(t, s, 5, 2, 10)
	id, err := s.Track(5)
	require.NoError(t, err)
	fill(t, s, 5, 2, 10) // the same keys and dedup records again: all changed
	m, err := s.Promise(ctx, 5, 3)
	require.NoError(t, err)
	page, next, err := s.ExportChanges(5, id, m.Position, nil, 64)
	require.NoError(t, err)
	require.NotEmpty(t, page)
	require.NotNil(t, next)

	// A write at the promised ballot: the pages already read may hold
	// the key's older value.
	batch(t, s, 5, 3, "", "key-009", "after the seal")
	_, _, err = s.ExportChanges(5, id, m.Position, next, 64)
	require.ErrorIs(t, err, ErrUntracked)
}

func TestPruneLeavesTrackersAlive(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	fill(t, s, 5, 2, 10)
	id, err := s.Track(5)
	require.NoError(t, err)
	page, _, err := s.ExportLive(5, id, nil, 1<<20)
	require.NoError(t, err)
	pruned, err := s.PruneResponses(ctx, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Positive(t, pruned)
	m, err := s.Promise(ctx, 5, 3)
	require.NoError(t, err)
	changes, err := changesOf(s, 5, id, m.Position, 64)
	require.NoError(t, err, "a prune every few minutes would otherwise break every long pre-copy")
	require.Empty(t, changes, "the pruned records stay in the copy until its own prune")
	require.NotEmpty(t, page)
}

func TestTrackerIDsOfAnEarlierOpenAreNotReused(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	fill(t, s, 5, 2, 3)
	before, err := s.Track(5)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openDir(t, dir)
	after, err := s.Track(5)
	require.NoError(t, err)
	require.NotEqual(t, before, after)
	_, _, err = s.ExportLive(5, before, nil, 64)
	require.ErrorIs(t, err, ErrUntracked, "a reader of the tracker lost in the restart is refused")
}

func TestEmptyCursorIsRefused(t *testing.T) {
	s := openTest(t)
	m := Position{}
	_, _, err := s.Export(5, m, []byte{}, 64)
	require.ErrorIs(t, err, ErrInvalid)
	_, _, err = s.Export(5, m, []byte{byte(KindDataDeleted), 'k'}, 64)
	require.ErrorIs(t, err, ErrInvalid)
}

func TestTrackerGivesUpWhenTooMuchChanged(t *testing.T) {
	s := openTest(t)
	id, err := s.Track(5)
	require.NoError(t, err)
	key := bytes.Repeat([]byte("k"), MaxKeySize-8)
	for i := 0; i*(len(key)+8+trackedKeyOverhead) <= maxTrackedBytes; i++ {
		batch(t, s, 5, 2, "", fmt.Sprintf("%s%08d", key, i), "v")
	}
	_, _, err = s.ExportLive(5, id, nil, 1<<20)
	require.ErrorIs(t, err, ErrUntracked)
}

func TestTrackersBeyondTheLimitReplaceTheLeastRecentlyRead(t *testing.T) {
	s := openTest(t)
	fill(t, s, 5, 2, 3)
	first, err := s.Track(5)
	require.NoError(t, err)
	second, err := s.Track(5)
	require.NoError(t, err)
	_, _, err = s.ExportLive(5, first, nil, 1<<20) // read: now the most recent
	require.NoError(t, err)
	for range maxTrackers - 1 {
		_, err := s.Track(5)
		require.NoError(t, err)
	}
	_, _, err = s.ExportLive(5, second, nil, 1<<20)
	require.ErrorIs(t, err, ErrUntracked)
	_, _, err = s.ExportLive(5, first, nil, 1<<20)
	require.NoError(t, err)
	_, _, err = s.ExportLive(6, first, nil, 1<<20)
	require.ErrorIs(t, err, ErrUntracked, "a tracker answers for its own partition only")
}

// Only a live copy's first page flushes the memtable (a synced
// transaction that holds every commit back): what a later page misses of
// it changed after Track and is recorded.
func TestOnlyTheFirstLivePageFlushes(t *testing.T) {
	s := openTest(t)
	fill(t, s, 5, 2, 40)
	id, err := s.Track(5)
	require.NoError(t, err)
	syncs := func() uint64 { return s.flushes.Load() }
	before := syncs()
	_, next, err := s.ExportLive(5, id, nil, 64)
	require.NoError(t, err)
	require.Greater(t, syncs(), before, "the first page flushes the batches written before Track")
	for next != nil {
		batch(t, s, 5, 2, "", "key-039", "written between pages")
		before = syncs()
		_, next, err = s.ExportLive(5, id, next, 64)
		require.NoError(t, err)
		require.Equal(t, before, syncs(), "a later page does not flush")
	}
}
