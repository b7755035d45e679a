package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/singlewriter/singlewriter/internal/wire"
)

// Client calls servers by address over one persistent connection per
// address, dialed on first use and re-dialed after it breaks. It is safe for
// concurrent use; calls on one connection are pipelined.
type Client struct {
	cfg ClientConfig
	// dialTCP is cfg.Dial, or a net.Dialer's.
	dialTCP func(ctx context.Context, addr string) (net.Conn, error)
	// ctx is cancelled by Close; it aborts dials and handshakes.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts every goroutine the client started.
	wg        sync.WaitGroup
	closeOnce sync.Once

	// mu guards closed, conns, and the link field of every clientConn.
	mu     sync.Mutex
	closed bool
	// conns holds, per address and expected node, the connection being
	// dialed or in use. Invariant: a connection leaves conns when its dial
	// fails or it breaks, before its callers are told, so their next call
	// dials afresh.
	conns map[connKey]*clientConn
}

// NewClient returns a client; it dials nothing until the first Call. It
// panics if cfg has a negative DialTimeout or a MaxFrame that cannot hold a
// frame header: that is a programming error, not a runtime condition.
func NewClient(cfg ClientConfig) *Client {
	if err := cfg.validate(); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	dial := cfg.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: cfg.DialTimeout}
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	return &Client{
		cfg:     cfg,
		dialTCP: dial,
		ctx:     ctx,
		cancel:  cancel,
		conns:   make(map[connKey]*clientConn),
	}
}

// Call sends a request of type typ to the server at addr and returns its
// response body. Errors:
//   - ctx.Err() if ctx ends first; a late response is discarded;
//   - *RemoteError if the handler returned an error;
//   - ErrConnClosed (wrapped) if the connection broke with the call in
//     flight: the request may or may not have been handled;
//   - ErrRefused (wrapped) if the handshake was rejected;
//   - wire.ErrFrameTooLarge (wrapped) if the request exceeds MaxFrame or the
//     server's; nothing is sent;
//   - ErrClosed after Close;
//   - the dial error if addr cannot be reached.
//
// body must not be modified after Call starts: if ctx ends first, the request
// may still be written after Call returns.
func (c *Client) Call(ctx context.Context, addr string, typ uint8, body []byte) ([]byte, error) {
	return c.CallNode(ctx, "", addr, typ, body)
}

// CallNode is Call to the node named node at addr: if the server there
// gives another name in its Hello, the call fails with ErrRefused
// (wrapped) and nothing is sent. An empty node accepts any server, as Call
// does.
func (c *Client) CallNode(ctx context.Context, node, addr string, typ uint8, body []byte) ([]byte, error) {
	if size := wire.HeaderSize + len(body); size > c.cfg.MaxFrame {
		return nil, fmt.Errorf("%w: request of %d bytes exceeds the max frame of %d", wire.ErrFrameTooLarge, size, c.cfg.MaxFrame)
	}
	cc, err := c.conn(ctx, connKey{addr, node})
	if err != nil {
		return nil, err
	}
	if size := wire.HeaderSize + len(body); size > cc.maxFrame {
		return nil, fmt.Errorf("%w: request of %d bytes exceeds the max frame of %d of the server at %s", wire.ErrFrameTooLarge, size, cc.maxFrame, addr)
	}
	return cc.call(ctx, typ, body)
}

// Close drops every connection (calls in flight fail with ErrConnClosed
// wrapping ErrClosed), aborts dials in progress and waits for every goroutine
// of the client. Later calls return ErrClosed. It always returns nil.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		for _, cc := range c.conns {
			if cc.link != nil {
				cc.link.fail(ErrClosed)
			}
		}
		c.mu.Unlock()
		c.cancel()
		c.wg.Wait()
	})
	return nil
}

