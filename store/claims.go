package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/singlewriter/singlewriter/epoch"
	bolt "go.etcd.io/bbolt"
)

// Promise is Paxos phase 1 at this replica: it durably promises ballot e
// for partition p if e is above every promise made so far
// (epoch.CheckPromise), and returns the new Meta. On refusal it returns the
// current Meta and the *epoch.StaleError, so the proposer learns the
// promise to beat. Promise is never relaxed by the test hook.
func (s *Store) Promise(ctx context.Context, p int, e epoch.Epoch) (Meta, error) {
	if err := checkPartition(p); err != nil {
		return Meta{}, err
	}
	var result Meta
	err := s.do(ctx, p, withPartition(p, func(tx *bolt.Tx, pt *partition) (outcome, abort error) {
		result = pt.meta
		if err := epoch.CheckPromise(pt.meta.Promised, e); err != nil {
			return err, nil
		}
		pt.meta.Promised = e
		result = pt.meta
		return nil, pt.saveMeta(tx)
	}))
	if err != nil && !errors.Is(err, epoch.ErrStale) {
		return Meta{}, err
	}
	return result, err
}

// Accept is Paxos phase 2 at this replica: it durably accepts c as the
// successor proposal for partition p, c.Epoch being its ballot, if the
// ballot passes the fence (epoch.CheckWrite against the promise), and
// raises the promise to c.Epoch. A refused accept returns the
// *epoch.StaleError and changes nothing.
func (s *Store) Accept(ctx context.Context, p int, c Claim) error {
	if err := checkClaim(p, c); err != nil {
		return err
	}
	return s.do(ctx, p, withPartition(p, func(tx *bolt.Tx, pt *partition) (outcome, abort error) {
		if err := fence(pt.meta.Promised, c.Epoch); err != nil {
			return err, nil
		}
		pt.meta.Promised = max(pt.meta.Promised, c.Epoch)
		pt.meta.Accepted = cloneClaim(c)
		return nil, pt.saveMeta(tx)
	}))
}

// Choose records c as partition p's chosen claim if none is known or c is
// newer (higher epoch) than the known one, and marks it Final if final is
// set (a claim at the known epoch can be marked final later). A claim not
// known to be final is recorded only if the record counts toward its
// finality (Meta.RecordCounts): a record that could not count would make
// the replica refuse, forever, the proposers that must replace c if c can
// never become final. Recording
// clears an accepted proposal whose ballot is at or below c.Epoch (it is
// settled) and appends an AuditRecord in the same transaction. It returns
// the Meta as it was before, so the caller can tell what the record
// replaced. Choose is not fenced: a chosen claim is a fact learned, not a
// write, and it does not change the promise.
func (s *Store) Choose(ctx context.Context, p int, c Claim, final bool) (Meta, error) {
	if err := checkClaim(p, c); err != nil {
		return Meta{}, err
	}
	var prev Meta
	err := s.do(ctx, p, withPartition(p, func(tx *bolt.Tx, pt *partition) (outcome, abort error) {
		prev = pt.meta
		switch {
		case pt.meta.HasChosen && c.Epoch < pt.meta.Chosen.Epoch:
			return nil, nil
		case pt.meta.HasChosen && c.Epoch == pt.meta.Chosen.Epoch:
			if !final || pt.meta.Final {
				return nil, nil
			}
			pt.meta.Final = true
			return nil, pt.saveMeta(tx)
		case !final && !pt.meta.RecordCounts(c):
			return nil, nil
		}
		pt.meta.Chosen = cloneClaim(c)
		pt.meta.HasChosen = true
		pt.meta.Final = final
		if pt.meta.Accepted.Owner != "" && pt.meta.Accepted.Epoch <= c.Epoch {
			pt.meta.Accepted = Claim{}
		}
		if err := pt.saveMeta(tx); err != nil {
			return nil, err
		}
		return nil, pt.appendAudit(AuditRecord{Epoch: c.Epoch, Owner: c.Owner, At: s.now()})
	}))
	return prev, err
}

// checkClaim rejects a bad partition or a claim without an owner (an empty
// owner means "no claim" in Meta).
func checkClaim(p int, c Claim) error {
	if err := checkPartition(p); err != nil {
		return err
	}
	if c.Owner == "" {
		return fmt.Errorf("%w: claim at epoch %d has no owner", ErrInvalid, c.Epoch)
	}
	return nil
}

// cloneClaim copies c's slices, so that the caller may reuse them.
func cloneClaim(c Claim) Claim {
	c.Replicas = append([]string(nil), c.Replicas...)
	c.BaseReplicas = append([]string(nil), c.BaseReplicas...)
	return c
}
