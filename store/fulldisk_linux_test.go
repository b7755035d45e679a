//go:build linux

package store

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/singlewriter/singlewriter/internal/smallfs"
	"github.com/stretchr/testify/require"
)

// A commit that finds the disk full fails, and the store refuses every
// later write, while every commit acknowledged before it is kept: on a
// small ext4 file system of its own (a loop device; root only), commits
// of 4 KiB values run until one fails, and the files, copied elsewhere,
// open with every acknowledged value.
func TestFullDiskFailsTheCommitAndKeepsEveryAcknowledgedOne(t *testing.T) {
	dir := smallfs.Mount(t, 8<<20)
	s, err := Open(Config{Dir: filepath.Join(dir, "store")})
	require.NoError(t, err)
	ctx := context.Background()
	value := make([]byte, 4<<10)
	var acked []int
	var failed error
	select {
	case <-s.Failed():
		t.Fatal("Failed is closed before any commit failed")
	default:
	}
	for i := range 10_000 {
		binary.BigEndian.PutUint64(value, uint64(i))
		key := binary.BigEndian.AppendUint64(nil, uint64(i))
		if failed = s.Commit(ctx, &Batch{Partition: i % 8, Epoch: 1, Writes: []KV{{Key: key, Value: value}}}); failed != nil {
			break
		}
		acked = append(acked, i)
	}
	require.Error(t, failed, "8 MiB took 10,000 commits of 4 KiB")
	t.Logf("%d commits acknowledged, then: %v", len(acked), failed)
	require.NotEmpty(t, acked)
	require.ErrorIs(t, put(ctx, s, 1, 1, "after", "v"), ErrFailed, "a write after the failure")
	select {
	case <-s.Failed():
	default:
		t.Fatal("Failed is not closed after a commit failed")
	}
	require.ErrorIs(t, s.Err(), ErrFailed)
	_ = s.Close()

	copied := t.TempDir()
	require.NoError(t, os.CopyFS(copied, os.DirFS(filepath.Join(dir, "store"))))
	r, err := Open(Config{Dir: copied})
	require.NoError(t, err)
	defer r.Close()
	for _, i := range acked {
		v, ok, err := r.Get(i%8, binary.BigEndian.AppendUint64(nil, uint64(i)))
		require.NoError(t, err)
		require.True(t, ok, "acknowledged commit %d lost", i)
		require.Equal(t, uint64(i), binary.BigEndian.Uint64(v), "commit %d", i)
	}
}