// DropNode breaks every connection to the node called name: the calls in
// flight on them fail with ErrConnClosed wrapping cause, and the next call
// dials again. It is for a peer known to be gone, whose connections may
// stay silent (a frozen process or a cut network sends no FIN), so that no
// call waits for it until its context ends.
func (c *Client) DropNode(name string, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, cc := range c.conns {
		if k.node == name && cc.link != nil {
			cc.link.fail(cause)
		}
	}
}

// conn returns the connection for k, starting a dial if there is none.
// Concurrent callers wait for the same dial.
func (c *Client) conn(ctx context.Context, k connKey) (*clientConn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	cc := c.conns[k]
	if cc == nil {
		cc = newClientConn(k)
		c.conns[k] = cc
		c.wg.Go(func() { c.dial(cc) })
	}
	c.mu.Unlock()

	select {
	case <-cc.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if cc.dialErr != nil {
		return nil, cc.dialErr
	}
	return cc, nil
}

// dial is the goroutine that establishes cc. On success it starts cc's
// writer and reader; on failure it forgets cc so the next call dials again.
// Either way it then releases the callers waiting on cc.ready.
func (c *Client) dial(cc *clientConn) {
	l, maxFrame, err := c.connect(cc.addr, cc.node)

	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(cc.ready)
	if c.closed {
		// Close ran during the dial and did not see this link.
		if l != nil {
			l.fail(ErrClosed)
		}
		err = ErrClosed
	}
	if err != nil {
		cc.dialErr = err
		delete(c.conns, cc.key())
		return
	}
	cc.link, cc.maxFrame = l, maxFrame
	c.wg.Go(l.writeLoop)
	c.wg.Go(func() { c.readLoop(cc) })
}

// connect dials addr and does the handshake, within DialTimeout and until
// Close, refusing a server that does not answer as node (unless node is
// ""). It returns the link and the largest frame both ends accept.
func (c *Client) connect(addr, node string) (*link, int, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.DialTimeout)
	defer cancel()
	nc, err := c.dialTCP(ctx, addr)
	if err != nil {
		return nil, 0, fmt.Errorf("rpc: dial %s: %w", addr, err)
	}
	// The handshake blocks on the socket: closing it is how the timeout and
	// Close interrupt it.
	stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
	l := newLink(nc, c.cfg.WriteTimeout)
	accept := func(h Hello) error {
		if node != "" && h.Node != node {
			return fmt.Errorf("it is node %q, not %q", h.Node, node)
		}
		if c.cfg.Accept != nil {
			return c.cfg.Accept(h)
		}
		return nil
	}
	maxFrame, err := clientHandshake(l, addr, withClusterID(c.cfg.Hello, c.cfg.ClusterID), c.cfg.MaxFrame, c.cfg.Secret, accept)
	if !stop() {
		err = fmt.Errorf("rpc: handshake with %s: %w", addr, ctx.Err())
	}
	if err != nil {
		_ = nc.Close()
		return nil, 0, err
	}
	return l, maxFrame, nil
}

// readLoop is cc's reader goroutine. When the connection breaks it forgets
// cc, then fails every call in flight on it.
func (c *Client) readLoop(cc *clientConn) {
	cc.link.fail(cc.readResponses(c.cfg.MaxFrame))
	cause := cc.link.cause

	c.mu.Lock()
	if c.conns[cc.key()] == cc {
		delete(c.conns, cc.key())
	}
	c.mu.Unlock()

	failed := cause
	if errors.Is(cause, wire.ErrFrameTooLarge) {
		// A response too large to read: the calls were sent, so they must
		// not match wire.ErrFrameTooLarge, which means nothing was sent.
		failed = fmt.Errorf("rpc: the server broke the frame limit: %v", cause)
	}
	cc.failPending(fmt.Errorf("%w: %s: %w", ErrConnClosed, cc.addr, failed))
	if !errors.Is(cause, ErrClosed) {
		c.cfg.Logger.Warn("rpc: connection lost", "addr", cc.addr, "err", cause)
	}
}
