package owner

import (
	"context"
	"errors"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// Acceptor is a replica's durable protocol state, one record per partition.
// *store.Store implements it; the simulation uses an in-memory one.
type Acceptor interface {
	// Promise durably raises the partition's promise to e if e is above it,
	// and returns the state after; a refusal returns the state and an
	// error matching epoch.ErrStale.
	Promise(ctx context.Context, p int, e epoch.Epoch) (store.Meta, error)
	// Accept durably records c as the accepted successor proposal if
	// c.Epoch is at or above the promise.
	Accept(ctx context.Context, p int, c store.Claim) error
	// Choose records c as chosen if it is newer than the chosen claim known.
	Choose(ctx context.Context, p int, c store.Claim) error
	// Meta returns the partition's protocol state.
	Meta(p int) (store.Meta, error)
}

// HandlePrepare is a replica's answer to a Prepare. A replica that knows a
// chosen claim newer than the Prepare's base answers with it (without
// promising), so the proposer restarts from there.
func HandlePrepare(ctx context.Context, acc Acceptor, req Prepare) (PromiseReply, error) {
	m, err := acc.Meta(req.P)
	if err != nil {
		return PromiseReply{}, err
	}
	if m.HasChosen && m.Chosen.Epoch > req.Base {
		return PromiseReply{Meta: m}, nil
	}
	m, err = acc.Promise(ctx, req.P, req.Ballot)
	if errors.Is(err, epoch.ErrStale) {
		return PromiseReply{Meta: m}, nil
	}
	if err != nil {
		return PromiseReply{}, err
	}
	return PromiseReply{OK: true, Meta: m}, nil
}

// HandleAccept is a replica's answer to an Accept.
func HandleAccept(ctx context.Context, acc Acceptor, req Accept) (AcceptReply, error) {
	m, err := acc.Meta(req.P)
	if err != nil {
		return AcceptReply{}, err
	}
	if m.HasChosen && m.Chosen.Epoch > req.Value.Base {
		return AcceptReply{Meta: m}, nil
	}
	err = acc.Accept(ctx, req.P, req.Value)
	if errors.Is(err, epoch.ErrStale) {
		m, merr := acc.Meta(req.P)
		return AcceptReply{Meta: m}, merr
	}
	if err != nil {
		return AcceptReply{}, err
	}
	m, err = acc.Meta(req.P)
	return AcceptReply{OK: true, Meta: m}, err
}
