package faultnet

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// conn is a TCP connection with a peer, tracked so Block can cut it, whose
// writes obey the delay and drop rules.
type conn struct {
	net.Conn
	n    *Net
	peer string
	// closed is closed by Close: a silenced read waits for it.
	closed    chan struct{}
	closeOnce sync.Once
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
// end of stream included, is withheld until the connection is closed here.
// A read deadline still ends the read, as it would with a silent peer.
func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.n.isSilenced(c.peer) {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, err
		}
		<-c.closed
		return 0, net.ErrClosed
	}
	return n, err
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
