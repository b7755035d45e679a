package owner

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// resyncInterval is the shortest time a claim is served before a lagging
// replica makes the owner acquire the partition again to resync it.
const resyncInterval = 5 * time.Second

// maxResyncDoublings caps the backoff of repeated resyncs (see dueResync):
// resyncInterval doubled at most 4 times, 80 s.
const maxResyncDoublings = 4

// partition is the runtime state of one partition on this node.
type partition struct {
	p int
	// mu guards every field below.
	mu sync.Mutex
	// serving is true between the start marker of claim and a drain.
	// Invariant: serving implies claim.Owner is this node.
	serving bool
	claim   store.Claim
	// servingCtx is the leases' context of the serving period that start
	// began; revoke ends it with ErrRevoked. unrevoked holds the revokes
	// of the periods stop ended, with their claims' epochs, until a newer
	// claim is promised, chosen or served here (revokeStoppedBelow).
	servingCtx context.Context
	revoke     context.CancelCauseFunc
	unrevoked  []stoppedPeriod
	// inflight counts leases not yet released; idle is closed when it
	// drops to zero while draining.
	inflight int
	idle     chan struct{}
	// busy is true while an acquire or resume runs for the partition.
	busy bool
	// preparing counts Prepares being handled: serving may not start while
	// one may be about to promise a higher epoch.
	preparing int
	// retryAt delays the next attempt after a failure; failures counts
	// consecutive failures for the backoff.
	retryAt  time.Time
	failures int
	// seen is the highest epoch this node has seen refuse it.
	seen epoch.Epoch
	// pos is the position of the last batch submitted under the served
	// claim, when it has other replicas: the next batch follows it.
	pos store.Position
	// lagging is set when a replica did not confirm a batch of the served
	// claim: a new claim must sync the replicas again; stalled, when a
	// batch lacked a majority. servedSince is when serving the claim began.
	lagging     bool
	stalled     bool
	servedSince time.Time
	// laggards are the replicas known to have missed a batch of the
	// served claim (a resync pre-copies to them).
	laggards []string
	// resyncs counts this node's resyncs of the partition in a row (claims
	// started as the successor of a claim it served while a replica
	// lagged); see dueResync.
	resyncs int
	// lostReported is set once the loss of this partition's only copy
	// was logged (resume), so that the retries do not log it again.
	lostReported bool
	// lagsBefore is the epoch of a claim whose start marker a replica did
	// not confirm before serving it began (the marker's Commit may be
	// decided before that replica's answer comes): start then begins
	// lagging.
	lagsBefore epoch.Epoch
	// copy is the copy of this partition fetched here for a Sync (see
	// copyJob), nil once its outcome was reported; a backup that is
	// copying does not ask for a copy.
	copy *copyJob
	// pre is the pre-copy of this partition fetched or kept here (see
	// preCopy), nil if none.
	pre *preCopy
	// yield, set while an attempt holds a slot of the Owner's semaphore,
	// gives that slot back early (see drive).
	yield func()

	// On a replica: queued is the position of the last batch queued in the
	// store here (valid if queuedKnown), and lastQueued that batch's commit
	// until it is known to have succeeded (nil then, and when queued was
	// read from the store: queued is durable); turns[n] is closed when the
	// batch with LSN n is queued, waking the ones that follow it.
	queued      store.Position
	queuedKnown bool
	lastQueued  queuedCommit
	turns       map[uint64]*turn
}

// turn is what batches waiting for the batch with one LSN wait on: ch is
// closed when it is queued. waiters counts those still waiting, so that
// the last one to give up, not the first, forgets it.
type turn struct {
	ch      chan struct{}
	waiters int
}

// wakeTurn wakes the batches waiting for the batch with LSN n to be
// queued. Called with mu held.
func (pt *partition) wakeTurn(n uint64) {
	if t, ok := pt.turns[n]; ok {
		close(t.ch)
		delete(pt.turns, n)
	}
}

