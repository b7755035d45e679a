package owner

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/singlewriter/singlewriter/store"
)

// preCopy is a copy of a partition fetched here ahead of a proposal (see
// PreCopy), kept for the Sync that completes it (fetchCopy).
type preCopy struct {
	// source is the node it is copied from; over is this node's position
	// when it started, the data the copy replaces (store.NewCopy).
	source string
	over   store.Position
	// cancel stops the fetch (a pre-copy from another source replaces it).
	cancel context.CancelFunc
	// done is closed when the fetch ended; then err is its outcome, and,
	// without error, copy holds it and tracker names the source's tracker
	// of what changed since it started.
	done    chan struct{}
	err     error
	copy    *store.Copy
	tracker uint64
	// taken is closed when a Sync took the copy over (takePreCopy).
	taken chan struct{}
}

// HandlePreCopy copies partition req.P from req.Source into a staged copy
// kept for the Sync of the proposal that asked for it (see PreCopy),
// waiting for it at most req.Wait: Done false means it is still being
// fetched, and the same PreCopy asked again waits for the same copy. A
// finished pre-copy is kept until a Sync takes it, another pre-copy of
// the partition replaces it, or store.TrackerIdle passed (the source has
// then forgotten what changed since), and discarded.
func (o *Owner) HandlePreCopy(ctx context.Context, req PreCopy) (SyncReply, error) {
	if err := o.checkPartition(req.P); err != nil {
		return SyncReply{}, err
	}
	if req.Source == o.cfg.Self {
		return SyncReply{}, fmt.Errorf("owner: pre-copy of partition %d from this node itself", req.P)
	}
	m, err := o.store.Meta(req.P)
	if err != nil {
		return SyncReply{}, err
	}
	j, err := o.startPreCopy(req, m.Position)
	if err != nil {
		return SyncReply{}, err
	}
	if err := waitDone(ctx, j.done, req.Wait); err != nil || !ended(j.done) {
		return SyncReply{}, err
	}
	return SyncReply{Done: j.err == nil}, j.err
}

// startPreCopy returns the pre-copy of req over this node's position
// over: the one running or kept, or a new one, which replaces (cancels) a
// pre-copy from another source or over another position.
func (o *Owner) startPreCopy(req PreCopy, over store.Position) (*preCopy, error) {
	pt, unlock, err := o.lockOpen(req.P)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if j := pt.pre; j != nil {
		if j.source == req.Source && j.over == over && (!ended(j.done) || j.err == nil) {
			return j, nil
		}
		j.cancel()
	}
	ctx, cancel := context.WithCancel(o.ctx)
	j := &preCopy{source: req.Source, over: over, cancel: cancel, done: make(chan struct{}), taken: make(chan struct{})}
	pt.pre = j
	o.wg.Go(func() {
		defer cancel()
		c, err := o.store.NewCopy(req.P, over)
		if err == nil {
			var n int
			// A source that is paused, but not yet out of the ring, would
			// hold the proposal back a RequestTimeout for nothing.
			n, j.tracker, err = o.fetchInto(ctx, c, req.Source, FetchRequest{P: req.P, Live: true}, o.cfg.DrainTimeout)
			o.cfg.Logger.Info("pre-copied partition", "partition", req.P, "source", req.Source, "entries", n, "err", err)
		}
		j.copy, j.err = c, err
		close(j.done)
		if err == nil {
			// The source forgets what changed once its tracker was not
			// read for as long.
			kept := time.NewTimer(store.TrackerIdle)
			defer kept.Stop()
			select {
			case <-j.taken:
			case <-kept.C:
			case <-ctx.Done():
			}
		}
		pt.mu.Lock()
		taken := ended(j.taken)
		if pt.pre == j {
			pt.pre = nil
		}
		pt.mu.Unlock()
		if !taken && c != nil {
			o.discard(req.P, c)
		}
	})
	return j, nil
}

// takePreCopy hands over the pre-copy of the partition from source over
// this node's position over, if there is one, waiting for it while it is
// still being fetched (a proposer that stopped waiting for it, after an
// error, sent its Sync meanwhile) unless ctx ends: the caller completes it
// (and discards it). A pre-copy from another source or over another
// position is cancelled: the Sync's copy replaces it.
func (pt *partition) takePreCopy(ctx context.Context, source string, over store.Position) *preCopy {
	pt.mu.Lock()
	j := pt.pre
	if j != nil && (j.source != source || j.over != over) {
		j.cancel()
		j = nil
	}
	pt.mu.Unlock()
	if j == nil || waitDone(ctx, j.done, 0) != nil {
		return nil
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.pre != j || j.err != nil || j.tracker == 0 || ended(j.taken) {
		return nil
	}
	pt.pre = nil
	close(j.taken)
	return j
}

// preCopy has the replicas of the attempt's own replica set that are not
// replicas of base, and in a resync those of base that this node, serving
// base, saw miss a batch (partition.lagged), copy partition p from base's owner
// while it still serves it (see PreCopy), and waits for them, each while
// it answers that it is still copying. base's owner may be this node if
// it serves base (a resync): its new replicas copy from it before its own
// Prepare drains it. Another owner's live pages are served only while it
// serves the partition (HandleFetch), so a pre-copy never holds back the
// acquisition of a partition nobody serves, a restarted owner's included.
// The partition being served, the attempt gives its slot back first, so
// that takeovers do not wait behind copies, and takes one again once
// done; pre-copies are bounded on their own (maxConcurrentAttempts at a
// time). It returns the source, or "" if nothing was pre-copied from
// base's owner: it is gone (the ring no longer lists it, or there is no
// ring), it is this node and this is not a resync, or the Owner is
// closing. A pre-copy that failed is not reported: its Sync copies the
// whole partition.
func (o *Owner) preCopy(p int, base store.Claim, replicas []string, resync bool) string {
	var lagged []string
	switch {
	case base.Owner == o.cfg.Self && !resync:
		return ""
	case base.Owner == o.cfg.Self:
		lagged = o.parts[p].lagged()
	case o.ring == nil:
		return ""
	default:
		if _, member := o.ring.Table().Member(base.Owner); !member {
			return ""
		}
	}
	var targets []string
	for _, r := range replicas {
		if !slices.Contains(base.Replicas, r) || slices.Contains(lagged, r) {
			targets = append(targets, r)
		}
	}
	if len(targets) == 0 {
		return base.Owner
	}
	if o.parts[p].yieldSlot() {
		// Taken again after the pre-copy slot is given back.
		defer o.takeSlot(p)
	}
	select {
	case o.preCopies <- struct{}{}:
		defer func() { <-o.preCopies }()
	case <-o.ctx.Done():
		return ""
	}
	var wg sync.WaitGroup
	for _, r := range targets {
		wg.Go(func() {
			// A target answers within half a drain timeout that it is
			// still copying; one that does not answer within a drain
			// timeout is taken as paused (a laggard often is), and not
			// waited for: its Sync copies the whole partition.
			req := PreCopy{P: p, Source: base.Owner, Wait: o.cfg.DrainTimeout / 2}
			err := o.askUntilDone(o.cfg.DrainTimeout, func(ctx context.Context) (SyncReply, error) {
				if r == o.cfg.Self {
					return o.HandlePreCopy(ctx, req)
				}
				return o.cfg.Transport.PreCopy(ctx, r, req)
			})
			if err != nil {
				o.cfg.Logger.Debug("pre-copy failed; the sync copies the whole partition", "to", r, "partition", p, "err", err)
			}
		})
	}
	wg.Wait()
	return base.Owner
}
