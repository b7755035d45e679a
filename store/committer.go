package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// maxGroup caps the number of operations committed in one transaction, so
// that a long queue cannot make one transaction (and its waiters' latency)
// unbounded.
const maxGroup = 1024

// applyFunc applies one operation inside the group's transaction. It returns
// the operation's own outcome (nil, a stale-epoch refusal, ...), having
// written nothing when that outcome is an error; or a non-nil abort, which
// fails the whole transaction (a bbolt error: the transaction may be half
// written and must not commit).
type applyFunc func(tx *bolt.Tx) (outcome, abort error)

// noPartition is op.partition for an operation that changes no meta.
const noPartition = -1

// op is one queued mutation and the handle its caller waits on.
type op struct {
	// apply applies the operation in a bbolt transaction (the slow path);
	// nil for a flush request.
	apply applyFunc
	// batch is set for a data batch, which the committer may log in the WAL
	// (the fast path) instead of calling apply.
	batch *Batch
	// partition is the partition whose meta apply may change, noPartition
	// if none: the committer re-reads it after the transaction.
	partition int
	// flush asks only that the memtable be flushed into the data file.
	flush bool
	Pending
}

// enqueue appends o to the queue and wakes the committer. It never blocks
// on the committer. After Close the operation fails at once with
// ErrClosed.
func (s *Store) enqueue(o *op) *Pending {
	o.Pending = Pending{done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		o.finish(ErrClosed)
		return &o.Pending
	}
	s.queue = append(s.queue, o)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is already pending; it covers this operation
	}
	return &o.Pending
}

// run is the committer goroutine: it blocks for the first queued operation,
// then commits everything queued, group after group, until the queue is
// empty, and blocks again. While the memtable holds batches it also wakes
// s.flushInterval after the first of them to start a background flush, and
// it collects the background flush's outcome. It returns when Close closes
// s.stop, after waiting for the background flush and flushing the
// memtable.
func (s *Store) run() {
	defer close(s.exited)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	arm := func() {
		if !armed && !s.mem.empty() && s.flushInterval > 0 {
			timer.Reset(s.flushInterval)
			armed = true
		}
	}
	for {
		arm()
		select {
		case <-s.wake:
		case <-timer.C:
			armed = false
			s.startFlush()
			continue
		case err := <-s.flushDone: // a nil channel (no flush running) never fires
			s.finishFlush(err)
			if s.needsFlush() {
				s.startFlush()
			}
			continue
		case <-s.stop:
			timer.Stop()
			s.failQueued()
			s.waitFlush()
			if s.failure == nil && !s.noFlush {
				s.closeErr = s.flush()
				for _, w := range s.wals {
					if s.closeErr == nil {
						s.closeErr = w.clear()
					}
				}
			}
			return
		}
		for {
			group := s.takeGroup()
			if len(group) == 0 {
				break
			}
			s.commit(group)
			// The queue may never empty under load: the flush that ended and
			// the timer are looked at here too, or the WAL would grow
			// without bound while flushes waited to be collected.
			s.collectFlush()
			select {
			case <-timer.C:
				armed = false
				s.startFlush()
			default:
				if s.needsFlush() {
					s.startFlush()
				}
			}
			arm()
		}
		if armed && s.mem.empty() {
			timer.Stop()
			armed = false
		}
	}
}

// takeGroup removes up to maxGroup operations from the head of the queue.
// It returns none once the store is closing, so that Close does not wait
// for a long queue.
func (s *Store) takeGroup() []*op {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.queue) == 0 {
		return nil
	}
	if len(s.queue) <= maxGroup {
		group := s.queue
		s.queue = nil
		return group
	}
	group := s.queue[:maxGroup:maxGroup]
	s.queue = s.queue[maxGroup:]
	return group
}

// failQueued fails every queued operation with ErrClosed. Close has set
// s.closed, so nothing is queued after it.
func (s *Store) failQueued() {
	s.mu.Lock()
	queue := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, o := range queue {
		o.finish(ErrClosed)
	}
}

