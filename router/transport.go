package router

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/singlewriter/singlewriter/internal/rpc"
	"github.com/singlewriter/singlewriter/owner"
)

// transport carries the owner's protocol messages over the node's RPC
// client. It implements owner.Transport.
type transport struct{ n *Node }

func (t transport) call(ctx context.Context, to string, typ uint8, body []byte) ([]byte, error) {
	addr, err := t.n.rpcAddr(to)
	if err != nil {
		return nil, err
	}
	return t.n.client.CallNode(ctx, to, addr, typ, body)
}

// Prepare implements owner.Transport.
func (t transport) Prepare(ctx context.Context, to string, req owner.Prepare) (owner.PromiseReply, error) {
	b, err := t.call(ctx, to, msgPrepare, req.Encode())
	if err != nil {
		return owner.PromiseReply{}, err
	}
	return owner.DecodePromiseReply(b)
}

// Accept implements owner.Transport.
func (t transport) Accept(ctx context.Context, to string, req owner.Accept) (owner.AcceptReply, error) {
	b, err := t.call(ctx, to, msgAccept, req.Encode())
	if err != nil {
		return owner.AcceptReply{}, err
	}
	return owner.DecodeAcceptReply(b)
}

// Sync implements owner.Transport.
func (t transport) Sync(ctx context.Context, to string, req owner.Sync) (owner.SyncReply, error) {
	b, err := t.call(ctx, to, msgSync, req.Encode())
	if err != nil {
		return owner.SyncReply{}, err
	}
	return owner.DecodeSyncReply(b)
}

// Choose implements owner.Transport.
func (t transport) Choose(ctx context.Context, to string, req owner.Choose) (owner.ChooseReply, error) {
	b, err := t.call(ctx, to, msgChoose, req.Encode())
	if err != nil {
		return owner.ChooseReply{}, err
	}
	return owner.DecodeChooseReply(b)
}

// PreCopy implements owner.Transport.
func (t transport) PreCopy(ctx context.Context, to string, req owner.PreCopy) (owner.SyncReply, error) {
	b, err := t.call(ctx, to, msgPreCopy, req.Encode())
	if err != nil {
		return owner.SyncReply{}, err
	}
	return owner.DecodeSyncReply(b)
}

// Fetch implements owner.Transport.
func (t transport) Fetch(ctx context.Context, from string, req owner.FetchRequest) (owner.Page, error) {
	b, err := t.call(ctx, from, msgFetch, req.Encode())
	if err != nil {
		return owner.Page{}, err
	}
	return owner.DecodePage(b)
}

// Handoff implements owner.Transport. A refusal because the node is
// leaving too comes back matching owner.ErrLeaving.
func (t transport) Handoff(ctx context.Context, to string, req owner.Handoff) error {
	_, err := t.call(ctx, to, msgHandoff, req.Encode())
	var remote *rpc.RemoteError
	if errors.As(err, &remote) && strings.HasPrefix(remote.Msg, owner.ErrLeaving.Error()) {
		return fmt.Errorf("%w (%s)", owner.ErrLeaving, remote.Msg)
	}
	return err
}

// Replicate implements owner.Transport. A replica's refusal of a stale
// epoch comes back as epoch.ErrStale (see owner.DecodeOutcomes).
func (t transport) Replicate(ctx context.Context, to string, req owner.Replicate) ([]error, error) {
	b, err := t.call(ctx, to, msgReplicate, req.Encode())
	if err != nil {
		return nil, err
	}
	return owner.DecodeOutcomes(b, to)
}

// serve answers one RPC from another node. Errors go back as the RPC's
// error; a call's own outcome travels in its response's status.
func (n *Node) serve(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
	switch typ {
	case msgCall:
		req, err := decodeCallRequest(body)
		if err != nil {
			return nil, err
		}
		if req.Budget > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, req.Budget)
			defer cancel()
		}
		return n.execute(ctx, req).encode(), nil
	case msgPrepare:
		req, err := owner.DecodePrepare(body)
		if err != nil {
			return nil, err
		}
		r, err := n.owner.HandlePrepare(ctx, req)
		return r.Encode(), err
	case msgAccept:
		req, err := owner.DecodeAccept(body)
		if err != nil {
			return nil, err
		}
		r, err := n.owner.HandleAccept(ctx, req)
		return r.Encode(), err
	case msgSync:
		req, err := owner.DecodeSync(body)
		if err != nil {
			return nil, err
		}
		r, err := n.owner.HandleSync(ctx, req)
		return r.Encode(), err
	case msgChoose:
		req, err := owner.DecodeChoose(body)
		if err != nil {
			return nil, err
		}
		r, err := n.owner.HandleChoose(ctx, req)
		return r.Encode(), err
	case msgPreCopy:
		req, err := owner.DecodePreCopy(body)
		if err != nil {
			return nil, err
		}
		r, err := n.owner.HandlePreCopy(ctx, req)
		return r.Encode(), err
	case msgFetch:
		req, err := owner.DecodeFetchRequest(body)
		if err != nil {
			return nil, err
		}
		pg, err := n.owner.HandleFetch(req)
		if err != nil {
			return nil, err
		}
		return pg.Encode(), nil
	case msgHandoff:
		req, err := owner.DecodeHandoff(body)
		if err != nil {
			return nil, err
		}
		return nil, n.owner.HandleHandoff(req)
	case msgReplicate:
		req, err := owner.DecodeReplicate(body)
		if err != nil {
			return nil, err
		}
		// Each batch's refusal is in the reply's body, not an RPC error, so
		// that the owner learns which were refused and why (stale: it was
		// replaced).
		return owner.EncodeOutcomes(n.owner.HandleReplicate(ctx, req)), nil
	}
	return nil, fmt.Errorf("router: unknown message type %d", typ)
}
