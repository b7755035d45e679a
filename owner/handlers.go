package owner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// FetchPageBytes bounds one page of a partition's data in transfer (see
// store.Export): a transport's frames must hold a page of this size.
const FetchPageBytes = 1 << 20

// HandlePrepare answers a Prepare from another node. If this node serves
// the partition and will promise, it first drains: it stops admitting
// calls and waits up to DrainTimeout for the calls in flight, whose commits
// then still land at the old epoch. A call that outlives the drain (a
// paused handler, say) commits after the promise and is refused by the
// store: that refusal is the fence.
func (o *Owner) HandlePrepare(ctx context.Context, req Prepare) (PromiseReply, error) {
	if err := o.checkPartition(req.P); err != nil {
		return PromiseReply{}, err
	}
	if m, refused, err := o.refusal(req.P, req.Base); refused {
		if err == nil || errors.Is(err, errNoPart) {
			o.stats.refusedPrepares.Add(1)
		}
		return PromiseReply{Meta: m}, err
	}
	pt := o.parts[req.P]
	pt.beginPrepare()
	defer pt.endPrepare()
	if err := o.learn(ctx, req.P, req.Base); err != nil {
		return PromiseReply{}, err
	}
	m, err := o.store.Meta(req.P)
	if err != nil {
		return PromiseReply{}, err
	}
	newer := m.HasChosen && m.Chosen.Epoch > req.Base.Epoch
	if !newer && epoch.CheckPromise(m.Promised, req.Ballot) == nil {
		o.drain(ctx, req.P)
	}
	r, err := HandlePrepare(ctx, o.store, req)
	if err == nil && !r.OK {
		o.stats.refusedPrepares.Add(1)
	}
	if err == nil && r.OK {
		// Only now: a call that outlived a drain and stops at once finds
		// its commit refused by the promise, not let through.
		pt.revokeStoppedBelow(req.Ballot)
	}
	return r, err
}

// drain stops serving partition p and waits for its leases, at most
// DrainTimeout. Those still held are revoked once a promise is made (see
// Lease.Context).
func (o *Owner) drain(ctx context.Context, p int) {
	pt := o.parts[p]
	if _, serving := pt.servedClaim(); !serving {
		return
	}
	idle := pt.stop()
	t := time.NewTimer(o.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-idle:
		o.cfg.Logger.Info("drained partition", "partition", p)
	case <-t.C:
		o.stats.drainTimeouts.Add(1)
		o.cfg.Logger.Warn("drain timed out: the calls still in flight will be fenced, and have their context cancelled once the promise is made", "partition", p)
	case <-ctx.Done():
	}
}

// HandleAccept answers an Accept from another node.
func (o *Owner) HandleAccept(ctx context.Context, req Accept) (AcceptReply, error) {
	if err := o.checkPartition(req.P); err != nil {
		return AcceptReply{}, err
	}
	if m, refused, err := o.refusal(req.P, req.Base); refused {
		return AcceptReply{Meta: m}, err
	}
	if err := o.learn(ctx, req.P, req.Base); err != nil {
		return AcceptReply{}, err
	}
	return HandleAccept(ctx, o.store, req)
}

// HandleChoose records a chosen claim; see Choose and ChooseReply. A final
// claim is also acted on, see learn. A replica that lost its data since it
// became a replica of the claim's base (checkMemory) does not record a
// claim that is not known final: it may have promised a higher ballot
// before, to a proposer that then replaced the claim, and its record would
// count as if it had not.
func (o *Owner) HandleChoose(ctx context.Context, req Choose) (ChooseReply, error) {
	if err := o.checkPartition(req.P); err != nil {
		return ChooseReply{}, err
	}
	if !req.Final {
		base := store.Claim{Epoch: req.Claim.Base, Replicas: req.Claim.BaseReplicas}
		if m, refused, err := o.refusal(req.P, base); refused {
			return ChooseReply{Meta: m}, err
		}
	}
	r, err := HandleChoose(ctx, o.store, req)
	if err != nil || !req.Final {
		return r, err
	}
	return r, o.learn(ctx, req.P, req.Claim)
}

