package owner

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// syncReplica has node to (this node or another) copy a partition per
// req, asking again while the copy is still being fetched: each request is
// bounded by RequestTimeout, the copy only by the progress of its pages.
func (o *Owner) syncReplica(to string, req Sync) error {
	req.Wait = o.cfg.RequestTimeout / 2
	return o.askUntilDone(o.cfg.RequestTimeout, func(ctx context.Context) (SyncReply, error) {
		if to == o.cfg.Self {
			return o.HandleSync(ctx, req)
		}
		return o.cfg.Transport.Sync(ctx, to, req)
	})
}

// askUntilDone asks (a Sync or a PreCopy), each time within timeout,
// until the answer is Done or an error.
func (o *Owner) askUntilDone(timeout time.Duration, ask func(ctx context.Context) (SyncReply, error)) error {
	for {
		ctx, cancel := context.WithTimeout(o.ctx, timeout)
		r, err := ask(ctx)
		cancel()
		if err != nil || r.Done {
			return err
		}
	}
}

// waitDone waits until done is closed, at most wait (zero: no bound),
// and returns ctx's error if ctx ends first.
func waitDone(ctx context.Context, done <-chan struct{}, wait time.Duration) error {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-done:
	case <-timeout:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// ended reports whether done is closed.
func ended(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// HandleSync brings this node's copy of a partition up to req.Pos by
// copying it from req.Source under req.Ballot. It first learns the
// proposal's base claim (see Sync.Base). A copy already at req.Pos is
// kept, but the promise is raised to req.Ballot as a copy would raise it,
// in the transaction that checks the position (store.Keep): the promise is
// how learn knows the copy may serve a newer proposal. Otherwise the copy
// is fetched in the background (copyJob) and HandleSync waits for it at
// most req.Wait: Done false means it is still being fetched, and the same
// Sync asked again waits for the same copy. A replica that knows a chosen
// claim newer than the proposal's base, or holds data written after it,
// refuses: the proposer works from an old base and must not roll that
// data back. A successor of the base that is not known to be final does
// not count: a proposer that got this far had promises from a majority of
// the base's replicas that did not know it, so it can never become final
// (see Proposer), and its owner never wrote under it.
func (o *Owner) HandleSync(ctx context.Context, req Sync) (SyncReply, error) {
	if err := o.checkPartition(req.P); err != nil {
		return SyncReply{}, err
	}
	if j := o.parts[req.P].copyFor(req); j != nil {
		return o.awaitCopy(ctx, req, j)
	}
	if c, ok := o.claims.Get(req.P); ok && c.Epoch > req.Base.Epoch {
		return SyncReply{}, fmt.Errorf("owner: sync of partition %d refused: claim %d, newer than the proposal's base %d, is final", req.P, c.Epoch, req.Base.Epoch)
	}
	m, err := o.store.Meta(req.P)
	if err != nil {
		return SyncReply{}, err
	}
	if blank(m) {
		// Perhaps a replica that lost its data directory: what it promised
		// or accepted before, in choosing the successor of the base or of
		// an older claim, is forgotten. Once the copy raises its promise,
		// or the base is recorded (a root claim), it no longer looks like
		// it forgot, so that must be recorded first. It is readmitted only
		// once it has the cluster's claims table, which refuses a proposal
		// from a base older than the newest final claim above (a stale
		// proposal would readmit it under too old a base).
		if !o.synced.Load() {
			return SyncReply{}, fmt.Errorf("owner: sync of partition %d refused: %s holds no copy and has no claims table from the cluster yet", req.P, o.cfg.Self)
		}
		if err := o.store.Readmit(ctx, req.P, req.Base.Epoch); err != nil {
			return SyncReply{}, err
		}
	}
	if err := o.learn(ctx, req.P, req.Base); err != nil {
		return SyncReply{}, err
	}
	if m, err = o.store.Meta(req.P); err != nil {
		return SyncReply{}, err
	}
	if m.Position == req.Pos {
		// Keep checks the position again with the promise: a Drop (this
		// node learning a claim it is not a replica of) may have committed
		// since the read above. Then the copy is fetched like any other.
		err := o.store.Keep(ctx, req.P, req.Ballot, req.Pos)
		if err == nil {
			// The copy may have moved since this node last applied a
			// replicated batch (it owned the partition meanwhile): the new
			// owner's first batch must re-read the position, and goes on
			// if it is already waiting for its turn after req.Pos.
			o.parts[req.P].installed(req.Pos)
			return SyncReply{Done: true}, nil
		}
		if !errors.Is(err, store.ErrPosition) {
			return SyncReply{}, err
		}
		if m, err = o.store.Meta(req.P); err != nil {
			return SyncReply{}, err
		}
	}
	switch {
	case m.HasChosen && m.Chosen.Epoch > req.Base.Epoch && (m.Final || m.Chosen.Base != req.Base.Epoch):
		return SyncReply{}, fmt.Errorf("owner: sync of partition %d refused: claim %d is newer than the proposal's base %d", req.P, m.Chosen.Epoch, req.Base.Epoch)
	case m.Position.Epoch > req.Base.Epoch:
		return SyncReply{}, fmt.Errorf("owner: sync of partition %d refused: data written at epoch %d, after the proposal's base %d", req.P, m.Position.Epoch, req.Base.Epoch)
	case req.Source == o.cfg.Self:
		return SyncReply{}, fmt.Errorf("owner: sync of partition %d: own position %v is not the expected %v", req.P, m.Position, req.Pos)
	case m.Promised > req.Ballot:
		// Install would refuse it: no use fetching the copy.
		return SyncReply{}, fmt.Errorf("owner: sync of partition %d refused: ballot %d promised, above the sync's %d", req.P, m.Promised, req.Ballot)
	}
	j, err := o.startCopy(req, m.Position)
	if err != nil {
		return SyncReply{}, err
	}
	return o.awaitCopy(ctx, req, j)
}

// copyJob is a copy of a partition being fetched here for a Sync, in the
// background of the Sync requests that wait for it: a copy outlives any
// one request's timeout.
type copyJob struct {
	// ballot, base, source and pos are those of the Sync it serves.
	ballot epoch.Epoch
	base   epoch.Epoch
	source string
	pos    store.Position
	// cancel stops the copy (a Sync at a higher ballot replaces it).
	cancel context.CancelFunc
	// done is closed when the copy ended; err is its outcome.
	done chan struct{}
	err  error
}

// copyFor returns the copy of the partition fetched for req, if any: one
// still running, or one that ended that no Sync has reported yet.
func (pt *partition) copyFor(req Sync) *copyJob {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if j := pt.copy; j != nil && j.ballot == req.Ballot && j.base == req.Base.Epoch && j.source == req.Source && j.pos == req.Pos {
		return j
	}
	return nil
}

// copying reports whether a copy of the partition is being fetched here.
func (pt *partition) copying() bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.copy != nil && !ended(pt.copy.done)
}

// lockOpen locks partition p's state, and Close out (closeMu, for
// reading), unless the Owner is closed: a goroutine started meanwhile is
// waited for by Close. unlock releases both.
func (o *Owner) lockOpen(p int) (pt *partition, unlock func(), err error) {
	o.closeMu.RLock()
	if o.closed {
		o.closeMu.RUnlock()
		return nil, nil, ErrClosed
	}
	pt = o.parts[p]
	pt.mu.Lock()
	return pt, func() { pt.mu.Unlock(); o.closeMu.RUnlock() }, nil
}

// startCopy starts fetching the copy req asks for, replacing (cancelling)
// a copy for a lower ballot: that proposal lost to req's, and its fetches
// are refused once the source promised req's ballot. It refuses while a
// copy for a higher ballot runs. The new copy starts once the one it
// replaces ended, so two copies of a partition never run at once here.
func (o *Owner) startCopy(req Sync, replaced store.Position) (*copyJob, error) {
	pt, unlock, err := o.lockOpen(req.P)
	if err != nil {
		return nil, err
	}
	defer unlock()
	prev := pt.copy
	if prev != nil && !ended(prev.done) {
		if prev.ballot >= req.Ballot {
			return nil, fmt.Errorf("owner: sync of partition %d refused: a copy for ballot %d is being fetched", req.P, prev.ballot)
		}
		prev.cancel()
	}
	ctx, cancel := context.WithCancel(o.ctx)
	j := &copyJob{ballot: req.Ballot, base: req.Base.Epoch, source: req.Source, pos: req.Pos, cancel: cancel, done: make(chan struct{})}
	pt.copy = j
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer close(j.done)
		defer cancel()
		if prev != nil {
			<-prev.done
		}
		j.err = o.fetchCopy(ctx, req, replaced)
	}()
	return j, nil
}

