package rpc

import (
	"bufio"
	"context"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/singlewriter/singlewriter/internal/wire"
)

const (
	// queueSize is how many frames may wait for a connection's writer
	// before senders block.
	queueSize = 256
	// bufferSize is the size of each connection's read and write buffers;
	// the write buffer is what one flush can coalesce without a syscall per
	// frame.
	bufferSize = 32 << 10
)

// link is one connection's frame plumbing, the same at both ends: the socket,
// the buffered reader used by the connection's reader goroutine, and a queue
// drained by its writer goroutine (writeLoop).
type link struct {
	nc net.Conn
	br *bufio.Reader
	// bw is used by the handshake, then only by writeLoop.
	bw *bufio.Writer
	// queue carries frames to writeLoop.
	queue chan wire.Frame
	// done is closed by fail; once it is, nothing more is written.
	done     chan struct{}
	failOnce sync.Once
	// cause is why the link failed. Invariant: set before done is closed,
	// never changed after.
	cause error
}

// newLink returns the link of nc, each write to nc bounded by writeTimeout.
func newLink(nc net.Conn, writeTimeout time.Duration) *link {
	return &link{
		nc:    nc,
		br:    bufio.NewReaderSize(nc, bufferSize),
		bw:    bufio.NewWriterSize(&deadlineWriter{nc: nc, timeout: writeTimeout, now: time.Now}, bufferSize),
		queue: make(chan wire.Frame, queueSize),
		done:  make(chan struct{}),
	}
}

// deadlineWriter writes to a connection bufferSize bytes at a time, each
// piece failing with os.ErrDeadlineExceeded if it cannot be written within
// timeout: a peer that stops reading fills the socket's buffers and would
// otherwise block the writer, and every sender behind it, for as long as
// it stays connected. A large frame on a slow link only has to make
// progress.
//
// Setting a deadline costs a timer update, more than a small write on a
// busy link, so the deadline is moved on only once less than half of
// timeout is left: a write is given between timeout/2 and timeout. Only
// the deadlineWriter sets the socket's write deadline.
type deadlineWriter struct {
	nc      net.Conn
	timeout time.Duration
	now     func() time.Time
	// deadline is the socket's write deadline.
	deadline time.Time
}

func (w *deadlineWriter) Write(p []byte) (n int, err error) {
	for n < len(p) && err == nil {
		if now := w.now(); w.deadline.Sub(now) < w.timeout/2 {
			w.deadline = now.Add(w.timeout)
			if err = w.nc.SetWriteDeadline(w.deadline); err != nil {
				break
			}
		}
		var k int
		k, err = w.nc.Write(p[n:min(len(p), n+bufferSize)])
		n += k
	}
	return n, err
}

// fail records cause (the first call wins), stops the writer and closes the
// socket, which unblocks the reader.
func (l *link) fail(cause error) {
	l.failOnce.Do(func() {
		l.cause = cause
		close(l.done)
		_ = l.nc.Close()
	})
}

// send queues f for the writer. It returns ctx.Err() if ctx ends first, or
// the link's cause if the link fails first.
func (l *link) send(ctx context.Context, f wire.Frame) error {
	select {
	case l.queue <- f:
		return nil
	case <-l.done:
		return l.cause
	case <-ctx.Done():
		return ctx.Err()
	}
}

// offer queues f for the writer if the queue has room at once, and drops it
// otherwise.
func (l *link) offer(f wire.Frame) {
	select {
	case l.queue <- f:
	default:
	}
}

// writeNow writes and flushes one frame synchronously. Only for the
// handshake, before writeLoop runs.
func (l *link) writeNow(f wire.Frame) error {
	if err := wire.WriteFrame(l.bw, f); err != nil {
		return err
	}
	return l.bw.Flush()
}

// writeLoop is the link's writer goroutine. It waits for a frame, writes it
// and every other frame already queued, then flushes once: under load many
// frames share one syscall, and a lone frame is sent at once. A write error
// fails the link.
//
// Before flushing, writeBatch yields the processor once so that goroutines
// that are runnable and about to queue a frame (handlers finishing, callers
// woken by the previous batch) join this batch. With nothing runnable the
// yield returns at once; on loopback with 64 callers it cut the time per
// call about threefold (BenchmarkCall).
func (l *link) writeLoop() {
	for {
		select {
		case <-l.done:
			return
		case f := <-l.queue:
			if err := l.writeBatch(f); err != nil {
				l.fail(err)
				return
			}
		}
	}
}

func (l *link) writeBatch(f wire.Frame) error {
	for {
		if err := wire.WriteFrame(l.bw, f); err != nil {
			return err
		}
		select {
		case f = <-l.queue:
			continue
		default:
		}
		runtime.Gosched()
		select {
		case f = <-l.queue:
		default:
			return l.bw.Flush()
		}
	}
}
