package store

import (
	"context"
	"testing"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// copyOver starts a copy of partition p over its data as it is now.
func copyOver(t *testing.T, s *Store, p int) *Copy {
	t.Helper()
	m, err := s.Meta(p)
	require.NoError(t, err)
	c, err := s.NewCopy(p, m.Position)
	require.NoError(t, err)
	return c
}

// A copy checked against the data it replaces when it started (data
// written after the proposal's base would be refused) is not installed
// once a batch moved the partition meanwhile: that batch may hold writes,
// acknowledged since, that the copy lacks.
func TestCopyIsNotInstalledOverDataThatMovedSinceItStarted(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	at := fill(t, s, 0, 1, 2)
	c := copyOver(t, s, 0)
	require.NoError(t, c.Add(ctx, []Entry{{Kind: KindData, Key: []byte("key-001"), Value: []byte("from the copy")}}))
	require.NoError(t, s.Commit(ctx, &Batch{Partition: 0, Epoch: 3, Prev: &at, Writes: []KV{{Key: []byte("key-001"), Value: []byte("acknowledged at 3")}}}))

	require.ErrorIs(t, c.Install(ctx, 5, Position{Epoch: 1, LSN: 2}), ErrPosition)
	requireValue(t, s, 0, "key-001", "acknowledged at 3")
	require.NoError(t, c.Discard())
}

// stagedCopies counts the copies staged in s's file.
func stagedCopies(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	require.NoError(t, s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(stagingBucket); b != nil {
			return b.ForEachBucket(func([]byte) error { n++; return nil })
		}
		return nil
	}))
	return n
}

// A receiver stages a large partition page by page, holding one page in
// memory; until Install, readers see the replica's old copy, untouched.
func TestCopyStagedPageByPageIsInvisibleUntilInstalled(t *testing.T) {
	ctx := context.Background()
	src, dstDir := openTest(t), t.TempDir()
	dst := openDir(t, dstDir)
	fill(t, src, 5, 2, 600)
	require.NoError(t, put(ctx, dst, 5, 1, "stale-only", "x"))
	srcMeta, err := src.Promise(ctx, 5, 3)
	require.NoError(t, err)

	c := copyOver(t, dst, 5)
	var after []byte
	pages := 0
	for {
		page, next, err := src.Export(5, srcMeta.Position, after, 64)
		require.NoError(t, err)
		require.NoError(t, c.Add(ctx, page))
		pages++
		requireValue(t, dst, 5, "stale-only", "x")
		requireAbsent(t, dst, 5, "key-042")
		if next == nil {
			break
		}
		after = next
	}
	require.Greater(t, pages, 200)
	require.Equal(t, 1, stagedCopies(t, dst))

	require.NoError(t, c.Install(ctx, 3, srcMeta.Position))
	requireAbsent(t, dst, 5, "stale-only")
	requireValue(t, dst, 5, "key-042", "value-42")
	want, _ := exportAll(t, src, 5, 1<<20)
	got, _ := exportAll(t, dst, 5, 1<<20)
	require.Equal(t, want, got)
	require.Zero(t, stagedCopies(t, dst), "Install consumes the staged copy")
	require.NoError(t, c.Discard(), "Discard after Install is a no-op")
	requireValue(t, dst, 5, "key-042", "value-42")

	require.NoError(t, dst.Close())
	dst = openDir(t, dstDir)
	got, _ = exportAll(t, dst, 5, 1<<20)
	require.Equal(t, want, got, "the installed copy is in the file")
}

// A refused copy stays staged until Discard, which deletes it for good.
// (TestStaleTransferOpsAreRejectedAndWriteNothing checks that a refused
// Install changes nothing.)
func TestRefusedCopyStaysStagedUntilDiscarded(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	fill(t, s, 0, 4, 1)
	c := copyOver(t, s, 0)
	require.NoError(t, c.Add(ctx, []Entry{{Kind: KindData, Key: []byte("zombie"), Value: []byte("x")}}))
	require.ErrorIs(t, c.Install(ctx, 3, Position{Epoch: 9, LSN: 9}), epoch.ErrStale)
	require.Equal(t, 1, stagedCopies(t, s))
	require.NoError(t, c.Discard())
	require.Zero(t, stagedCopies(t, s))
	require.ErrorIs(t, c.Install(ctx, 5, Position{Epoch: 9, LSN: 9}), ErrInvalid, "a discarded copy cannot be installed")
	requireAbsent(t, s, 0, "zombie")
}

// A copy of an empty partition stages nothing; installing it still
// replaces the data and sets the position.
func TestEmptyCopyInstallsAnEmptyPartitionAtItsPosition(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	fill(t, s, 0, 2, 5)
	c := copyOver(t, s, 0)
	pos := Position{Epoch: 2, LSN: 9}
	require.NoError(t, c.Install(ctx, 3, pos))
	requireAbsent(t, s, 0, "key-000")
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, pos, m.Position)
	require.Equal(t, epoch.Epoch(3), m.Promised)
}

// A receiver that stops (a crash, a Close) between pages leaves its staged
// entries in the file; the next Open deletes them.
func TestCopyLeftStagedIsDeletedAtOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openDir(t, dir)
	c := copyOver(t, s, 0)
	require.NoError(t, c.Add(ctx, []Entry{{Kind: KindData, Key: []byte("k"), Value: []byte("v")}}))
	require.Equal(t, 1, stagedCopies(t, s))
	require.NoError(t, s.Close())

	s = openDir(t, dir)
	require.Zero(t, stagedCopies(t, s))
	requireAbsent(t, s, 0, "k")
}
