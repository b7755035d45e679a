//go:build linux && (amd64 || arm64)

package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// asyncWriter writes a direct log file with Linux AIO and waits for each
// write on an eventfd, in Go's network poller.
//
// Why: a goroutine in a blocking system call keeps its processor (P)
// until the runtime's monitor takes it back, at least one monitor tick
// later, and a direct, synchronous write of the log (50-110 µs on the
// disks measured) rarely outlasts that. So every commit held one of the
// GOMAXPROCS processors for its whole write, and the other goroutines
// waited: with three nodes in one process on 2 cores, the log writes held
// over half of the processors (an execution trace of the bench). Waiting
// in the poller gives the processor back at once.
//
// A write the kernel does not take asynchronously (AIO unavailable or
// forbidden, RWF_DSYNC unknown before Linux 4.13) is written synchronously
// instead, and so is every later one once the kernel refused for any reason
// but a full queue: a fallback costs speed, never durability. Each write
// asks for RWF_DSYNC as well as the file's O_DSYNC, so that a kernel that
// could complete it before the data is stable refuses it instead.
type asyncWriter struct {
	f  *os.File
	rc syscall.RawConn
	// ctx is the AIO context, for one write at a time (only the committer
	// writes the log).
	ctx uintptr
	// done is the eventfd each completion is signalled on, registered with
	// the network poller, and doneFD its descriptor (done.Fd would make it
	// blocking).
	done   *os.File
	doneFD uint32
	// sync is set once the kernel refused an asynchronous write.
	sync bool
	cb   iocb
	ev   ioEvent
}

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
	rwfDsync      = 0x2
)

// directWriter returns the writer of f, a log file open with
// O_DIRECT|O_DSYNC: an asyncWriter where the kernel offers AIO, else f.
func directWriter(f *os.File) blockWriter {
	rc, err := f.SyscallConn()
	if err != nil {
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
	return &asyncWriter{f: f, rc: rc, ctx: ctx, done: os.NewFile(efd, "eventfd"), doneFD: uint32(efd)}
}

// WriteAt writes b at off and returns once it is durable.
func (a *asyncWriter) WriteAt(b []byte, off int64) (int, error) {
	if a.sync || len(b) == 0 {
		return a.f.WriteAt(b, off)
	}
	if err := a.submit(b, off); err != nil {
		a.sync = !errors.Is(err, syscall.EAGAIN)
		return a.f.WriteAt(b, off)
	}
	res, err := a.wait()
	runtime.KeepAlive(b) // the kernel wrote from it until now
	switch {
	case err != nil:
		return 0, err
	case res < 0:
		return 0, fmt.Errorf("asynchronous write: %w", syscall.Errno(-res))
	case res < int64(len(b)):
		return int(res), io.ErrShortWrite
	}
	return len(b), nil
}

// submit starts the write of b at off.
func (a *asyncWriter) submit(b []byte, off int64) error {
	var errno syscall.Errno
	err := a.rc.Control(func(fd uintptr) {
		a.cb = iocb{
			rwFlags: rwfDsync,
			opcode:  iocbCmdPwrite,
			fd:      uint32(fd),
			buf:     uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))),
			nbytes:  uint64(len(b)),
			offset:  off,
			flags:   iocbFlagResfd,
			resfd:   a.doneFD,
		}
		cbs := [1]*iocb{&a.cb}
		_, _, errno = syscall.Syscall(syscall.SYS_IO_SUBMIT, a.ctx, 1, uintptr(unsafe.Pointer(&cbs[0])))
	})
	if err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// wait waits for the submitted write and returns its result: the bytes
// written, or a negated errno. It fails only if the kernel refuses to
// report it, which it does not for a valid context.
func (a *asyncWriter) wait() (int64, error) {
	var n [8]byte
	timeout := &syscall.Timespec{} // the completion is signalled: do not block
	if _, err := io.ReadFull(a.done, n[:]); err != nil {
		timeout = nil // block in the kernel: the buffer is in use until the write ends
	}
	for {
		got, _, errno := syscall.Syscall6(syscall.SYS_IO_GETEVENTS, a.ctx, 1, 1, uintptr(unsafe.Pointer(&a.ev)), uintptr(unsafe.Pointer(timeout)), 0)
		switch {
		case errno == syscall.EINTR:
		case errno != 0:
			return 0, fmt.Errorf("io_getevents: %w", errno)
		case got == 1:
			return a.ev.res, nil
		default: // signalled but not yet reaped: block
			timeout = nil
		}
	}
}

// Close releases the AIO context and the eventfd and closes the file.
func (a *asyncWriter) Close() error {
	_, _, _ = syscall.Syscall(syscall.SYS_IO_DESTROY, a.ctx, 0, 0)
	return errors.Join(a.done.Close(), a.f.Close())
}
