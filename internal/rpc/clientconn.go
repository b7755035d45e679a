package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/singlewriter/singlewriter/internal/wire"
)

// result is what a caller waiting for a response receives.
type result struct {
	body []byte
	err  error
}

// connKey identifies a client's connection: the server's address and the
// node name it must answer as ("" for any).
type connKey struct{ addr, node string }

// clientConn is a client's connection to one address and the calls in
// flight on it.
type clientConn struct {
	addr string
	// node is the name the server must give in its Hello; "" accepts any.
	node string
	// ready is closed when the dial ends. Invariant: link and maxFrame (on
	// success) or dialErr (on failure) are set before, and none changes
	// after.
	ready chan struct{}
	link  *link
	// maxFrame is the largest frame both ends accept (see frameLimit).
	maxFrame int
	dialErr  error
	// nextID numbers requests; ids start at 1, 0 is the handshake.
	nextID atomic.Uint64

	// mu guards pending and broken.
	mu sync.Mutex
	// pending maps the id of each call in flight to the channel (buffered,
	// capacity 1) its caller waits on.
	pending map[uint64]chan result
	// broken is set once the reader has failed every pending call; later
	// calls fail with it at once.
	broken error
}

func newClientConn(k connKey) *clientConn {
	return &clientConn{
		addr:    k.addr,
		node:    k.node,
		ready:   make(chan struct{}),
		pending: make(map[uint64]chan result),
	}
}

func (cc *clientConn) key() connKey { return connKey{cc.addr, cc.node} }

// call sends one request and waits for its response or for ctx. If ctx is
// cancelled after the request was queued, the server is told (a FlagCancel
// frame), so that it cancels the handler's context; a deadline is not told
// (a server that needs it is sent it in the request, as the router's calls
// are).
func (cc *clientConn) call(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
	id := cc.nextID.Add(1)
	ch := make(chan result, 1)
	cc.mu.Lock()
	if cc.broken != nil {
		cc.mu.Unlock()
		return nil, cc.broken
	}
	cc.pending[id] = ch
	cc.mu.Unlock()

	// If the link fails instead of taking the frame, the call is pending, so
	// the reader's failPending answers it below.
	if err := cc.link.send(ctx, wire.Frame{ID: id, Type: typ, Body: body}); err != nil && ctx.Err() != nil {
		cc.forget(id)
		return nil, ctx.Err()
	}
	select {
	case r := <-ch:
		return r.body, r.err
	case <-ctx.Done():
		cc.forget(id)
		if errors.Is(ctx.Err(), context.Canceled) {
			// At most once, and never blocking: with the queue full the
			// handler runs on to its end, as before cancellations were sent.
			cc.link.offer(wire.Frame{ID: id, Type: typ, Flags: wire.FlagCancel})
		}
		return nil, ctx.Err()
	}
}

// forget drops a call whose caller gave up; its response, if any, is
// discarded on arrival.
func (cc *clientConn) forget(id uint64) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	delete(cc.pending, id)
}

// readResponses hands each response to its waiting caller until reading
// fails or the server breaks the protocol.
func (cc *clientConn) readResponses(maxFrame int) error {
	for {
		f, err := wire.ReadFrame(cc.link.br, maxFrame)
		if err != nil {
			return err
		}
		if f.Flags&wire.FlagResponse == 0 {
			return fmt.Errorf("rpc: server sent a request (id %d) to a client", f.ID)
		}
		cc.mu.Lock()
		ch, ok := cc.pending[f.ID]
		delete(cc.pending, f.ID)
		cc.mu.Unlock()
		if !ok {
			continue // the caller gave up
		}
		if f.Flags&wire.FlagError != 0 {
			ch <- result{err: &RemoteError{Msg: string(f.Body)}}
		} else {
			ch <- result{body: f.Body}
		}
	}
}

// failPending fails every call in flight, and every later call, with err.
func (cc *clientConn) failPending(err error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.broken = err
	for id, ch := range cc.pending {
		ch <- result{err: err}
		delete(cc.pending, id)
	}
}
