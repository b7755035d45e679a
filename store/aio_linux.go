//go:build linux && (amd64 || arm64)

package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// asyncWriter writes a direct log file with Linux AIO and waits for each
// write on an eventfd, in Go's network poller.
//
// Why: a goroutine in a blocking system call keeps its processor (P) until
// the runtime's monitor thread notices and hands the P on, and the monitor
// checks at its own pace (it sleeps 20 µs between checks, up to 10 ms
// while it finds nothing to take), so a direct, synchronous write of the
// log (50-150 µs on the disks measured) mostly ran to its end holding one
// of the GOMAXPROCS processors: in the bench's execution trace (three
// nodes in one process, 2 cores) the log writes held over half of them.
// Parked in the poller, the committer holds none.
//
// The poller has its own cost: the runtime looks at it only when a
// processor runs out of work, or every 10 ms from the monitor. Where
// goroutines keep every processor busy without blocking (CPU-bound
// handlers), a commit waited 20-40 ms (measured, against about 0.1 ms
// written synchronously, which keeps its processor). So after
// slowWaitsInRow waits of slowWait or more in a row, the writer writes
// synchronously for a while (minSyncFor, doubling while the waits stay
// slow, up to maxSyncFor), then tries the poller again. On a disk whose
// writes themselves take slowWait or more, every wait is slow and the
// writes stay synchronous, which costs nothing there: the monitor takes
// back the processor of a system call that long anyway.
//
// A write that is the committer's only work (a group of one), while no
// other direct log write of the process is in progress, skips the poller:
// see wal.write.
//
// Writes go through AIO only on ext4 and xfs, whose AIO completion of an
// O_DSYNC direct write comes after the data is durable on every kernel
// that takes the write (from Linux 4.13, which knows RWF_DSYNC; older ones
// refuse the submission). Other file systems are written synchronously:
// btrfs in some 5.16-6.0 kernels, and FUSE, complete such a write before
// syncing it. A write the kernel refuses to submit is written
// synchronously, and so is every later one unless the refusal was a full
// queue: a refusal costs speed, never durability.
type asyncWriter struct {
	f  *os.File
	rc syscall.RawConn
	// ctx is the AIO context, for one write at a time (only the committer
	// writes the log); 0 once released.
	ctx uintptr
	// done is the eventfd each completion is signalled on, registered with
	// the network poller, and doneFD its descriptor.
	done   *os.File
	doneFD uint32
	// now times the waits; time.Now but in tests.
	now func() time.Time
	// ioSubmit and ioGetEvents make the system calls (kernelSubmit,
	// kernelGetEvents); tests replace them to play the kernel's rare
	// answers.
	ioSubmit    func(ctx uintptr, cb *iocb) syscall.Errno
	ioGetEvents func(ctx uintptr, ev *ioEvent, timeout *syscall.Timespec) (int, syscall.Errno)

	// slowWaits counts the slow waits in a row. Writes are synchronous
	// until syncUntil; syncFor is how long the next such time lasts.
	slowWaits int
	syncUntil time.Time
	syncFor   time.Duration

	// The write in progress: its control block, its buffer pinned (the
	// kernel reads it while the goroutine is parked, and stack memory
	// could move), its completion, the errno of io_submit set by submitFD
	// (a method value made once, which rc.Control calls without
	// allocating), and the eventfd's counter.
	cb       iocb
	pin      runtime.Pinner
	ev       ioEvent
	errno    syscall.Errno
	submitFD func(fd uintptr)
	signal   [8]byte
	// noWait is the zero timeout of a reap that must not block.
	noWait syscall.Timespec
}

const (
	// slowWait is a wait in the poller about fifty times as long as a
	// direct write takes on the disks measured, and half the monitor's
	// 10 ms: the poller was not looked at meanwhile, or the disk is slow
	// (see asyncWriter).
	slowWait = 5 * time.Millisecond
	// slowWaitsInRow slow waits in a row switch to synchronous writes.
	slowWaitsInRow = 3
	// minSyncFor and maxSyncFor bound how long writes stay synchronous
	// before the poller is tried again.
	minSyncFor = 100 * time.Millisecond
	maxSyncFor = 10 * time.Second
)

// iocb is the kernel's struct iocb, in the layout of little-endian
// machines.
type iocb struct {
	data     uint64
	key      uint32
	rwFlags  uint32
	opcode   uint16
	reqprio  int16
	fd       uint32
	buf      uint64
	nbytes   uint64
	offset   int64
	reserved uint64
	flags    uint32
	resfd    uint32
}

// ioEvent is the kernel's struct io_event.
type ioEvent struct {
	data, obj uint64
	res, res2 int64
}

const (
	iocbCmdPwrite = 1
	iocbFlagResfd = 1 << 0
	// rwfDsync asks for an O_DSYNC write. The file has O_DSYNC already;
	// the flag makes a kernel older than 4.13, whose completion of an
	// asynchronous O_DSYNC write is not known to wait for the sync, refuse
	// the submission (the field was reserved then).
	rwfDsync = 0x2

	ext4Magic = 0xEF53
	xfsMagic  = 0x58465342
)