// learn acts on final claim c of partition p: it records it, puts it in
// the claims table, stops serving an older claim, and drops p's data if
// this node is not among c's replicas and promised nothing above c's epoch
// (it keeps the protocol state).
func (o *Owner) learn(ctx context.Context, p int, c store.Claim) error {
	if c.Owner == "" {
		return nil
	}
	prev, err := o.store.Choose(ctx, p, c, true)
	if err != nil {
		return err
	}
	if o.claims.Merge(p, c) {
		o.kick()
	}
	if prev.HasChosen && prev.Chosen.Epoch > c.Epoch {
		return nil // old news
	}
	pt := o.parts[p]
	pt.stopBefore(c.Epoch)
	// Drop keeps the copy if a ballot above c's epoch was promised: a
	// newer proposal reached this node, and may have synced this copy for
	// itself (this node may own c's successor).
	if !slices.Contains(c.Replicas, o.cfg.Self) && prev.Position != (store.Position{}) {
		o.cfg.Logger.Info("not a replica of the new claim: dropping the copy unless a higher ballot was promised", "partition", p, "claim", c.Epoch, "replicas", c.Replicas, "position", prev.Position, "promised", prev.Promised)
		defer pt.forgetQueued()
		return o.store.Drop(ctx, p, c.Epoch)
	}
	return nil
}

// HandleFetch serves one page of a partition's data (see FetchRequest).
// A live page is served only while this node serves the partition.
// Unless the request is live, it refuses once a higher ballot than the
// request's was promised here (the data may then move on, and that
// proposal cannot be chosen anyway) or when the data is not at the
// request's position (it was dropped or moved on), so a copy is always of
// the data the proposal chose.
func (o *Owner) HandleFetch(req FetchRequest) (Page, error) {
	p := req.P
	if err := o.checkPartition(p); err != nil {
		return Page{}, err
	}
	pg := Page{Tracker: req.Tracker}
	var err error
	if req.Live {
		// Only while the partition is served here: a pre-copy from a
		// node that does not serve it would hold back, for nothing, the
		// acquisition of a partition nobody serves (preCopy).
		if _, serving := o.parts[p].servedClaim(); !serving {
			return Page{}, fmt.Errorf("owner: pre-copy of partition %d refused: %s does not serve it", p, o.cfg.Self)
		}
		if pg.Tracker == 0 && req.After == nil {
			if pg.Tracker, err = o.store.Track(p); err != nil {
				return Page{}, err
			}
		}
		pg.Entries, pg.Next, err = o.store.ExportLive(p, pg.Tracker, req.After, FetchPageBytes)
		return pg, err
	}
	m, err := o.store.Meta(p)
	if err != nil {
		return Page{}, err
	}
	if err := epoch.CheckWrite(m.Promised, req.Ballot); err != nil {
		return Page{}, err
	}
	// Both exports check the position in the transaction that reads the
	// page: a drop or an install may commit after the meta above was read.
	if req.Tracker != 0 {
		pg.Entries, pg.Next, err = o.store.ExportChanges(p, req.Tracker, req.Pos, req.After, FetchPageBytes)
	} else {
		pg.Entries, pg.Next, err = o.store.Export(p, req.Pos, req.After, FetchPageBytes)
	}
	return pg, err
}

// HandleHandoff starts acquiring partition req.P now, with replica set
// req.Replicas, because its owner is leaving, or, sent to the claim's own
// owner, because a backup holds no copy (askForCopies; refused unless the
// ring places the partition on this node). It returns at once; the caller
// watches the claims.
func (o *Owner) HandleHandoff(req Handoff) error {
	p := req.P
	if err := o.checkPartition(p); err != nil {
		return err
	}
	if o.leaving.Load() {
		return fmt.Errorf("%w: %s", ErrLeaving, o.cfg.Self)
	}
	c, ok := o.claims.Get(p)
	if !ok {
		return fmt.Errorf("owner: no claim known for partition %d", p)
	}
	// A Handoff to the claim's own owner is a backup asking for a copy
	// (askForCopies); a Leave's never is. Only the ring's owner acts on it:
	// another one would race the ring's owner, whose claim syncs the
	// replicas anyway.
	if t := o.ring.Table(); c.Owner == o.cfg.Self && (p >= len(t.Owners) || t.Owners[p] != o.cfg.Self) {
		return fmt.Errorf("owner: partition %d: %s owns its claim but the ring places it elsewhere", p, o.cfg.Self)
	}
	o.closeMu.RLock()
	defer o.closeMu.RUnlock()
	if o.closed {
		return ErrClosed
	}
	pt := o.parts[p]
	if !pt.tryBusy(time.Now()) {
		return nil // an attempt is already running
	}
	o.wg.Add(1)
	go o.attempt(Step{P: p, Action: Acquire, Claim: c, Replicas: req.Replicas}, o.ring.Table())
	return nil
}

