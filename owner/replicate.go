package owner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// replicaTurnWait bounds how long a replica holds a batch whose predecessor
// has not arrived yet (batches of one owner may arrive out of order over
// concurrent requests) before refusing it.
const replicaTurnWait = time.Second

// ErrNoQuorum is returned (wrapped) by a Commit that fewer than a majority
// of the claim's replicas made durable; the write may or may not survive.
var ErrNoQuorum = errors.New("owner: a majority of the replicas did not confirm the write")

// Replicate asks a replica of the served claims of an owner to apply
// Batches, in order. Each names the position it follows (Batch.Prev):
// replicas apply an owner's batches in the owner's order and refuse the
// rest.
type Replicate struct {
	// Batches are the owner's batches, each at its claim's epoch; a
	// partition's batches in the order the owner numbered them.
	Batches []store.Batch
}

// Commit is the handle of a batch committed under a Lease.
type Commit struct {
	// local decides alone when the claim has a single replica (done nil).
	local *store.Pending
	done  chan struct{}
	// err is written once, before done is closed.
	err error
}

// Done is closed once the outcome is known.
func (c *Commit) Done() <-chan struct{} {
	if c.done == nil {
		return c.local.Done()
	}
	return c.done
}

// Err returns the outcome, valid after Done: nil means a majority of the
// claim's replicas hold the batch durably; an error matching epoch.ErrStale
// means a replica promised a newer epoch or knows a newer claim (this owner
// was replaced).
func (c *Commit) Err() error {
	if c.done == nil {
		return c.local.Err()
	}
	return c.err
}

// Submit commits b under lease l: b.Epoch is set to the lease's epoch, the
// batch is committed here and, if the served claim has other replicas,
// sent to them, each applying it only after every earlier batch of the
// claim (b.Prev). It returns at once; the Commit reports when a majority
// holds the batch. Calls commit in the order they call Submit. A batch the
// store would refuse as invalid (store.Batch.Validate) fails at once and
// takes no place in the claim's order; so does any batch after Close.
//
// b and the buffers it holds are read until every replica was sent it,
// which may be after the Commit is done (a majority needs not wait for
// the slowest backup, and a lost message is sent again): the caller must
// never modify them.
func (o *Owner) Submit(l Lease, b *store.Batch) *Commit {
	b.Epoch = l.Epoch
	if err := b.Validate(); err != nil {
		return decided(err)
	}
	o.closeMu.RLock()
	defer o.closeMu.RUnlock()
	if o.closed {
		return decided(ErrClosed)
	}
	pt := l.part
	pt.mu.Lock()
	others := otherReplicas(pt.claim, o.cfg.Self)
	if pt.claim.Epoch != l.Epoch || len(others) == 0 {
		// A single replica, or a lease of an older claim than the one now
		// served (its batch is refused by the fence, not replicated).
		pending := o.store.Submit(b)
		pt.mu.Unlock()
		return &Commit{local: pending}
	}
	prev := pt.pos
	b.Prev = &prev
	pt.pos = store.Position{Epoch: l.Epoch, LSN: prev.LSN + 1}
	// Queued under the lock, so that each replica's stream carries the
	// partition's batches in the order they are numbered.
	c := o.replicate(b, o.store.Submit(b), others)
	pt.mu.Unlock()
	return c
}

// decided returns a Commit whose outcome is err already.
func decided(err error) *Commit {
	c := &Commit{done: make(chan struct{}), err: err}
	close(c.done)
	return c
}

// otherReplicas returns c's replicas other than self.
func otherReplicas(c store.Claim, self string) []string {
	var others []string
	for _, r := range c.Replicas {
		if r != self {
			others = append(others, r)
		}
	}
	return others
}

