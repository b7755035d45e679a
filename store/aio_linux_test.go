//go:build linux && (amd64 || arm64)

package store

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// openAsync returns an asyncWriter over a new zero-filled file of size
// bytes in a temporary directory, skipping where the file system refuses
// direct writes or the kernel AIO.
func openAsync(t *testing.T, size int) (*asyncWriter, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	require.NoError(t, os.WriteFile(path, make([]byte, size), 0o600))
	f, err := openDirect(path)
	if err != nil {
		t.Skipf("the file system of the test's temporary directory refuses direct writes: %v", err)
	}
	a, ok := directWriter(f).(*asyncWriter)
	if !ok {
		_ = f.Close()
		t.Skip("this kernel offers no Linux AIO (io_setup failed)")
	}
	t.Cleanup(func() { _ = a.Close() })
	return a, path
}

// Each write lands where it was asked, whole, and is counted as written
// (the asynchronous path, not the synchronous fallback).
func TestAsyncWritesLandAtTheirOffsets(t *testing.T) {
	a, path := openAsync(t, 16*walBlock)
	want := make([]byte, 16*walBlock)
	for i, blocks := range []int{1, 3, 2, 1, 4} {
		off := int64(i * 3 * walBlock)
		b := alignedBlocks(blocks * walBlock)
		for j := range b {
			b[j] = byte(i + 1 + j%7)
		}
		n, err := a.WriteAt(b, off)
		require.NoError(t, err)
		require.Equal(t, len(b), n)
		copy(want[off:], b)
	}
	require.False(t, a.sync, "the kernel refused the asynchronous writes")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// A write the kernel fails (here a direct write at an unaligned offset)
// returns the kernel's error, and the writer goes on asynchronously.
func TestAsyncWriteFailureIsReportedAndLaterWritesGoOn(t *testing.T) {
	a, path := openAsync(t, 4*walBlock)
	b := alignedBlocks(walBlock)
	b[0] = 'x'
	_, err := a.WriteAt(b, 1)
	require.ErrorIs(t, err, syscall.EINVAL)
	require.False(t, a.sync)

	_, err = a.WriteAt(b, walBlock)
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, byte('x'), got[walBlock])
	require.Equal(t, byte(0), got[0], "the failed write wrote nothing")
}

// Once the file is closed, a write fails (the descriptor is not written
// through after Close, whatever reuses its number) instead of reaching
// another file.
func TestAsyncWriteAfterTheFileClosedFails(t *testing.T) {
	a, _ := openAsync(t, 4*walBlock)
	require.NoError(t, a.f.Close())
	other, err := os.CreateTemp(t.TempDir(), "reuses-the-number")
	require.NoError(t, err)
	defer other.Close()
	_, err = a.WriteAt(alignedBlocks(walBlock), 0)
	require.ErrorIs(t, err, os.ErrClosed)
	st, err := other.Stat()
	require.NoError(t, err)
	require.Zero(t, st.Size())
}