// directWriter returns the writer of f, a log file open with
// O_DIRECT|O_DSYNC: an asyncWriter where the file system is ext4 or xfs
// and the kernel offers AIO, else f.
func directWriter(f *os.File) blockWriter {
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	var st syscall.Statfs_t
	var statErr error
	if err := rc.Control(func(fd uintptr) { statErr = syscall.Fstatfs(int(fd), &st) }); err != nil || statErr != nil {
		return f
	}
	if !aioFileSystem(int64(st.Type)) {
		return f
	}
	var ctx uintptr
	if _, _, errno := syscall.Syscall(syscall.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); errno != 0 {
		return f
	}
	efd, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		_, _, _ = syscall.Syscall(syscall.SYS_IO_DESTROY, ctx, 0, 0)
		return f
	}
	a := &asyncWriter{
		f: f, rc: rc, ctx: ctx, done: os.NewFile(efd, "eventfd"), doneFD: uint32(efd),
		now: time.Now, ioSubmit: kernelSubmit, ioGetEvents: kernelGetEvents, syncFor: minSyncFor,
	}
	a.submitFD = a.submitOn
	return a
}

// aioFileSystem reports whether the file system of magic number magic
// (statfs's f_type) gets asynchronous log writes: ext4 and xfs, see
// asyncWriter.
func aioFileSystem(magic int64) bool { return magic == ext4Magic || magic == xfsMagic }

// WriteAt writes b at off and returns once it is durable.
func (a *asyncWriter) WriteAt(b []byte, off int64) (int, error) {
	if a.ctx == 0 || len(b) == 0 {
		return a.f.WriteAt(b, off)
	}
	start := a.now()
	if start.Before(a.syncUntil) {
		return a.f.WriteAt(b, off)
	}
	a.pin.Pin(unsafe.SliceData(b))
	defer a.pin.Unpin()
	if err := a.submit(b, off); err != nil {
		if !errors.Is(err, syscall.EAGAIN) {
			a.release()
		}
		return a.f.WriteAt(b, off)
	}
	res, err := a.wait()
	if err != nil {
		return 0, err
	}
	end := a.now()
	a.noteWait(end.Sub(start), end)
	switch {
	case res < 0:
		return 0, fmt.Errorf("asynchronous write: %w", syscall.Errno(-res))
	case res < int64(len(b)):
		return int(res), io.ErrShortWrite
	}
	return len(b), nil
}

// noteWait counts a write's wait of d in the poller, which ended at now,
// towards a time of synchronous writes (see asyncWriter).
func (a *asyncWriter) noteWait(d time.Duration, now time.Time) {
	if d < slowWait {
		a.slowWaits, a.syncFor = 0, minSyncFor
		return
	}
	if a.slowWaits++; a.slowWaits == slowWaitsInRow {
		a.slowWaits, a.syncUntil = 0, now.Add(a.syncFor)
		a.syncFor = min(2*a.syncFor, maxSyncFor)
	}
}

// submit starts the write of b at off.
func (a *asyncWriter) submit(b []byte, off int64) error {
	a.cb = iocb{
		rwFlags: rwfDsync,
		opcode:  iocbCmdPwrite,
		buf:     uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))),
		nbytes:  uint64(len(b)),
		offset:  off,
		flags:   iocbFlagResfd,
		resfd:   a.doneFD,
	}
	if err := a.rc.Control(a.submitFD); err != nil {
		return err
	}
	if a.errno != 0 {
		return a.errno
	}
	return nil
}

// submitOn submits a.cb as a write to fd, recording io_submit's errno.
func (a *asyncWriter) submitOn(fd uintptr) {
	a.cb.fd = uint32(fd)
	a.errno = a.ioSubmit(a.ctx, &a.cb)
}

// kernelSubmit submits cb in AIO context ctx (io_submit).
func kernelSubmit(ctx uintptr, cb *iocb) syscall.Errno {
	cbs := [1]*iocb{cb}
	_, _, errno := syscall.Syscall(syscall.SYS_IO_SUBMIT, ctx, 1, uintptr(unsafe.Pointer(&cbs[0])))
	return errno
}

// kernelGetEvents reaps at most one event of AIO context ctx into ev,
// waiting up to timeout (nil: until one comes), and returns how many it
// reaped (io_getevents).
func kernelGetEvents(ctx uintptr, ev *ioEvent, timeout *syscall.Timespec) (int, syscall.Errno) {
	got, _, errno := syscall.Syscall6(syscall.SYS_IO_GETEVENTS, ctx, 1, 1, uintptr(unsafe.Pointer(ev)), uintptr(unsafe.Pointer(timeout)), 0)
	return int(got), errno
}

// wait waits for the submitted write and returns its result: the bytes
// written, or a negated errno. If the kernel does not report the result
// (which it does for a valid context), wait releases the context, which
// waits for the write, and fails.
func (a *asyncWriter) wait() (int64, error) {
	timeout := &a.noWait // the completion is signalled: do not block
	if _, err := io.ReadFull(a.done, a.signal[:]); err != nil {
		timeout = nil // block in the kernel: b is in use until the write ends
	}
	for {
		got, errno := a.ioGetEvents(a.ctx, &a.ev, timeout)
		switch {
		case errno == syscall.EINTR:
		case errno != 0:
			a.release()
			return 0, fmt.Errorf("asynchronous write: io_getevents: %w", errno)
		case got == 1 && a.ev.obj != uint64(uintptr(unsafe.Pointer(&a.cb))):
			a.release()
			return 0, fmt.Errorf("asynchronous write: io_getevents returned the event of another request (%#x)", a.ev.obj)
		case got == 1:
			return a.ev.res, nil
		default: // signalled but not reaped yet: block
			timeout = nil
		}
	}
}

// release destroys the AIO context, which waits for a write in flight,
// and closes the eventfd: every later write is synchronous.
func (a *asyncWriter) release() {
	if a.ctx == 0 {
		return
	}
	_, _, _ = syscall.Syscall(syscall.SYS_IO_DESTROY, a.ctx, 0, 0)
	_ = a.done.Close()
	a.ctx = 0
}

// Close releases the AIO resources and closes the file.
func (a *asyncWriter) Close() error {
	a.release()
	return a.f.Close()
}