// replicate queues b on the streams to others and returns a Commit that
// completes once a majority of the replicas (others and this node, whose
// commit is local) hold b, or once that can no longer happen. The local
// commit must be among them: the owner reads its own store, so a batch it
// failed to commit is never acknowledged, whatever the backups did (the
// next call would read the state without it). A replica that did not
// confirm b marks the partition lagging: here if its stream refused b at
// once or its answer came before the outcome was known, else in its
// stream (send), so that no goroutine waits for a slow replica's answer
// once the outcome is known.
func (o *Owner) replicate(b *store.Batch, local *store.Pending, others []string) *Commit {
	c := &Commit{done: make(chan struct{})}
	n := len(others) + 1
	results := make(chan error, n) // room for every answer: late ones are dropped
	var refused []error            // by the streams, at once
	var refusers []string
	for _, to := range others {
		if err := o.push(o.stream(to), b, results); err != nil {
			refused, refusers = append(refused, err), append(refusers, to)
		}
	}
	o.wg.Go(func() {
		defer close(c.done)
		pt := o.parts[b.Partition]
		<-local.Done()
		if err := local.Err(); err != nil {
			c.err = quorumError(b, []error{err})
		} else {
			need, acks := n/2+1, 1 // the local commit
			errs := refused
			for acks < need && n-len(errs) >= need {
				if err := <-results; err != nil {
					errs = append(errs, err)
				} else {
					acks++
				}
			}
			if len(errs) > 0 {
				pt.markLagging(b.Epoch, false, refusers...)
			}
			if acks >= need {
				return
			}
			c.err = quorumError(b, errs)
		}
		pt.markLagging(b.Epoch, true)
		o.kick() // resync at once: no write can succeed until then
	})
	return c
}

// quorumError is a failed Commit's error: stale if any replica refused the
// epoch (this owner was replaced), else ErrNoQuorum with the causes.
func quorumError(b *store.Batch, errs []error) error {
	for _, err := range errs {
		if errors.Is(err, epoch.ErrStale) {
			return err
		}
	}
	return fmt.Errorf("%w: partition %d at epoch %d: %w", ErrNoQuorum, b.Partition, b.Epoch, errors.Join(errs...))
}

// commitMarker commits claim c's start marker (an empty batch at c's epoch)
// on a majority of c's replicas and returns the position after it.
func (o *Owner) commitMarker(p int, c store.Claim) (store.Position, error) {
	m, err := o.store.Meta(p)
	if err != nil {
		return store.Position{}, err
	}
	b := &store.Batch{Partition: p, Epoch: c.Epoch}
	others := otherReplicas(c, o.cfg.Self)
	if len(others) == 0 {
		return store.Position{}, o.store.Commit(o.ctx, b)
	}
	b.Prev = &m.Position
	commit := o.replicate(b, o.store.Submit(b), others)
	select {
	case <-commit.Done():
	case <-o.ctx.Done():
		return store.Position{}, ErrClosed
	}
	return store.Position{Epoch: c.Epoch, LSN: m.Position.LSN + 1}, commit.Err()
}

// HandleReplicate applies an owner's batches on this replica, in order,
// each once every earlier batch of its partition's owner has been queued
// here, and returns when they are durable, with one outcome per batch. It
// refuses a batch below its fence (store.Meta.Fence) and one that does not
// follow its position (store.ErrPosition): a replica that missed a batch
// refuses the rest until a new claim syncs it. A batch it queued already
// (a message sent again) is confirmed, not applied twice (applyInTurn).
// The batches are committed together: one durable commit for the whole
// message.
func (o *Owner) HandleReplicate(ctx context.Context, req Replicate) []error {
	return o.handleReplicate(ctx, req, replicaTurnWait)
}

