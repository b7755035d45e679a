//go:build linux

package store

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A commit that finds the disk full fails, and the store refuses every
// later write, while every commit acknowledged before it is kept: on a
// small ext4 file system of its own (a loop device; root only), commits
// of 4 KiB values run until one fails, and the files, copied elsewhere,
// open with every acknowledged value.
func TestFullDiskFailsTheCommitAndKeepsEveryAcknowledgedOne(t *testing.T) {
	dir := smallFileSystem(t, 8<<20)
	s, err := Open(Config{Dir: filepath.Join(dir, "store")})
	require.NoError(t, err)
	ctx := context.Background()
	value := make([]byte, 4<<10)
	var acked []int
	var failed error
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

// smallFileSystem mounts a new ext4 file system of size bytes, made in a
// file, on a directory it returns, and unmounts it when the test ends. It
// skips where that is not possible (not root, no mkfs.ext4, no loop
// devices).
func smallFileSystem(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skip("mkfs.ext4 is not installed (Debian: e2fsprogs)")
	}
	base := t.TempDir()
	image, dir := filepath.Join(base, "fs.img"), filepath.Join(base, "mnt")
	require.NoError(t, os.Mkdir(dir, 0o700))
	f, err := os.Create(image)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Close())
	if out, err := exec.Command(mkfs, "-q", "-F", image).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4 failed: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", image, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a loop device here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
