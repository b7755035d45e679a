package router

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/singlewriter/singlewriter/store"
)

// Retry pacing of Call while a partition has no reachable owner.
const (
	minRetryDelay = 2 * time.Millisecond
	maxRetryDelay = 200 * time.Millisecond
)

// CallOption changes one Call.
type CallOption func(*callOptions)

type callOptions struct{ id []byte }

// MaxRequestIDSize bounds the request ID a call may carry (see RequestID).
const MaxRequestIDSize = 64

// RequestID sets the call's request ID (at most MaxRequestIDSize bytes;
// a longer one fails with ErrRequestIDTooLarge). Calls with the
// same ID on the same key run once: a repeat returns the first one's stored
// response (kept for Config.DedupRetention). A repeat with another method
// or payload does not run and fails with ErrRequestIDReused once the first
// call is known durable (the stored record keeps a 64-bit hash of them; a
// record stored by a build before protocol version 6 may not, and answers
// any repeat); if the first call's commit failed, the repeat is retried,
// and runs if nothing of the first call was kept. The same ID on
// another key is another call. Without it, or with an empty one, Call
// draws a random ID, which still makes Call's own retries safe: Call stops
// retrying before the owner can have pruned the first attempt's response.
func RequestID(id []byte) CallOption {
	return func(o *callOptions) { o.id = id }
}

// Call runs method on key's owner with payload and returns the handler's
// response. It may enter any node: the call goes to the owner of the key's
// partition and is retried, with the same request ID, until an owner
// answers or ctx ends, or until half of Config.DedupRetention has passed
// (a retry after the owner pruned the response of an attempt that ran could
// run the call again; no attempt starts at the owner later either, and the
// handler's ctx ends then). Its errors match ErrUnavailable (no owner answered
// in time), ErrUnknownMethod, ErrHandler, ErrStaleEpoch (replication factor
// 1 only: the handler ran but the partition moved on before its commit:
// nothing was written), ErrOverloaded, ErrRequestIDReused, ErrPayloadTooLarge,
// ErrResultTooLarge, ErrEmptyKey, ErrKeyTooLarge, ErrCallCycle or ErrClosed; or, with
// nothing written and no retry, an error naming a write the owner's store
// refuses (a node whose limits differ from this one's).
func (n *Node) Call(ctx context.Context, key []byte, method string, payload []byte, opts ...CallOption) ([]byte, error) {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case len(key) == 0:
		return nil, ErrEmptyKey
	case len(key) > store.MaxKeySize:
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrKeyTooLarge, len(key), store.MaxKeySize)
	case len(payload) > n.cfg.MaxPayload:
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrPayloadTooLarge, len(payload), n.cfg.MaxPayload)
	case len(o.id) > MaxRequestIDSize:
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrRequestIDTooLarge, len(o.id), MaxRequestIDSize)
	case n.ctx.Err() != nil:
		return nil, n.stopErr
	case !n.ready.Load():
		return nil, ErrClosed
	case calledBack(ctx, n, key):
		return nil, fmt.Errorf("%w: key %q", ErrCallCycle, key)
	}
	if len(o.id) == 0 {
		o.id = newRequestID(time.Now())
	}
	req := callRequest{ID: o.id, Key: key, Method: method, Payload: payload}
	p := n.Partition(key)
	delay := minRetryDelay
	var last error
	// Past giveUp, the owner may have pruned the dedup record of an
	// attempt that ran (its answer lost), and a retry would run it again;
	// nor may an attempt queued behind its key's earlier calls start then.
	giveUp := time.Now().Add(n.cfg.DedupRetention / 2)
	attemptCtx := ctx
	if d, ok := ctx.Deadline(); !ok || d.After(giveUp) {
		var cancel context.CancelFunc
		attemptCtx, cancel = context.WithDeadline(ctx, giveUp)
		defer cancel()
	}
	for {
		r, err := n.route(attemptCtx, p, req)
		if errors.Is(err, wire.ErrFrameTooLarge) {
			// Nothing was sent, and no retry can send it.
			return nil, fmt.Errorf("%w: key, method and payload together exceed the frame between nodes: %w", ErrPayloadTooLarge, err)
		}
		if err == nil {
			switch r.Status {
			case statusOK:
				return r.Body, nil
			case statusUnknownMethod:
				return nil, fmt.Errorf("%w: %q", ErrUnknownMethod, method)
			case statusHandlerError:
				return nil, fmt.Errorf("%w: %s", ErrHandler, r.Body)
			case statusTooLarge:
				return nil, fmt.Errorf("%w: %s; nothing was written", ErrResultTooLarge, r.Body)
			case statusInvalid:
				return nil, fmt.Errorf("router: the owner's store refuses the call's write (%s); nothing was written", r.Body)
			case statusOverloaded:
				return nil, fmt.Errorf("%w: %s", ErrOverloaded, r.Body)
			case statusReusedID:
				return nil, fmt.Errorf("%w: %s", ErrRequestIDReused, r.Body)
			case statusStale:
				refusal := strings.TrimPrefix(string(r.Body), "epoch: ")
				if n.cfg.ReplicationFactor == 1 {
					return nil, fmt.Errorf("router: write refused, the partition moved to a newer epoch (%s); nothing was written: %w", refusal, ErrStaleEpoch)
				}
				// Another replica may hold the write: ask the new owner.
				err = fmt.Errorf("router: write refused by a replica, the partition moved to a newer epoch (%s): %w", refusal, ErrStaleEpoch)
			case statusNotOwner:
				err = fmt.Errorf("%w: partition %d", ErrNotOwner, p)
				if n.owner.Claims().Merge(p, r.Claim) {
					last = err
					continue // a newer claim: go there now
				}
			default:
				err = errors.New(string(r.Body))
			}
		}
		last = err
		if n.ctx.Err() != nil {
			return nil, n.stopErr
		}
		if !time.Now().Before(giveUp) {
			return nil, fmt.Errorf("%w: partition %d: no answer within half of Config.DedupRetention (%v), past which a retry could run the call again (last refusal: %v)", ErrUnavailable, p, n.cfg.DedupRetention/2, last)
		}
		wait := delay/2 + rand.N(delay/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: partition %d: %w (last refusal: %v)", ErrUnavailable, p, ctx.Err(), last)
		case <-n.ctx.Done():
			t.Stop()
			return nil, n.stopErr
		case <-t.C:
		}
		delay = min(2*delay, maxRetryDelay)
	}
}