// handleReplicate is HandleReplicate with a batch that arrived before its
// predecessor waiting for it at most turnWait for the whole message.
func (o *Owner) handleReplicate(ctx context.Context, req Replicate, turnWait time.Duration) []error {
	errs := make([]error, len(req.Batches))
	pending := make([]queuedCommit, len(req.Batches))
	turnCtx, cancel := context.WithTimeout(ctx, turnWait)
	defer cancel()
	// A batch of a claim whose earlier batch in this message was refused
	// here comes after it in the owner's numbering, so it cannot be
	// queued until that one is: it is refused at once, not after waiting
	// out turnCtx for a predecessor that will not come.
	type refusal struct {
		epoch epoch.Epoch
		err   error
	}
	var refused map[int]refusal // by partition
	for i := range req.Batches {
		b := &req.Batches[i]
		if r, ok := refused[b.Partition]; ok && r.epoch == b.Epoch {
			errs[i] = fmt.Errorf("owner: partition %d: the batch follows one refused at epoch %d: %w", b.Partition, b.Epoch, r.err)
			continue
		}
		if pending[i], errs[i] = o.submitReplicated(turnCtx, b); errs[i] != nil {
			if refused == nil {
				refused = map[int]refusal{}
			}
			refused[b.Partition] = refusal{b.Epoch, errs[i]}
		}
	}
	for i, p := range pending {
		if p == nil {
			continue
		}
		pt := o.parts[req.Batches[i].Partition]
		<-p.Done()
		if err := p.Err(); err != nil {
			pt.forgetQueued() // the store did not move: re-read it
			errs[i] = err
		} else {
			pt.queuedCommitted(p)
		}
	}
	return errs
}

// submitReplicated submits one replicated batch in its turn (applyInTurn).
func (o *Owner) submitReplicated(ctx context.Context, b *store.Batch) (queuedCommit, error) {
	if err := o.checkPartition(b.Partition); err != nil {
		return nil, err
	}
	if b.Prev == nil {
		return nil, fmt.Errorf("owner: replicated batch of partition %d names no previous position", b.Partition)
	}
	if *b.Prev == (store.Position{}) {
		// Only a blank replica is at the zero position: one that lost its
		// data directory, or whose first copy never came. Applying this
		// batch (a claim's start marker over no data) would make it look
		// as if it remembered, and it would take part again, with a blank
		// memory, in choices it voted in before; only a Sync readmits it
		// (store.Readmit).
		m, err := o.store.Meta(b.Partition)
		if err != nil {
			return nil, err
		}
		if blank(m) {
			return nil, fmt.Errorf("owner: partition %d: %s holds no promise and no data of it (was its data directory lost?); it takes no replicated batch until a new claim syncs it", b.Partition, o.cfg.Self)
		}
	}
	pending, err := o.parts[b.Partition].applyInTurn(ctx, b, func() (store.Meta, error) {
		return o.store.Meta(b.Partition)
	}, func(b *store.Batch) queuedCommit { return o.store.Submit(b) })
	if errors.Is(err, store.ErrPosition) {
		// Out of order because a newer claim moved this replica on? Then
		// the owner must learn it was replaced, not that it lost a batch.
		if m, merr := o.store.Meta(b.Partition); merr == nil {
			if stale := epoch.CheckWrite(m.Fence(), b.Epoch); stale != nil {
				return nil, stale
			}
		}
	}
	return pending, err
}

// queuedCommit is what a replica waits on for a batch it queued: a
// *store.Pending (tests play their own).
type queuedCommit interface {
	// Done is closed once the commit is decided.
	Done() <-chan struct{}
	// Err is the commit's outcome once Done is closed: nil if durable.
	Err() error
}

