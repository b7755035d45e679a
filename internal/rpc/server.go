package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/singlewriter/singlewriter/internal/wire"
)

// Accept error backoff bounds, as in net/http: a listener that keeps failing
// (out of file descriptors) is retried without spinning.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// maxHandshakes bounds the connections in their handshake at once. Each
// holds a goroutine and its buffers (about 74 KiB, more with TLS's record
// buffers) until it proves itself
// or HandshakeTimeout ends it; beyond the bound the oldest is closed, so a
// flood of silent or slow connections costs a few MiB, not memory without
// limit, and a peer's handshake (one round trip) still gets through idle
// connections that someone keeps opening.
const maxHandshakes = 64

// errCrowdedOut ends a connection's handshake when maxHandshakes newer
// ones arrived before it was done.
var errCrowdedOut = errors.New("rpc: connection closed before its handshake: too many connections in their handshake")

// Server answers requests arriving on a listener. Create it with Serve and
// stop it with Close.
type Server struct {
	cfg ServerConfig
	// ctx is cancelled by Close; every handler context derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts every goroutine the server started.
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// mu guards closed and links.
	mu     sync.Mutex
	closed bool
	// links holds every open connection, so that Close can drop them.
	links map[*link]struct{}

	// handshaking lists the connections in their handshake, oldest first;
	// crowdedOut counts those closed because newer ones arrived.
	handshaking []*link
	crowdedOut  atomic.Int64
}

// Serve validates cfg, fills in its defaults and starts accepting
// connections on cfg.Listener.
func Serve(cfg ServerConfig) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, ctx: ctx, cancel: cancel, links: make(map[*link]struct{})}
	s.wg.Go(s.acceptLoop)
	return s, nil
}

// Addr returns the listener's address.
func (s *Server) Addr() net.Addr {
	return s.cfg.Listener.Addr()
}

// Close stops accepting, drops every connection (calls in flight on them fail
// with ErrConnClosed at the client), cancels handler contexts and waits for
// every goroutine of the server, handlers included. It returns the error of
// closing the listener. Calling it again returns the same result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		// Drop connections before cancelling handlers, so that an answer a
		// handler gives to its cancelled context is never written.
		for l := range s.links {
			l.fail(ErrClosed)
		}
		s.mu.Unlock()
		if err := s.cfg.Listener.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			s.closeErr = err
		}
		s.cancel()
		s.wg.Wait()
	})
	return s.closeErr
}

func (s *Server) acceptLoop() {
	var backoff time.Duration
	for {
		nc, err := s.cfg.Listener.Accept()
		if err != nil {
			if s.isClosed() {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				s.cfg.Logger.Error("rpc: listener closed under the server", "addr", s.Addr(), "err", err)
				return
			}
			backoff = min(max(2*backoff, minAcceptBackoff), maxAcceptBackoff)
			s.cfg.Logger.Warn("rpc: accept failed", "addr", s.Addr(), "err", err, "retry", backoff)
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		l := newLink(nc, s.cfg.WriteTimeout)
		if !s.track(l) {
			_ = nc.Close()
			return
		}
		s.wg.Go(func() { s.serveConn(l) })
	}
}

// track registers l, a new connection, so that Close drops it, and as in
// its handshake, closing the oldest connection in its handshake beyond
// maxHandshakes; false if the server is closed.
func (s *Server) track(l *link) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.links[l] = struct{}{}
	s.handshaking = append(s.handshaking, l)
	var oldest *link
	if len(s.handshaking) > maxHandshakes {
		oldest = s.handshaking[0]
		s.handshaking = slices.Delete(s.handshaking, 0, 1)
	}
	s.mu.Unlock()
	if oldest != nil {
		oldest.fail(errCrowdedOut)
		// Logged at the 1st, 2nd, 4th, 8th... time: a flood is seen
		// without flooding the log.
		if n := s.crowdedOut.Add(1); n&(n-1) == 0 {
			s.cfg.Logger.Warn("rpc: too many connections in their handshake: closed the oldest", "remote", oldest.nc.RemoteAddr().String(), "limit", maxHandshakes, "closed_so_far", n)
		}
	}
	return true
}

// handshaken records that l's handshake ended.
func (s *Server) handshaken(l *link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.handshaking, l); i >= 0 {
		s.handshaking = slices.Delete(s.handshaking, i, i+1)
	}
}

func (s *Server) untrack(l *link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.links, l)
}