// newRequestID returns a random request ID that sorts by its creation
// time: 8 bytes of big-endian Unix nanoseconds, then 8 random bytes. The
// dedup records of a partition are stored in a B-tree keyed by request ID;
// time-ordered keys land at its end, so a flush dirties its last pages
// instead of pages all over the tree.
func newRequestID(now time.Time) []byte {
	id := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(now.UnixNano()))
	return binary.BigEndian.AppendUint64(id, rand.Uint64())
}

// route sends one attempt of a call to the owner this node knows for p.
func (n *Node) route(ctx context.Context, p int, req callRequest) (callResponse, error) {
	c, ok := n.owner.Claims().Get(p)
	if !ok {
		return callResponse{}, fmt.Errorf("router: no claim known for partition %d", p)
	}
	if c.Owner == n.cfg.Name {
		// The handler runs under the caller's context: Close must end it
		// too (a call from another node runs under the RPC server's).
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(n.ctx, cancel)()
		// The call may outlive this attempt (ctx ends first): it must not
		// share the caller's buffers, which the caller may reuse.
		req.ID, req.Key, req.Payload = bytes.Clone(req.ID), bytes.Clone(req.Key), bytes.Clone(req.Payload)
		return n.execute(ctx, req), nil
	}
	addr, err := n.rpcAddr(c.Owner)
	if err != nil {
		return callResponse{}, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		req.Budget = max(time.Until(deadline), time.Nanosecond)
	}
	b, err := n.client.CallNode(ctx, c.Owner, addr, msgCall, req.encode())
	if err != nil {
		return callResponse{}, err
	}
	return decodeCallResponse(b)
}