// commit commits group and releases every waiter with its outcome, only
// once the outcome is durable: even a refusal is reported after the
// commit, because it was decided on state that includes the group's
// earlier, not yet durable, operations. A group of data batches (and flush
// requests) takes the fast path, one WAL record (commitFast), if it fits
// one (loggable); any other group, or any group when the WAL is off, one
// bbolt transaction (commitSlow).
func (s *Store) commit(group []*op) {
	s.txs.Add(1)
	if s.failure != nil {
		for _, o := range group {
			o.finish(s.failure)
		}
		return
	}
	if s.fastPath && loggable(group, s.maxRecord) {
		s.commitFast(group)
		return
	}
	s.commitSlow(group)
}

// loggable reports whether group can take the fast path: it holds only
// data batches and flush requests, and its batches surely fit in a WAL
// record of limit bytes. Replay takes a frame longer than walMaxRecord for
// a torn one and stops there, so a larger group (1,024 calls of a megabyte
// each would be one) is committed in a bbolt transaction instead.
func loggable(group []*op, limit int) bool {
	const overhead = 64 // a batch's or a write's framing, generously
	n := 0
	for _, o := range group {
		b := o.batch
		if b == nil {
			if !o.flush {
				return false
			}
			continue
		}
		n += overhead + len(b.RequestID) + len(b.Response)
		for _, w := range b.Writes {
			n += overhead + len(w.Key) + len(w.Value)
		}
		if n > limit {
			return false
		}
	}
	return true
}

// commitSlow applies group in one read-write transaction, after flushing
// the memtable in the same transaction (so every batch acknowledged before
// the group applies before it, and one sync covers both), then updates the
// in-memory metas of the partitions the group touched from the
// transaction's result.
func (s *Store) commitSlow(group []*op) {
	s.waitFlush()
	if s.failure != nil {
		for _, o := range group {
			o.finish(s.failure)
		}
		return
	}
	outcomes := make([]error, len(group))
	flushed := false
	s.changes = s.changes[:0]
	changed := make(map[int]*metaEntry)
	err := s.updatePublished(func(tx *bolt.Tx) error {
		if !s.mem.empty() {
			if err := s.flushInto(tx); err != nil {
				return err
			}
			flushed = true
		}
		for i, o := range group {
			if o.apply == nil {
				continue
			}
			outcome, abort := o.apply(tx)
			if abort != nil {
				return abort
			}
			outcomes[i] = outcome
		}
		for _, o := range group {
			if o.partition != noPartition {
				if e, present := readMeta(tx, o.partition); present {
					changed[o.partition] = &e
				} else {
					changed[o.partition] = nil
				}
			}
		}
		return nil
	}, func() {
		s.noteChanges()
		s.fileChanged(nil)
		for p, e := range changed {
			if e == nil {
				delete(s.metas, p)
			} else {
				s.metas[p] = *e
			}
		}
		if flushed {
			s.mem = newMemtable()
		}
	})
	switch {
	case err != nil:
		s.poison(err, "transaction")
		for i := range outcomes {
			outcomes[i] = s.failure
		}
	case flushed:
		s.wals[s.active].reset()
	}
	for i, o := range group {
		o.finish(outcomes[i])
	}
}

// updatePublished runs fn in a read-write transaction and commits it
// holding memMu, then runs publish (the in-memory state that goes with the
// transaction: metas, the emptied memtable) under the same lock. A reader
// takes memMu before it reads the file, so a reader that saw the
// transaction's writes in the file does not then find in the memtable
// what the transaction replaced (an Install or a Drop is never seen half
// done), and one that saw the new metas finds the new data. Readers wait
// for the commit's sync; slow operations are rare.
func (s *Store) updatePublished(fn func(*bolt.Tx) error, publish func()) error {
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	s.memMu.Lock()
	defer s.memMu.Unlock()
	if err := tx.Commit(); err != nil {
		return err
	}
	publish()
	return nil
}

// poison records the first failure: bbolt rolled the transaction back (or
// the WAL write failed), but the in-memory state after a failed commit (a
// half-written file, a failed fsync) cannot be trusted: every later write
// is refused rather than built on it.
func (s *Store) poison(err error, what string) {
	if s.failure == nil {
		s.failure = fmt.Errorf("%w: %w", ErrFailed, err)
		s.poisoned.Store(&s.failure)
		close(s.failed)
	}
	s.log.Error("store: "+what+" failed, refusing further writes", "path", s.path, "err", err)
}