// markLagging records that a replica, named in missed if known, missed a
// batch at epoch e; stalled, that too few replicas confirmed it for a
// majority. A batch of an older claim than the one served says nothing
// about the current replicas: it is ignored. A mark before serving began
// is kept for start: a replica that missed the start marker lags from
// the first.
func (pt *partition) markLagging(e epoch.Epoch, stalled bool, missed ...string) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if !pt.serving {
		pt.lagsBefore = max(pt.lagsBefore, e)
		return
	}
	if pt.claim.Epoch != e {
		return
	}
	pt.lagging = true
	pt.stalled = pt.stalled || stalled
	for _, r := range missed {
		if !slices.Contains(pt.laggards, r) {
			pt.laggards = append(pt.laggards, r)
		}
	}
}

// lagged returns the replicas known to have missed a batch of the served
// claim.
func (pt *partition) lagged() []string {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return slices.Clone(pt.laggards)
}

// dueResync reports whether a new claim should resync the served claim's
// replicas: at once if they are too far behind for a majority (no write
// can succeed until then), else once the claim has been served for
// resyncInterval (a replica that is down but still a member lags at every
// write, and each resync drains the partition), doubled for each resync in
// a row, up to maxResyncDoublings times: a replica that falls behind again
// after every resync (a slow disk) does not have the partition drained,
// for the whole copy, every few seconds. A claim served for
// resyncInterval with no replica lagging ends the streak.
func (pt *partition) dueResync(now time.Time) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if !pt.serving {
		return false
	}
	served := now.Sub(pt.servedSince)
	if !pt.lagging {
		if served >= resyncInterval {
			pt.resyncs = 0
		}
		return false
	}
	return pt.stalled || served >= resyncInterval<<min(pt.resyncs, maxResyncDoublings)
}

// queuedCommitted records that commit p succeeded: if it is the newest
// queued here, every batch queued here is durable, and lastQueued no longer
// keeps p (and its batch) alive.
func (pt *partition) queuedCommitted(p queuedCommit) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.lastQueued == p {
		pt.lastQueued = nil
	}
}

// forgetQueued makes the next replicated batch re-read the store's
// position: it changed other than by a batch queued here.
func (pt *partition) forgetQueued() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.queuedKnown = false
}

// installed records that a copy was installed, or kept, at pos: the next batch
// re-reads the store's position (a batch may already follow the copy),
// and a batch already waiting for its turn after pos (a new owner's first
// batch that arrived before the copy) goes on at once instead of timing
// out.
func (pt *partition) installed(pos store.Position) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.queuedKnown = false
	pt.wakeTurn(pos.LSN)
}

// Lease is the right to run one call on a served partition at Epoch.
// Release it when the call's commit has finished.
type Lease struct {
	// P is the partition.
	P int
	// Epoch is the served claim's epoch: every write of the call carries it.
	Epoch epoch.Epoch
	part  *partition
	ctx   context.Context
}

// Context ends, with cause ErrRevoked, once the partition moved on while
// the lease was held: this node promised a new claim after its drain
// timed out, or learned a newer claim.
// The call's commit is then fenced: its handler should stop.
func (l Lease) Context() context.Context { return l.ctx }

// Release ends the lease; a drain waits for every lease to be released.
func (l Lease) Release() {
	pt := l.part
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.inflight--
	if pt.inflight == 0 && pt.idle != nil {
		close(pt.idle)
		pt.idle = nil
	}
}

// lease admits a call if the partition is served.
func (pt *partition) lease() (Lease, bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if !pt.serving {
		return Lease{}, false
	}
	pt.inflight++
	return Lease{P: pt.p, Epoch: pt.claim.Epoch, part: pt, ctx: pt.servingCtx}, true
}

// stop ends serving and returns a channel closed once no lease is held.
// Its leases are revoked later, by revokeStoppedBelow.
func (pt *partition) stop() (idle <-chan struct{}) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.stopLocked()
}

// stoppedPeriod is a serving period that stop ended and whose leases are
// not revoked yet.
type stoppedPeriod struct {
	epoch  epoch.Epoch // its claim's
	revoke context.CancelCauseFunc
}

// stopBefore ends serving if the served claim is older than epoch e, and
// revokes the leases of the periods stopped below e: a claim at e is
// chosen, whose owner may serve already. The check and the stop are one
// step, so a claim whose serving starts meanwhile is not stopped.
func (pt *partition) stopBefore(e epoch.Epoch) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.serving && pt.claim.Epoch < e {
		pt.stopLocked()
	}
	pt.revokeStoppedBelowLocked(e)
}

