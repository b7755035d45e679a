package owner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// replicateMessageBytes bounds the batches one Replicate message carries
// (see batchBytes), so that it fits a transport frame like a fetched page
// does; a single larger batch still goes, alone.
const replicateMessageBytes = FetchPageBytes

// replicateAttempts is how many times a Replicate message is sent when
// sending fails (a dropped connection, an answer lost): once is enough to
// leave the replica lagging until a resync, since every later batch
// follows the lost ones. A replica confirms a batch it holds already, so a
// message sent again is harmless. All attempts share the message's
// RequestTimeout: a replica that is down or too slow holds the stream's
// later batches no longer than one attempt would.
const replicateAttempts = 3

// replicateRetryDelay is the wait before a message's second attempt,
// doubled before each later one.
const replicateRetryDelay = 20 * time.Millisecond

// streamQueueBytes bounds the batches queued to one replica (see
// batchBytes), not counting the message in flight: 64 messages' worth,
// over 6 s of the fastest replicated writes measured (about 10 MB/s, on a
// 2-core machine), so longer than a RequestTimeout's worth of a replica
// that is slow but answering. A replica that falls further behind misses
// the batches that do not fit, and is resynced like any replica that
// missed a batch, instead of holding the batches in the owner's memory for
// as long as it stays slow.
const streamQueueBytes = 64 * replicateMessageBytes

// stream carries an owner's batches to one replica. While one Replicate
// message is in flight, the batches submitted meanwhile queue, and the next
// message carries them together: one round trip and one durable commit on
// the replica for many calls. A partition's batches queue in the order
// Submit numbered them, so the replica finds each after its predecessor.
//
// Once the replica fails a batch, it refuses every later batch of that
// partition's claim (each follows the one it missed) until a new claim
// resyncs it, and it would hold each of them up to replicaTurnWait before
// refusing it, holding up the stream's other partitions. So the stream
// fails those batches itself, without sending them. (A message that failed
// after the replica applied it, its answers lost, fails them too: its
// partitions are resynced anyway, having been marked lagging.)
type stream struct {
	to string
	mu sync.Mutex
	// queue holds the batches not yet sent, each with where its outcome
	// goes; queuedBytes is their batchBytes.
	queue       []queued
	queuedBytes int
	// missed holds, by partition, the first batch the replica failed in
	// each claim that may still have batches queued: those of a claim
	// older than a batch sent since are dropped (forgetOlder).
	missed map[int][]missedBatch
	// sending reports that a sender goroutine runs; it exits once it finds
	// the queue empty.
	sending bool
}

// missedBatch is a batch a replica failed, by its claim's epoch and its
// LSN; stale if it refused a batch of the claim as stale (it promised a
// newer epoch).
type missedBatch struct {
	epoch epoch.Epoch
	lsn   uint64
	stale bool
}

// queued is a batch waiting in a stream.
type queued struct {
	b      *store.Batch
	result chan<- error
}

// stream returns the stream to replica to, creating it on first use.
func (o *Owner) stream(to string) *stream {
	o.streamsMu.Lock()
	defer o.streamsMu.Unlock()
	s, ok := o.streams[to]
	if !ok {
		s = &stream{to: to}
		o.streams[to] = s
	}
	return s
}

// push queues b for the stream's replica; its outcome (nil once the
// replica holds b durably) goes to result, which must have room for it.
// It starts the stream's sender if none runs. A batch the replica would
// refuse (it missed an earlier one of the claim), or one that would take
// the queue past streamQueueBytes, is not queued: push returns its
// refusal, and nothing goes to result; the caller counts it as the
// replica's answer (and marks the partition lagging).
func (o *Owner) push(s *stream, b *store.Batch, result chan<- error) error {
	s.mu.Lock()
	if err := s.refusal(b); err != nil {
		s.mu.Unlock()
		return err
	}
	size := batchBytes(b)
	if len(s.queue) > 0 && s.queuedBytes+size > streamQueueBytes {
		s.miss(b, nil)
		s.mu.Unlock()
		return fmt.Errorf("owner: replica %s is %d bytes of batches behind, the most its stream holds", s.to, s.queuedBytes)
	}
	s.queue = append(s.queue, queued{b: b, result: result})
	s.queuedBytes += size
	start := !s.sending
	s.sending = true
	s.mu.Unlock()
	if start {
		o.wg.Go(func() { o.send(s) })
	}
	return nil
}

// send sends the stream's queued batches, as many as fit one message at a
// time, until the queue is empty.
func (o *Owner) send(s *stream) {
	for {
		next := s.take()
		if next == nil {
			return
		}
		req := Replicate{Batches: make([]store.Batch, len(next))}
		for i, q := range next {
			req.Batches[i] = *q.b
		}
		errs, err := o.sendReplicate(s.to, req)
		if err == nil && len(errs) != len(next) {
			err = fmt.Errorf("owner: replica %s answered %d outcomes for %d batches", s.to, len(errs), len(next))
		}
		o.markMissed(s.to, s.deliver(next, errs, err))
	}
}

