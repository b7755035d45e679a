package owner

import (
	"context"
	"fmt"
	"sync"
	"time"

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

// stream carries an owner's batches to one replica. While one Replicate
// message is in flight, the batches submitted meanwhile queue, and the next
// message carries them together: one round trip and one durable commit on
// the replica for many calls. A partition's batches queue in the order
// Submit numbered them, so the replica finds each after its predecessor.
type stream struct {
	to string
	mu sync.Mutex
	// queue holds the batches not yet sent, each with where its outcome goes.
	queue []queued
	// sending reports that a sender goroutine runs; it exits once it finds
	// the queue empty.
	sending bool
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
// It starts the stream's sender if none runs.
func (o *Owner) push(s *stream, b *store.Batch, result chan<- error) {
	s.mu.Lock()
	s.queue = append(s.queue, queued{b: b, result: result})
	start := !s.sending
	s.sending = true
	s.mu.Unlock()
	if start {
		o.wg.Go(func() { o.send(s) })
	}
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
		for i, q := range next {
			if err != nil {
				q.result <- err
			} else {
				q.result <- errs[i]
			}
		}
	}
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

// take removes the batches of the next message from the queue, or reports
// (nil) an empty queue after marking the sender gone.
func (s *stream) take() []queued {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		s.sending = false
		return nil
	}
	n, size := 0, 0
	for ; n < len(s.queue); n++ {
		size += batchBytes(s.queue[n].b)
		if n > 0 && size > replicateMessageBytes {
			break
		}
	}
	next := s.queue[:n:n]
	s.queue = append([]queued(nil), s.queue[n:]...)
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
