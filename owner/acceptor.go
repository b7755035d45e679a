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
	// Choose records c as chosen if it is newer than the chosen claim known
	// (or marks it final), and returns the state before.
	Choose(ctx context.Context, p int, c store.Claim, final bool) (store.Meta, error)
	// Meta returns the partition's protocol state.
	Meta(p int) (store.Meta, error)
}

// HandlePrepare is a replica's answer to a Prepare. It first records the
// base as chosen and final (a proposer only builds on final claims). A
// replica that knows a chosen claim newer than the base answers with it,
// without promising, so the proposer restarts from there.
func HandlePrepare(ctx context.Context, acc Acceptor, req Prepare) (PromiseReply, error) {
	m, err := learn(ctx, acc, req.P, req.Base)
	if err != nil {
		return PromiseReply{}, err
	}
	if m.HasChosen && m.Chosen.Epoch > req.Base.Epoch {
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
	m, err := learn(ctx, acc, req.P, req.Base)
	if err != nil {
		return AcceptReply{}, err
	}
	if m.HasChosen && m.Chosen.Epoch > req.Base.Epoch {
		return AcceptReply{Meta: m}, nil
	}
	err = acc.Accept(ctx, req.P, req.Value)
	if err != nil && !errors.Is(err, epoch.ErrStale) {
		return AcceptReply{}, err
	}
	m, merr := acc.Meta(req.P)
	return AcceptReply{OK: err == nil, Meta: m}, merr
}

// HandleChoose is a replica's answer to a Choose. The record counts toward
// making the claim final only if the replica knew no newer chosen claim
// and had accepted no newer successor of the claim's base
// (store.Meta.RecordCounts): a proposer that prepared a higher ballot on
// this replica either meets the record (and learns the claim), or has its
// newer successor accepted first (and the record does not count), or is
// refused its accepts after the record.
func HandleChoose(ctx context.Context, acc Acceptor, req Choose) (ChooseReply, error) {
	prev, err := acc.Choose(ctx, req.P, req.Claim, req.Final)
	if err != nil {
		return ChooseReply{}, err
	}
	m, err := acc.Meta(req.P)
	if err != nil {
		return ChooseReply{}, err
	}
	return ChooseReply{Recorded: prev.RecordCounts(req.Claim), Meta: m}, nil
}

// learn records the final claim base (the root claim needs no record) and
// returns the state after.
func learn(ctx context.Context, acc Acceptor, p int, base store.Claim) (store.Meta, error) {
	if base.Owner != "" {
		if _, err := acc.Choose(ctx, p, base, true); err != nil {
			return store.Meta{}, err
		}
	}
	return acc.Meta(p)
}