// applyInTurn submits b once the last batch queued here is b.Prev, waiting
// for its predecessors while ctx lasts. meta reads the store's meta, for
// when the partition's queue position is unknown or in doubt; it is read
// only once no batch queued here is being committed (the store's position
// is behind such a batch, and the batches after it would wait for turns
// that have passed).
//
// A batch queued here already (its owner sent the message again after a
// failure that lost the answer) is not submitted twice (queuedAlready).
func (pt *partition) applyInTurn(ctx context.Context, b *store.Batch, meta func() (store.Meta, error), submit func(*store.Batch) queuedCommit) (queuedCommit, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	reread, fresh := false, false
	for {
		if !pt.queuedKnown {
			if p := pt.lastQueued; pending(p) {
				pt.mu.Unlock()
				select {
				case <-p.Done():
				case <-ctx.Done():
				}
				pt.mu.Lock()
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("%w: partition %d: the commit of the batch at %v did not end: %w", store.ErrPosition, b.Partition, pt.queued, err)
				}
				continue
			}
			m, err := meta()
			if err != nil {
				return nil, err
			}
			pt.queued, pt.queuedKnown, pt.lastQueued = m.Position, true, nil
			fresh = true
		}
		switch {
		case pt.queued == *b.Prev:
			pt.queued = store.Position{Epoch: b.Epoch, LSN: b.Prev.LSN + 1}
			pending := submit(b)
			pt.lastQueued = pending
			pt.wakeTurn(pt.queued.LSN) // only the batches that follow
			return pending, nil
		case pt.queued.Epoch == b.Epoch && b.Prev.Epoch <= b.Epoch && b.Prev.LSN < pt.queued.LSN:
			pending, held, err := pt.queuedAlready(b, meta)
			switch {
			case held || err != nil:
				return pending, err
			case reread:
				return nil, notFollowing(b, pt.queued)
			}
			pt.queuedKnown, reread = false, true // the store moved (a Drop): re-read it
		case b.Prev.LSN > pt.queued.LSN && !fresh && !pending(pt.lastQueued):
			// The store may have moved past queued other than by a batch
			// queued here: by this node's own writes while it owned the
			// partition, which no Sync here followed. Read it before
			// waiting for a turn that may have passed (not while a batch
			// queued here commits: queued is then ahead of the store).
			pt.queuedKnown = false
		case b.Prev.LSN > pt.queued.LSN: // its predecessors are on their way
			t, ok := pt.turns[b.Prev.LSN]
			if !ok {
				t = &turn{ch: make(chan struct{})}
				if pt.turns == nil {
					pt.turns = map[uint64]*turn{}
				}
				pt.turns[b.Prev.LSN] = t
			}
			t.waiters++
			pt.mu.Unlock()
			select {
			case <-t.ch:
				pt.mu.Lock()
			case <-ctx.Done():
				pt.mu.Lock()
				// A batch sent again (the owner retried its message) may
				// wait on the same turn: only the last waiter forgets it.
				if t.waiters--; t.waiters == 0 && pt.turns[b.Prev.LSN] == t {
					delete(pt.turns, b.Prev.LSN)
				}
				return nil, fmt.Errorf("%w: partition %d: the batches between %v and %v did not arrive: %w", store.ErrPosition, b.Partition, pt.queued, *b.Prev, ctx.Err())
			}
		case !reread: // an install, a drop or a refused batch may have moved the store
			pt.queuedKnown, reread = false, true
		default:
			return nil, notFollowing(b, pt.queued)
		}
	}
}

// notFollowing is the refusal of batch b, which does not follow queued.
func notFollowing(b *store.Batch, queued store.Position) error {
	return fmt.Errorf("%w: partition %d is at %v, the batch follows %v", store.ErrPosition, b.Partition, queued, *b.Prev)
}

// queuedAlready reports whether b, found at or before the position queued
// here in its epoch, is held here: durably (no Pending to wait for), or
// queued with lastQueued, whose commit implies b's (commits apply in
// order). Only one owner writes at an epoch, so the batch at b's epoch and
// position is b. It refuses b as stale if this replica's fence passed b's
// epoch since (store.Meta.Fence). b is not held if the store moved under
// the queued position (a Drop before forgetQueued).
func (pt *partition) queuedAlready(b *store.Batch, meta func() (store.Meta, error)) (p queuedCommit, held bool, err error) {
	m, err := meta()
	if err != nil {
		return nil, false, err
	}
	if stale := epoch.CheckWrite(m.Fence(), b.Epoch); stale != nil {
		return nil, false, stale
	}
	if m.Position.Epoch == b.Epoch && m.Position.LSN > b.Prev.LSN {
		return nil, true, nil
	}
	if pending(pt.lastQueued) {
		return pt.lastQueued, true, nil
	}
	return nil, false, nil
}

// pending reports whether p is a commit not decided yet.
func pending(p queuedCommit) bool {
	if p == nil {
		return false
	}
	select {
	case <-p.Done():
		return false
	default:
		return true
	}
}