// revokeStoppedBelow revokes the leases of the serving periods that stop
// ended whose claims are older than epoch e (see Lease.Context): this
// node promised e.
func (pt *partition) revokeStoppedBelow(e epoch.Epoch) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.revokeStoppedBelowLocked(e)
}

func (pt *partition) revokeStoppedBelowLocked(e epoch.Epoch) {
	kept := pt.unrevoked[:0]
	for _, s := range pt.unrevoked {
		if s.epoch < e {
			s.revoke(ErrRevoked)
		} else {
			kept = append(kept, s)
		}
	}
	pt.unrevoked = kept
}

// stopLocked is stop with mu held.
func (pt *partition) stopLocked() (idle <-chan struct{}) {
	pt.serving = false
	if pt.revoke != nil {
		pt.unrevoked = append(pt.unrevoked, stoppedPeriod{pt.claim.Epoch, pt.revoke})
		pt.revoke = nil
	}
	if pt.inflight == 0 {
		done := make(chan struct{})
		close(done)
		return done
	}
	if pt.idle == nil {
		pt.idle = make(chan struct{})
	}
	return pt.idle
}

// setYield records how the running attempt gives its slot back early.
func (pt *partition) setYield(f func()) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.yield = f
}

// yieldSlot gives the running attempt's slot back, if it holds one, and
// reports whether it did.
func (pt *partition) yieldSlot() bool {
	pt.mu.Lock()
	f := pt.yield
	pt.yield = nil
	pt.mu.Unlock()
	if f != nil {
		f()
	}
	return f != nil
}

// servedClaim returns the claim served, if any.
func (pt *partition) servedClaim() (store.Claim, bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.claim, pt.serving
}

// start begins serving c, whose start marker left the data at pos, unless a Prepare is being handled or fenced
// reports that a higher epoch was promised. The check and the switch are
// one step under mu, and HandlePrepare holds preparing from before its
// drain until its promise is durable: so either serving starts before the
// drain (which then stops it) or the check sees the Prepare or its promise.
func (pt *partition) start(c store.Claim, pos store.Position, fenced func() bool) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.preparing > 0 || fenced() {
		return false
	}
	if pt.lagging && c.Base == pt.claim.Epoch && c.Owner == pt.claim.Owner && sameMembers(c.Replicas, pt.claim.Replicas) {
		pt.resyncs++ // c resyncs the claim served before, same replicas
	} else {
		pt.resyncs = 0
	}
	pt.serving, pt.claim, pt.pos, pt.lagging, pt.stalled, pt.servedSince = true, c, pos, pt.lagsBefore == c.Epoch, false, time.Now()
	pt.laggards = nil
	pt.revokeStoppedBelowLocked(c.Epoch)
	pt.servingCtx, pt.revoke = context.WithCancelCause(context.Background())
	return true
}

// beginPrepare marks a Prepare in progress; endPrepare ends it.
func (pt *partition) beginPrepare() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.preparing++
}

func (pt *partition) endPrepare() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.preparing--
}

// reportLost reports whether the loss of the partition's only copy is yet
// to be logged, and marks it logged.
func (pt *partition) reportLost() bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	first := !pt.lostReported
	pt.lostReported = true
	return first
}

// tryBusy marks an attempt as running unless one runs or its backoff has
// not elapsed.
func (pt *partition) tryBusy(now time.Time) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.busy || now.Before(pt.retryAt) {
		return false
	}
	pt.busy = true
	return true
}

// running reports whether an attempt is running (see tryBusy).
func (pt *partition) running() bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.busy
}

// done ends an attempt; a failed one delays the next by an exponential
// backoff starting at base and capped at 2s.
func (pt *partition) done(ok bool, now time.Time, base time.Duration, seen epoch.Epoch) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.busy = false
	pt.seen = max(pt.seen, seen)
	if ok {
		pt.failures = 0
		pt.retryAt = time.Time{}
		return
	}
	pt.failures++
	wait := min(base<<min(pt.failures-1, 10), 2*time.Second)
	pt.retryAt = now.Add(wait)
}

// seenEpoch returns the highest epoch that refused this node.
func (pt *partition) seenEpoch() epoch.Epoch {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.seen
}
