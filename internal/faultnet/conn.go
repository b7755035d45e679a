package faultnet

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// conn is a TCP connection with a peer, tracked so Block can cut it, whose
// writes obey the delay and drop rules.
type conn struct {
	net.Conn
	n    *Net
	peer string
	// closed is closed by Close: a silenced read waits for it, or for
	// readDeadline (a time.Time).
	closed       chan struct{}
	closeOnce    sync.Once
	readDeadline atomic.Value
}

// track wraps c, or closes it and returns ErrBlocked if its peer is
// blocked. The check and the registration are one step, so Block cuts
// every connection it does not refuse.
func (n *Net) track(c net.Conn) (net.Conn, error) {
	peer := hostOf(c.RemoteAddr())
	n.mu.Lock()
	if n.blocked[peer] {
		n.mu.Unlock()
		c.Close()
		return nil, ErrBlocked
	}
	tc := &conn{Conn: c, n: n, peer: peer, closed: make(chan struct{})}
	if n.conns[peer] == nil {
		n.conns[peer] = map[*conn]struct{}{}
	}
	n.conns[peer][tc] = struct{}{}
	n.mu.Unlock()
	return tc, nil
}

// Read reads from the peer; while the peer is silenced, what arrives, an
// end of stream included, is dropped and the read waits until the
// connection is closed here or its read deadline passes, as with a peer
// that sends nothing.
func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	for c.n.isSilenced(c.peer) {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return 0, err
		case err != nil: // the stream ended: only the deadline or Close ends the wait
			return 0, c.waitSilenced()
		}
		n, err = c.Conn.Read(b)
	}
	return n, err
}

// waitSilenced waits for Close or the read deadline, whichever is first.
func (c *conn) waitSilenced() error {
	deadline, _ := c.readDeadline.Load().(time.Time)
	if deadline.IsZero() {
		<-c.closed
		return net.ErrClosed
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-c.closed:
		return net.ErrClosed
	case <-t.C:
		return os.ErrDeadlineExceeded
	}
}

// SetDeadline sets the connection's deadlines, remembering the read one.
func (c *conn) SetDeadline(t time.Time) error {
	c.readDeadline.Store(t)
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline sets the read deadline and remembers it.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.readDeadline.Store(t)
	return c.Conn.SetReadDeadline(t)
}

// Write holds b for the link's lag, then writes it; while the peer is
// silenced, it drops b and reports it written.
func (c *conn) Write(b []byte) (int, error) {
	if c.n.isSilenced(c.peer) {
		return len(b), nil
	}
	if d := c.n.lag(); d > 0 {
		time.Sleep(d)
	}
	return c.Conn.Write(b)
}

// Close closes the connection and forgets it.
func (c *conn) Close() error {
	c.n.mu.Lock()
	delete(c.n.conns[c.peer], c)
	c.n.mu.Unlock()
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