func (o *Owner) checkPartition(p int) error {
	if o.ctx.Err() != nil {
		return ErrClosed
	}
	if p < 0 || p >= len(o.parts) {
		return fmt.Errorf("owner: partition %d out of range [0,%d)", p, len(o.parts))
	}
	return nil
}

// errNoPart is wrapped by checkMemory's refusals: this node takes no part
// in a choice it may have voted in before it lost its data.
var errNoPart = errors.New("it takes no part")

// checkMemory refuses to act as a replica of claim base of partition p
// (promise, accept, record a successor not known final) when this node is
// one of base's replicas but holds no trace of having been one (forgot).
// A replica that forgot what it promised and stored must not count toward
// a majority: it could hide a chosen successor, or make a copy that lacks
// acknowledged writes look like the most advanced one. It takes part
// again once a new claim syncs a copy to it (Install raises its promise).
// A claim whose only replica it was has no other copy to protect: with
// Config.AcceptDataLoss it takes part, with its empty store.
//
// A replica that a sync gave a copy again takes no part in choosing the
// successor of that sync's base claim or of any older one (store.Readmit):
// it may have promised or accepted in those choices before its loss. Had
// it taken part, a proposer could count it in a majority that does not know
// a successor the replica once helped choose, and choose another.
//
// It returns p's meta as it read it.
func (o *Owner) checkMemory(p int, base store.Claim) (store.Meta, error) {
	m, err := o.store.Meta(p)
	if err != nil {
		return m, err
	}
	if o.forgot(m, base) && !(o.cfg.AcceptDataLoss && len(base.Replicas) == 1) {
		return m, fmt.Errorf("owner: partition %d: %s is a replica of the claim at epoch %d but holds no promise and no data of it (was its data directory lost?); %w until a new claim syncs it", p, o.cfg.Self, base.Epoch, errNoPart)
	}
	if base.Epoch < m.Amnesia {
		return m, fmt.Errorf("owner: partition %d: %s was given a copy again after losing its data, under a claim based on epoch %d; %w in choosing the successor of the claim at epoch %d", p, o.cfg.Self, m.Amnesia-1, errNoPart, base.Epoch)
	}
	return m, nil
}

// refusal applies checkMemory to a message about the successor of claim
// base of partition p. refused reports that this node takes no part; it
// then answers with its state m, without promising, accepting or
// recording, if it knows a final claim newer than base (newerFinal), and
// otherwise fails with err (m is then empty).
func (o *Owner) refusal(p int, base store.Claim) (m store.Meta, refused bool, err error) {
	m, err = o.checkMemory(p, base)
	switch {
	case err == nil:
		return m, false, nil
	case newerFinal(m, base):
		return m, true, nil
	default:
		return store.Meta{}, true, err
	}
}

// newerFinal reports whether m holds a final claim newer than base. A
// replica that takes no part in choosing base's successor still answers
// with it: that is no promise, and it tells the proposer where to go on
// from (a readmitted replica knows the base of the claim that synced it).
func newerFinal(m store.Meta, base store.Claim) bool {
	return m.HasChosen && m.Final && m.Chosen.Epoch > base.Epoch
}

// forgot reports whether this node is one of claim c's replicas but its
// partition's meta m holds no promise, no accepted proposal and no data:
// its data directory was lost and it came back under the same name, or,
// as a backup, the copy the claim was to give it never arrived. A claim's
// only replica always promised it, except a root claim (epoch 0): its
// replica, the bootstrap node, promised nothing, but recorded it as chosen
// before any other node could learn it (Owner.Bootstrap), which a store
// that forgot it lacks. With replication factor 1 the partitions that
// stay on the bootstrap node keep their root claims for good.
func (o *Owner) forgot(m store.Meta, c store.Claim) bool {
	if !slices.Contains(c.Replicas, o.cfg.Self) {
		return false
	}
	if c.Epoch == 0 {
		return blank(m) && !m.HasChosen
	}
	return blank(m)
}

// blank reports whether a partition's meta holds no promise, no accepted
// proposal and no data.
func blank(m store.Meta) bool {
	return m.Promised == 0 && m.Position == (store.Position{}) && m.Accepted.Owner == ""
}