// awaitCopy waits for copy j of req at most req.Wait (zero: until it
// ends) or until ctx ends. A copy that ended is reported once: the next
// Sync starts a new one.
func (o *Owner) awaitCopy(ctx context.Context, req Sync, j *copyJob) (SyncReply, error) {
	if err := waitDone(ctx, j.done, req.Wait); err != nil || !ended(j.done) {
		return SyncReply{}, err
	}
	pt := o.parts[req.P]
	pt.mu.Lock()
	if pt.copy == j {
		pt.copy = nil
	}
	pt.mu.Unlock()
	if j.err != nil {
		return SyncReply{}, j.err
	}
	return SyncReply{Done: true}, nil
}

// fetchCopy fetches req's copy page by page into a staged store.Copy, one
// page in memory at a time whatever the partition's size, each page
// within RequestTimeout, and installs it in one transaction, so a replica
// never holds half a copy. The install is refused if this replica's data
// moved from replaced, the position HandleSync checked (no data written
// after the proposal's base): a batch applied meanwhile, of a claim chosen
// while the copy ran, may hold acknowledged writes the copy lacks. A
// pre-copy from req's source over replaced is completed with the entries
// that changed since it started instead (see PreCopy); if the source can
// no longer send them, the whole partition is copied.
func (o *Owner) fetchCopy(ctx context.Context, req Sync, replaced store.Position) error {
	if pre := o.parts[req.P].takePreCopy(ctx, req.Source, replaced); pre != nil {
		n, _, err := o.fetchInto(ctx, pre.copy, req.Source, FetchRequest{P: req.P, Ballot: req.Ballot, Pos: req.Pos, Tracker: pre.tracker}, o.cfg.RequestTimeout)
		if err == nil {
			o.cfg.Logger.Info("completing a pre-copied partition", "partition", req.P, "ballot", req.Ballot, "source", req.Source, "position", req.Pos, "changed", n, "replaced", replaced)
			err = o.install(ctx, req, pre.copy, &o.stats.preCopiesInstalled)
			o.discard(req.P, pre.copy)
			return err
		}
		o.discard(req.P, pre.copy) // before staging another: not twice the disk
		if ctx.Err() != nil {
			return err
		}
		o.cfg.Logger.Info("a pre-copy could not be completed: copying the whole partition", "partition", req.P, "source", req.Source, "err", err)
	}
	c, err := o.store.NewCopy(req.P, replaced)
	if err != nil {
		return err
	}
	defer o.discard(req.P, c)
	n, _, err := o.fetchInto(ctx, c, req.Source, FetchRequest{P: req.P, Ballot: req.Ballot, Pos: req.Pos}, o.cfg.RequestTimeout)
	if err != nil {
		return err
	}
	o.cfg.Logger.Info("copying partition", "partition", req.P, "ballot", req.Ballot, "base", req.Base.Epoch, "source", req.Source, "position", req.Pos, "entries", n, "replaced", replaced)
	return o.install(ctx, req, c, &o.stats.copiesInstalled)
}

