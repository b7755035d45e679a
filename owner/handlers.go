package owner

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// fetchPageBytes is the size of one page of a partition's data in transfer.
const fetchPageBytes = 1 << 20

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
	pt := o.parts[req.P]
	pt.beginPrepare()
	defer pt.endPrepare()
	m, err := o.store.Meta(req.P)
	if err != nil {
		return PromiseReply{}, err
	}
	newer := m.HasChosen && m.Chosen.Epoch > req.Base
	if !newer && epoch.CheckPromise(m.Promised, req.Ballot) == nil {
		o.drain(ctx, req.P)
	}
	return HandlePrepare(ctx, o.store, req)
}

// drain stops serving partition p and waits for its leases, at most
// DrainTimeout.
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
		o.cfg.Logger.Warn("drain timed out: calls still in flight will be fenced", "partition", p)
	case <-ctx.Done():
	}
}

// HandleAccept answers an Accept from another node.
func (o *Owner) HandleAccept(ctx context.Context, req Accept) (AcceptReply, error) {
	if err := o.checkPartition(req.P); err != nil {
		return AcceptReply{}, err
	}
	return HandleAccept(ctx, o.store, req)
}

// HandleChoose records that claim c of partition p was chosen. A node that
// served an older claim of p stops; a node that is not among c's replicas
// drops its copy of p's data (it keeps the protocol state).
func (o *Owner) HandleChoose(ctx context.Context, p int, c store.Claim) error {
	if err := o.checkPartition(p); err != nil {
		return err
	}
	if err := o.store.Choose(ctx, p, c); err != nil {
		return err
	}
	o.claims.Merge(p, c)
	pt := o.parts[p]
	if served, ok := pt.servedClaim(); ok && served.Epoch < c.Epoch {
		pt.stop()
	}
	if !slices.Contains(c.Replicas, o.cfg.Self) {
		if err := o.store.Drop(ctx, p); err != nil {
			return err
		}
	}
	o.Kick()
	return nil
}

// HandleSync brings this node's copy of a partition up to req.Pos by
// copying it from req.Source under req.Ballot. A copy already at req.Pos is
// kept. The copy starts with a fenced reset, so a half-finished copy never
// looks more advanced than it is.
func (o *Owner) HandleSync(ctx context.Context, req Sync) error {
	if err := o.checkPartition(req.P); err != nil {
		return err
	}
	m, err := o.store.Meta(req.P)
	if err != nil {
		return err
	}
	if m.Position == req.Pos {
		return nil
	}
	if req.Source == o.cfg.Self {
		return fmt.Errorf("owner: sync of partition %d: own position %v is not the expected %v", req.P, m.Position, req.Pos)
	}
	if err := o.store.Reset(ctx, req.P, req.Ballot); err != nil {
		return err
	}
	var after []byte
	for {
		entries, next, err := o.cfg.Transport.Fetch(ctx, req.Source, req.P, req.Ballot, after)
		if err != nil {
			return err
		}
		if err := o.store.Import(ctx, req.P, req.Ballot, entries); err != nil {
			return err
		}
		if next == nil {
			break
		}
		after = next
	}
	return o.store.SetPosition(ctx, req.P, req.Ballot, req.Pos)
}

// HandleFetch serves one page of partition p's data to a proposal at
// ballot. It refuses once a higher ballot was promised here: the data may
// then move on, and that proposal cannot be chosen anyway.
func (o *Owner) HandleFetch(p int, ballot epoch.Epoch, after []byte) ([]store.Entry, []byte, error) {
	if err := o.checkPartition(p); err != nil {
		return nil, nil, err
	}
	m, err := o.store.Meta(p)
	if err != nil {
		return nil, nil, err
	}
	if err := epoch.CheckWrite(m.Promised, ballot); err != nil {
		return nil, nil, err
	}
	return o.store.Export(p, after, fetchPageBytes)
}

// HandleHandoff starts acquiring partition p now, because its owner is
// leaving. It returns at once; the caller watches the claims.
func (o *Owner) HandleHandoff(p int) error {
	if err := o.checkPartition(p); err != nil {
		return err
	}
	if o.leaving.Load() {
		return fmt.Errorf("owner: %s is leaving too", o.cfg.Self)
	}
	c, ok := o.claims.Get(p)
	if !ok {
		return fmt.Errorf("owner: no claim known for partition %d", p)
	}
	pt := o.parts[p]
	if !pt.tryBusy(time.Now()) {
		return nil // an attempt is already running
	}
	o.wg.Add(1)
	go o.attempt(Step{P: p, Action: Acquire, Claim: c}, o.ring.Table())
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
