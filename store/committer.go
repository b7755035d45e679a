package store

import (
	"fmt"

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

// op is one queued mutation and the handle its caller waits on.
type op struct {
	apply applyFunc
	Pending
}

// enqueue appends an operation to the queue and wakes the committer. It
// never blocks on the committer. After Close the operation fails at once
// with ErrClosed.
func (s *Store) enqueue(apply applyFunc) *Pending {
	o := &op{apply: apply, Pending: Pending{done: make(chan struct{})}}
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
// empty, and blocks again. It returns when Close closes s.stop.
func (s *Store) run() {
	defer close(s.exited)
	for {
		select {
		case <-s.wake:
		case <-s.stop:
			s.failQueued()
			return
		}
		for {
			group := s.takeGroup()
			if len(group) == 0 {
				break
			}
			s.commit(group)
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

// commit applies group in one read-write transaction, in order, and then
// releases every waiter with its outcome. Waiters are released only after
// the transaction is durable: even a refusal is reported after the commit,
// because it was decided on state that includes the group's earlier,
// not yet durable, operations.
func (s *Store) commit(group []*op) {
	if s.failure != nil {
		for _, o := range group {
			o.finish(s.failure)
		}
		return
	}
	outcomes := make([]error, len(group))
	err := s.db.Update(func(tx *bolt.Tx) error {
		for i, o := range group {
			outcome, abort := o.apply(tx)
			if abort != nil {
				return abort
			}
			outcomes[i] = outcome
		}
		return nil
	})
	s.txs.Add(1)
	if err != nil {
		// bbolt rolled the transaction back, but its in-memory state after a
		// failed commit (a half-written file, a failed fsync) cannot be
		// trusted: refuse every later write rather than build on it.
		s.failure = fmt.Errorf("%w: %w", ErrFailed, err)
		s.log.Error("store: transaction failed, refusing further writes",
			"path", s.path, "ops", len(group), "err", err)
		for i := range outcomes {
			outcomes[i] = s.failure
		}
	}
	for i, o := range group {
		o.finish(outcomes[i])
	}
}
