//go:build linux && (amd64 || arm64)

package store

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// openAsync returns an asyncWriter over a new zero-filled file of size
// bytes in a temporary directory. It skips where the file system refuses
// direct writes or the kernel AIO, and where the file system is not one
// that gets AIO (after checking that its log is written synchronously).
func openAsync(t *testing.T, size int) (*asyncWriter, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.WriteFile(path, make([]byte, size), 0o600))
	f, err := openDirect(path)
	if err != nil {
		t.Skipf("the file system of the test's temporary directory refuses direct writes: %v", err)
	}
	w := directWriter(f)
	t.Cleanup(func() { _ = w.Close() })
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(path, &st))
	if !aioFileSystem(int64(st.Type)) {
		require.Equal(t, blockWriter(f), w, "a file system other than ext4 and xfs got asynchronous writes")
		t.Skipf("the test's temporary directory is on a file system (magic %#x) whose log is written synchronously", st.Type)
	}
	var ctx uintptr
	if _, _, errno := syscall.Syscall(syscall.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); errno != 0 {
		t.Skipf("this kernel offers no Linux AIO: io_setup: %v", errno)
	}
	_, _, _ = syscall.Syscall(syscall.SYS_IO_DESTROY, ctx, 0, 0)
	a, ok := w.(*asyncWriter)
	require.True(t, ok, "ext4 or xfs with AIO available, but the log is written synchronously")
	return a, path
}

// writeBlocks writes blocks of walBlock bytes of value v at off through a.
func writeBlocks(t *testing.T, a *asyncWriter, off int64, blocks int, v byte) {
	t.Helper()
	b := alignedBlocks(blocks * walBlock)
	for i := range b {
		b[i] = v
	}
	n, err := a.WriteAt(b, off)
	require.NoError(t, err)
	require.Equal(t, len(b), n)
}

// Each write lands where it was asked, whole, through the poller: the
// eventfd is registered with it, and each completion's signal is
// consumed (a write reaped otherwise would leave it readable).
func TestAsyncWritesLandAtTheirOffsetsThroughThePoller(t *testing.T) {
	a, path := openAsync(t, 16*walBlock)
	want := make([]byte, 16*walBlock)
	for i, blocks := range []int{1, 3, 2, 1, 4} {
		off := int64(i * 3 * walBlock)
		writeBlocks(t, a, off, blocks, byte(i+1))
		for j := range blocks * walBlock {
			want[off+int64(j)] = byte(i + 1)
		}
	}
	require.NotZero(t, a.ctx, "the kernel refused the asynchronous writes")
	require.Equal(t, uint32(rwfDsync), a.cb.rwFlags, "the writes do not ask for RWF_DSYNC")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, got)

	require.NoError(t, a.done.SetReadDeadline(time.Now()), "the eventfd is not in the network poller")
	_, err = syscall.Read(int(a.doneFD), make([]byte, 8))
	require.ErrorIs(t, err, syscall.EAGAIN, "a completion was signalled but not waited for")
}

// Only ext4 and xfs get asynchronous writes (see asyncWriter).
func TestOnlyExt4AndXFSGetAsynchronousWrites(t *testing.T) {
	require.True(t, aioFileSystem(ext4Magic))
	require.True(t, aioFileSystem(xfsMagic))
	for _, magic := range []int64{0x9123683E, 0x01021994, 0x65735546, 0x794c7630} { // btrfs, tmpfs, fuse, overlayfs
		require.False(t, aioFileSystem(magic), "%#x", magic)
	}
}

// A write whose event cannot be reaped (here: its context destroyed after
// the write ended) fails, and the writer stays synchronous from then on.
func TestUnreapedWriteFailsAndLeavesTheWriterSynchronous(t *testing.T) {
	a, path := openAsync(t, 4*walBlock)
	b := alignedBlocks(walBlock)
	require.NoError(t, a.submit(b, 0))
	_, _, errno := syscall.Syscall(syscall.SYS_IO_DESTROY, a.ctx, 0, 0) // waits for the write
	require.Zero(t, errno)
	_, err := a.wait()
	require.Error(t, err)
	require.Zero(t, a.ctx)
	writeBlocks(t, a, walBlock, 1, 'v')
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, byte('v'), got[walBlock])
}

// A write the kernel fails (here a direct write at an unaligned offset)
// returns the kernel's error, and the writer goes on asynchronously.
func TestAsyncWriteFailureIsReportedAndLaterWritesGoOn(t *testing.T) {
	a, path := openAsync(t, 4*walBlock)
	b := alignedBlocks(walBlock)
	b[0] = 'x'
	_, err := a.WriteAt(b, 1)
	if err == nil {
		t.Skip("this file system takes direct writes at unaligned offsets")
	}
	require.ErrorIs(t, err, syscall.EINVAL)
	require.NotZero(t, a.ctx)

	writeBlocks(t, a, walBlock, 1, 'y')
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, byte('y'), got[walBlock])
	require.Equal(t, byte(0), got[0], "the failed write wrote nothing")
}