// install installs copy c of req's partition at req's ballot and
// position, and counts it in installed.
func (o *Owner) install(ctx context.Context, req Sync, c *store.Copy, installed *atomic.Uint64) error {
	if err := c.Install(ctx, req.Ballot, req.Pos); err != nil {
		o.parts[req.P].forgetQueued()
		return err
	}
	o.parts[req.P].installed(req.Pos)
	installed.Add(1)
	return nil
}

// fetchInto fetches the pages of req from node from into c, each within
// RequestTimeout, the first within first, and returns how many entries it
// added and the tracker a live request's first page started (else
// req.Tracker).
func (o *Owner) fetchInto(ctx context.Context, c *store.Copy, from string, req FetchRequest, first time.Duration) (entries int, tracker uint64, err error) {
	for timeout := first; ; timeout = o.cfg.RequestTimeout {
		fctx, cancel := context.WithTimeout(ctx, timeout)
		pg, err := o.cfg.Transport.Fetch(fctx, from, req)
		cancel()
		if err != nil {
			return entries, req.Tracker, err
		}
		if req.Tracker == 0 {
			req.Tracker = pg.Tracker
		}
		if err := c.Add(ctx, pg.Entries); err != nil {
			return entries, req.Tracker, err
		}
		entries += len(pg.Entries)
		if pg.Next == nil {
			return entries, req.Tracker, nil
		}
		req.After = pg.Next
	}
}

// discard drops copy c of partition p, installed or not.
func (o *Owner) discard(p int, c *store.Copy) {
	if err := c.Discard(); err != nil {
		o.cfg.Logger.Warn("discarding a partition copy failed", "partition", p, "err", err)
	}
}