// serveConn is a connection's reader goroutine: it does the handshake, starts
// the writer, reads requests until the connection fails, then cancels the
// handlers still running for it.
func (s *Server) serveConn(l *link) {
	defer s.untrack(l)
	remote := l.nc.RemoteAddr().String()
	peer, maxFrame, err := s.handshake(l)
	s.handshaken(l)
	if err != nil {
		l.fail(err)
		if !errors.Is(l.cause, ErrClosed) && !errors.Is(l.cause, errCrowdedOut) {
			s.cfg.Logger.Warn("rpc: refused connection", "remote", remote, "err", err)
		}
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	s.wg.Go(l.writeLoop)
	l.fail(s.readRequests(ctx, l, maxFrame))
	switch {
	case errors.Is(l.cause, ErrClosed), errors.Is(l.cause, io.EOF):
		s.cfg.Logger.Debug("rpc: connection closed", "remote", remote, "peer", peer.Node, "err", l.cause)
	default:
		s.cfg.Logger.Warn("rpc: dropped connection", "remote", remote, "peer", peer.Node, "err", l.cause)
	}
}

// handshake runs serverHandshake within HandshakeTimeout. It returns the
// client's Hello and the largest frame both ends accept.
func (s *Server) handshake(l *link) (Hello, int, error) {
	// The reads only: the link's writer bounds the writes (deadlineWriter).
	if err := l.nc.SetReadDeadline(time.Now().Add(s.cfg.HandshakeTimeout)); err != nil {
		return Hello{}, 0, err
	}
	peer, maxFrame, err := serverHandshake(l, withClusterID(s.cfg.Hello, s.cfg.ClusterID), s.cfg.MaxFrame, s.cfg.Secret, s.cfg.Accept)
	if err != nil {
		return peer, 0, err
	}
	return peer, maxFrame, l.nc.SetReadDeadline(time.Time{})
}

// readRequests reads requests and starts a handler goroutine for each, with
// a context of its own, until reading fails or a frame breaks the
// protocol. A cancel frame cancels the context of the handler still
// running for its id. maxAnswer bounds the answers: the largest frame both
// ends accept.
func (s *Server) readRequests(ctx context.Context, l *link, maxAnswer int) error {
	running := map[uint64]context.CancelFunc{}
	var mu sync.Mutex // guards running, shared with the handler goroutines
	for {
		f, err := wire.ReadFrame(l.br, s.cfg.MaxFrame)
		if err != nil {
			return err
		}
		switch f.Flags {
		case 0:
		case wire.FlagCancel:
			mu.Lock()
			cancel := running[f.ID]
			mu.Unlock()
			if cancel != nil {
				cancel()
			}
			continue
		default:
			return fmt.Errorf("rpc: request %d has flags %#x", f.ID, f.Flags)
		}
		hctx, cancel := context.WithCancel(ctx)
		mu.Lock()
		running[f.ID] = cancel
		mu.Unlock()
		s.wg.Go(func() {
			s.handle(hctx, l, f, maxAnswer)
			mu.Lock()
			delete(running, f.ID)
			mu.Unlock()
			cancel()
		})
	}
}

// handle runs the Handler for one request and queues its answer. An answer
// that would exceed maxAnswer becomes an error answer, and error texts are
// cut to fit, so that no answer makes the client drop the connection.
func (s *Server) handle(ctx context.Context, l *link, req wire.Frame, maxAnswer int) {
	resp := wire.Frame{ID: req.ID, Type: req.Type, Flags: wire.FlagResponse}
	body, err := s.cfg.Handler(ctx, req.Type, req.Body)
	if err == nil && wire.HeaderSize+len(body) > maxAnswer {
		err = fmt.Errorf("%w: response of %d bytes exceeds the max frame of %d",
			wire.ErrFrameTooLarge, wire.HeaderSize+len(body), maxAnswer)
	}
	if err != nil {
		resp.Flags |= wire.FlagError
		body = errorText(err, maxAnswer)
	}
	resp.Body = body
	// This fails only if the connection is gone, and then nobody can be told.
	_ = l.send(ctx, resp)
}

// errorText is err's text, cut so that a frame carrying it fits maxFrame.
func errorText(err error, maxFrame int) []byte {
	text := err.Error()
	return []byte(text[:min(len(text), maxFrame-wire.HeaderSize)])
}

// isClosed reports whether Close has begun.
func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