// A submission the kernel refuses (here to a destroyed context) is written
// synchronously instead, and the writer stays synchronous, its AIO
// resources released.
func TestRefusedSubmissionIsWrittenSynchronously(t *testing.T) {
	a, path := openAsync(t, 4*walBlock)
	_, _, errno := syscall.Syscall(syscall.SYS_IO_DESTROY, a.ctx, 0, 0)
	require.Zero(t, errno)
	writeBlocks(t, a, 0, 1, 'z')
	require.Zero(t, a.ctx, "still asynchronous after a refused submission")
	writeBlocks(t, a, walBlock, 1, 'w')
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, []byte{'z', 'w'}, []byte{got[0], got[walBlock]})
}

// Once the file is closed, a write fails instead of reaching whatever file
// reuses the descriptor's number.
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

// Slow waits in the poller, slowWaitsInRow in a row, switch to
// synchronous writes for a time, which doubles while the waits stay slow
// and ends on its own; a fast wait breaks a row and starts the times over.
func TestSlowWaitsSwitchToTimesOfSynchronousWrites(t *testing.T) {
	a, _ := openAsync(t, 4*walBlock)
	step := slowWait // every reading of the clock moves it on by step
	clock := time.Unix(0, 0)
	a.now = func() time.Time {
		clock = clock.Add(step)
		return clock
	}
	write := func() { writeBlocks(t, a, 0, 1, 1) }

	write()
	write()
	step = time.Microsecond
	write()
	require.Zero(t, a.slowWaits, "a fast wait breaks the row")
	step = slowWait
	for range slowWaitsInRow - 1 {
		write()
	}
	require.True(t, a.syncUntil.IsZero(), "switched before %d slow waits in a row", slowWaitsInRow)
	write()
	require.Equal(t, clock.Add(minSyncFor), a.syncUntil)

	synchronous := 0
	for clock.Add(step).Before(a.syncUntil) {
		write()
		require.Zero(t, a.slowWaits, "a write went through the poller before the time was up")
		synchronous++
	}
	require.Equal(t, int(minSyncFor/step)-1, synchronous)
	write() // the time is up: the poller again, still slow
	require.Equal(t, 1, a.slowWaits)
	write()
	write()
	require.Equal(t, clock.Add(2*minSyncFor), a.syncUntil, "the second time in a row doubles")

	for range 20 {
		a.noteWait(slowWait, clock)
	}
	require.Equal(t, maxSyncFor, a.syncFor)
	a.noteWait(slowWait-1, clock)
	require.Equal(t, minSyncFor, a.syncFor, "a fast wait starts the times over")
}

// fakeCompletion plays the kernel for a's writes: each submission is
// accepted (and not written) and signalled as complete, and its reaped
// event is ev.
func fakeCompletion(t *testing.T, a *asyncWriter, ev func() ioEvent) {
	a.ioSubmit = func(uintptr, *iocb) syscall.Errno {
		_, err := syscall.Write(int(a.doneFD), []byte{1, 0, 0, 0, 0, 0, 0, 0})
		require.NoError(t, err)
		return 0
	}
	a.ioGetEvents = func(_ uintptr, got *ioEvent, _ *syscall.Timespec) (int, syscall.Errno) {
		*got = ev()
		return 1, 0
	}
}

// submitted is the obj of the event of a's submitted write.
func submitted(a *asyncWriter) uint64 { return uint64(uintptr(unsafe.Pointer(&a.cb))) }

// A full submission queue (EAGAIN) is written synchronously, but keeps
// the AIO context: the next write goes through the poller again.
func TestFullQueueIsWrittenSynchronouslyAndKeepsTheContext(t *testing.T) {
	a, path := openAsync(t, 4*walBlock)
	submissions := 0
	a.ioSubmit = func(uintptr, *iocb) syscall.Errno {
		submissions++
		return syscall.EAGAIN
	}
	writeBlocks(t, a, 0, 1, 'q')
	require.Equal(t, 1, submissions)
	require.NotZero(t, a.ctx, "a full queue released the AIO context")

	a.ioSubmit = func(ctx uintptr, cb *iocb) syscall.Errno {
		submissions++
		return kernelSubmit(ctx, cb)
	}
	writeBlocks(t, a, walBlock, 1, 'r')
	require.Equal(t, 2, submissions, "the write after a full queue was not submitted")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, []byte{'q', 'r'}, []byte{got[0], got[walBlock]})
}

// A write the kernel completes short is an error, not a success.
func TestShortAsyncWriteFails(t *testing.T) {
	a, _ := openAsync(t, 4*walBlock)
	fakeCompletion(t, a, func() ioEvent { return ioEvent{obj: submitted(a), res: walBlock - 512} })
	n, err := a.WriteAt(alignedBlocks(walBlock), 0)
	require.ErrorIs(t, err, io.ErrShortWrite)
	require.Equal(t, walBlock-512, n)
}