// markMissed marks the partitions of batches replica to did not confirm
// as lagging. It is where a replica's answer that came after its batch's
// outcome was known counts (see replicate).
func (o *Owner) markMissed(to string, batches []*store.Batch) {
	for _, b := range batches {
		o.parts[b.Partition].markLagging(b.Epoch, false, to)
	}
}

// deliver gives each batch of a message its outcome: err if the message
// failed, else its own of errs. It records the failed batches as missed,
// and returns them.
func (s *stream) deliver(next []queued, errs []error, err error) (failed []*store.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range next {
		outcome := err
		if outcome == nil {
			outcome = errs[i]
		}
		if outcome != nil {
			s.miss(q.b, outcome)
			failed = append(failed, q.b)
		}
		q.result <- outcome
	}
	return failed
}

// miss records that the replica failed b, with err: it refuses the
// batches of b's claim that follow b. s.mu must be held.
func (s *stream) miss(b *store.Batch, err error) {
	stale := errors.Is(err, epoch.ErrStale)
	if m := s.missedIn(b); m != nil {
		m.lsn, m.stale = min(m.lsn, b.Prev.LSN+1), m.stale || stale
		return
	}
	if s.missed == nil {
		s.missed = map[int][]missedBatch{}
	}
	s.missed[b.Partition] = append(s.missed[b.Partition], missedBatch{epoch: b.Epoch, lsn: b.Prev.LSN + 1, stale: stale})
}

// missedIn returns the first batch the replica missed in b's claim, or nil.
// s.mu must be held.
func (s *stream) missedIn(b *store.Batch) *missedBatch {
	ms := s.missed[b.Partition]
	for i := range ms {
		if ms[i].epoch == b.Epoch {
			return &ms[i]
		}
	}
	return nil
}

// forgetOlder drops the misses of b's partition in claims older than b's,
// which is being sent: the queue holds no batch of them after b. s.mu must
// be held.
func (s *stream) forgetOlder(b *store.Batch) {
	ms := s.missed[b.Partition]
	kept := ms[:0]
	for _, m := range ms {
		if m.epoch >= b.Epoch {
			kept = append(kept, m)
		}
	}
	if len(kept) == 0 {
		delete(s.missed, b.Partition)
	} else {
		s.missed[b.Partition] = kept
	}
}

// refusal is the error of b if the replica missed a batch of its claim
// that b follows, else nil: one matching epoch.ErrStale if it refused a
// batch of the claim as stale, so that the owner still learns it was
// replaced. s.mu must be held.
func (s *stream) refusal(b *store.Batch) error {
	m := s.missedIn(b)
	switch {
	case m == nil || b.Prev.LSN < m.lsn:
		return nil
	case m.stale:
		return fmt.Errorf("owner: replica %s refused a batch of partition %d at epoch %d: %w", s.to, b.Partition, b.Epoch, epoch.ErrStale)
	}
	return fmt.Errorf("owner: replica %s missed the batch at LSN %d of partition %d at epoch %d, which this one follows, and gets the rest only by a resync", s.to, m.lsn, b.Partition, b.Epoch)
}

// sendReplicate sends req to replica to, again after a failure while
// replicateAttempts and the message's RequestTimeout last.
func (o *Owner) sendReplicate(to string, req Replicate) ([]error, error) {
	ctx, cancel := context.WithTimeout(o.ctx, o.cfg.RequestTimeout)
	defer cancel()
	delay := replicateRetryDelay
	for attempt := 1; ; attempt++ {
		errs, err := o.cfg.Transport.Replicate(ctx, to, req)
		if err == nil || attempt == replicateAttempts {
			return errs, err
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
		delay *= 2
	}
}

// take removes the batches of the next message from the queue, failing
// on the way those the replica would refuse (it missed an earlier batch of
// their claim since they were queued: that miss marked the partition
// lagging); or it reports (nil) an empty queue after marking the sender
// gone.
func (s *stream) take() (next []queued) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, size := 0, 0
	for ; n < len(s.queue); n++ {
		q := s.queue[n]
		bytes := batchBytes(q.b)
		if err := s.refusal(q.b); err != nil {
			s.queuedBytes -= bytes
			q.result <- err
			continue
		}
		if len(next) > 0 && size+bytes > replicateMessageBytes {
			break
		}
		size += bytes
		next = append(next, q)
		s.forgetOlder(q.b)
	}
	s.queuedBytes -= size
	s.queue = append([]queued(nil), s.queue[n:]...)
	if len(next) == 0 {
		s.sending = false
	}
	return next
}

// batchBytes is what b counts toward replicateMessageBytes: its keys,
// values, request ID and response, and a generous framing overhead.
func batchBytes(b *store.Batch) int {
	n := 64 + len(b.RequestID) + len(b.Response)
	for _, w := range b.Writes {
		n += 16 + len(w.Key) + len(w.Value)
	}
	return n
}