// An event that is not the submitted write's fails the write and leaves
// the writer synchronous: whether the write landed is unknown.
func TestEventOfAnotherRequestFailsTheWrite(t *testing.T) {
	a, path := openAsync(t, 4*walBlock)
	fakeCompletion(t, a, func() ioEvent { return ioEvent{obj: submitted(a) + 64, res: walBlock} })
	_, err := a.WriteAt(alignedBlocks(walBlock), 0)
	require.ErrorContains(t, err, "another request")
	require.Zero(t, a.ctx)
	writeBlocks(t, a, walBlock, 1, 's')
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, byte('s'), got[walBlock])
}

// A commit that is the committer's only work is written synchronously,
// unless another log write of the process is in progress; a group of
// several goes through the poller.
func TestLoneCommitIsWrittenSynchronouslyAndAGroupThroughThePoller(t *testing.T) {
	var submits atomic.Int64
	s := openWithSubmit(t, func(ctx uintptr, cb *iocb) syscall.Errno {
		submits.Add(1)
		return kernelSubmit(ctx, cb)
	})
	ctx := context.Background()
	require.NoError(t, put(ctx, s, 1, 1, "alone", "v"))
	require.Zero(t, submits.Load(), "a lone commit went through the poller")

	// Another store's log write in progress: the processor may be needed.
	entered, blocked := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(blocked) })
	other := openWithSubmit(t, func(ctx uintptr, cb *iocb) syscall.Errno {
		close(entered)
		<-blocked
		return kernelSubmit(ctx, cb)
	})
	t.Cleanup(release) // before other's Close, which waits for the write
	otherDone := make(chan error, 1)
	go func() { otherDone <- commitGroupOfTwo(ctx, other) }()
	<-entered
	require.NoError(t, put(ctx, s, 1, 1, "beside another write", "v"))
	require.Equal(t, int64(1), submits.Load(), "a lone commit beside another log write was written synchronously")
	release()
	require.NoError(t, <-otherDone)

	require.NoError(t, commitGroupOfTwo(ctx, s))
	require.Equal(t, int64(2), submits.Load(), "a group of two was not written through the poller, once")
	requireValue(t, s, 2, "b", "2")

	require.Zero(t, logWrites.Load(), "log writes still counted in progress")
	require.NoError(t, put(ctx, s, 1, 1, "alone again", "v"))
	require.Equal(t, int64(2), submits.Load(), "a lone commit after the others went through the poller")
}

// openWithSubmit opens a store, with fsync, in a new directory whose log
// writes through the poller submit with submit. It skips where the log gets
// no asynchronous writes.
func openWithSubmit(t *testing.T, submit func(ctx uintptr, cb *iocb) syscall.Errno) *Store {
	s, err := Open(Config{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	for _, w := range s.wals {
		a, ok := w.direct.(*asyncWriter)
		if !ok {
			t.Skip("the test's temporary directory gets no asynchronous log writes (see TestOnlyExt4AndXFSGetAsynchronousWrites)")
		}
		a.ioSubmit = submit
	}
	return s
}

// commitGroupOfTwo commits a=1 in partition 1 and b=2 in partition 2 at
// epoch 1, which the committer takes as one group: they are queued while
// a slow operation holds it.
func commitGroupOfTwo(ctx context.Context, s *Store) error {
	busy, release := make(chan struct{}), make(chan struct{})
	slow := make(chan error, 1)
	go func() {
		slow <- s.do(ctx, noPartition, func(*bolt.Tx) (error, error) {
			close(busy)
			<-release
			return nil, nil
		})
	}()
	<-busy
	first := s.Submit(&Batch{Partition: 1, Epoch: 1, Writes: []KV{{Key: []byte("a"), Value: []byte("1")}}})
	second := s.Submit(&Batch{Partition: 2, Epoch: 1, Writes: []KV{{Key: []byte("b"), Value: []byte("2")}}})
	close(release)
	return errors.Join(<-slow, first.Wait(ctx), second.Wait(ctx))
}

// io_getevents interrupted by a signal (EINTR) is asked again: the write
// completes, lands, and the AIO context is kept.
func TestInterruptedWaitIsRetried(t *testing.T) {
	a, path := openAsync(t, 4*walBlock)
	interrupted := 0
	a.ioGetEvents = func(ctx uintptr, ev *ioEvent, timeout *syscall.Timespec) (int, syscall.Errno) {
		if interrupted < 2 {
			interrupted++
			return 0, syscall.EINTR
		}
		return kernelGetEvents(ctx, ev, timeout)
	}
	writeBlocks(t, a, walBlock, 1, 'i')
	require.Equal(t, 2, interrupted)
	require.NotZero(t, a.ctx, "an interrupted wait released the AIO context")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, byte('i'), got[walBlock])
}
