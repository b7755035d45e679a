package owner

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// heldTransport records each Replicate message and holds it until the test
// releases it; every batch of a released message is applied, except those
// at epoch 1, which it refuses as stale.
type heldTransport struct {
	Transport
	sent    chan []store.Batch
	release chan struct{}
}

func (h heldTransport) Replicate(ctx context.Context, _ string, req Replicate) ([]error, error) {
	h.sent <- req.Batches
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	errs := make([]error, len(req.Batches))
	for i, b := range req.Batches {
		if b.Epoch == 1 {
			errs[i] = epoch.ErrStale
		}
	}
	return errs, nil
}

func TestStreamSendsTheBatchesQueuedDuringAMessageTogetherAndInOrder(t *testing.T) {
	s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	require.NoError(t, err)
	h := heldTransport{sent: make(chan []store.Batch, 16), release: make(chan struct{})}
	o, err := New(Config{Self: "a", Partitions: 4, Store: s, Transport: h})
	require.NoError(t, err)
	t.Cleanup(func() { o.Close(); s.Close() })

	batch := func(lsn uint64, e epoch.Epoch, value []byte) *store.Batch {
		return &store.Batch{Partition: 1, Epoch: e, Prev: &store.Position{Epoch: 2, LSN: lsn}, Writes: []store.KV{{Key: []byte("k"), Value: value}}}
	}
	results := make(chan error, 16)
	enqueue(o, o.stream("b"), batch(0, 2, nil), results)
	first := <-h.sent // in flight, held
	require.Len(t, first, 1)

	// Queued while the first message is in flight: the second message
	// carries them all, in the order they were queued.
	for lsn := uint64(1); lsn <= 4; lsn++ {
		enqueue(o, o.stream("b"), batch(lsn, epoch.Epoch(1+lsn%2), nil), results)
	}
	h.release <- struct{}{}
	second := <-h.sent
	require.Len(t, second, 4)
	for i, b := range second {
		require.Equal(t, uint64(i+1), b.Prev.LSN)
	}
	// Batches too large to share a message go one per message.
	big := make([]byte, replicateMessageBytes*2/3)
	enqueue(o, o.stream("b"), batch(5, 2, big), results)
	enqueue(o, o.stream("b"), batch(6, 2, big), results)
	h.release <- struct{}{}
	require.Len(t, <-h.sent, 1)
	h.release <- struct{}{}
	require.Len(t, <-h.sent, 1)
	h.release <- struct{}{}

	// Every batch gets its own outcome: the two at epoch 1 were refused.
	stale := 0
	for range 7 {
		if err := <-results; err != nil {
			require.ErrorIs(t, err, epoch.ErrStale)
			stale++
		}
	}
	require.Equal(t, 2, stale)
}

// lossyTransport delivers Replicate messages to replica r, but its first
// lose attempts fail as a dropped connection would: after r applied the
// message (the answer is lost) or before it arrived. calls counts the
// attempts.
type lossyTransport struct {
	Transport
	r           *Owner
	afterApply  bool
	mu          sync.Mutex
	lose, calls int
}

func (l *lossyTransport) Replicate(ctx context.Context, _ string, req Replicate) ([]error, error) {
	l.mu.Lock()
	l.calls++
	lost := l.lose > 0
	l.lose--
	l.mu.Unlock()
	if !lost {
		return l.r.HandleReplicate(ctx, req), nil
	}
	if l.afterApply {
		l.r.HandleReplicate(ctx, req)
	}
	return nil, errors.New("connection closed")
}

func TestStreamSendsAMessageAgainWhenSendingItFailed(t *testing.T) {
	for _, afterApply := range []bool{false, true} {
		r, rs := syncedReplicaOf(t)
		s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
		require.NoError(t, err)
		tr := &lossyTransport{r: r, afterApply: afterApply, lose: 1}
		o, err := New(Config{Self: "a", Partitions: 4, Store: s, Transport: tr})
		require.NoError(t, err)

		results := make(chan error, 2)
		first := write(1, store.Position{}, "k", "v1")
		enqueue(o, o.stream("r"), &first, results)
		require.NoError(t, <-results, "lost after it was applied: %v", afterApply)
		second := write(1, store.Position{Epoch: 1, LSN: 1}, "k", "v2")
		enqueue(o, o.stream("r"), &second, results)
		require.NoError(t, <-results)

		tr.mu.Lock()
		require.Equal(t, 3, tr.calls, "the first message twice, the second once")
		tr.mu.Unlock()
		m, err := rs.Meta(1)
		require.NoError(t, err)
		require.Equal(t, store.Position{Epoch: 1, LSN: 2}, m.Position, "each batch applied once")
		v, _, _ := rs.Get(1, []byte("k"))
		require.Equal(t, "v2", string(v))
		o.Close()
		s.Close()
	}
}

// blockingTransport answers no Replicate message before its deadline.
type blockingTransport struct {
	Transport
	calls atomic.Int32
}

func (b *blockingTransport) Replicate(ctx context.Context, _ string, _ Replicate) ([]error, error) {
	b.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestStreamGivesUpOnAReplicaThatTimesOutOrKeepsFailing(t *testing.T) {
	s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	slow := &blockingTransport{}
	o, err := New(Config{Self: "a", Partitions: 4, Store: s, Transport: slow, RequestTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	results := make(chan error, 1)
	b := write(1, store.Position{}, "k", "v")
	enqueue(o, o.stream("r"), &b, results)
	require.ErrorIs(t, <-results, context.DeadlineExceeded)
	require.Equal(t, int32(1), slow.calls.Load(), "a message that timed out is not sent again")
	o.Close()

	down := &failingTransport{} // every attempt fails at once
	o, err = New(Config{Self: "a", Partitions: 4, Store: s, Transport: down})
	require.NoError(t, err)
	defer o.Close()
	enqueue(o, o.stream("r"), &b, results)
	require.Error(t, <-results)
	down.mu.Lock()
	defer down.mu.Unlock()
	require.Len(t, down.deadlines, replicateAttempts)
	for _, d := range down.deadlines {
		require.Equal(t, down.deadlines[0], d, "the attempts share the message's RequestTimeout")
	}
}

// failingTransport fails every Replicate at once, recording each
// attempt's deadline.
type failingTransport struct {
	Transport
	mu        sync.Mutex
	deadlines []time.Time
}

func (f *failingTransport) Replicate(ctx context.Context, _ string, _ Replicate) ([]error, error) {
	d, _ := ctx.Deadline()
	f.mu.Lock()
	f.deadlines = append(f.deadlines, d)
	f.mu.Unlock()
	return nil, errors.New("connection reset")
}

// enqueue pushes b to st, putting a refusal at once on result too.
func enqueue(o *Owner, st *stream, b *store.Batch, result chan<- error) {
	if err := o.push(st, b, result); err != nil {
		result <- err
	}
}

// scriptedTransport hands each Replicate message to the test, which
// answers it: with a failure of the whole message, or one outcome per batch.
type scriptedTransport struct {
	Transport
	sent    chan []store.Batch
	answers chan func([]store.Batch) ([]error, error)
}

func newScriptedTransport() scriptedTransport {
	return scriptedTransport{sent: make(chan []store.Batch, 1), answers: make(chan func([]store.Batch) ([]error, error))}
}

func (s scriptedTransport) Replicate(ctx context.Context, _ string, req Replicate) ([]error, error) {
	select {
	case s.sent <- req.Batches:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case answer := <-s.answers:
		return answer(req.Batches)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// scriptedOwner returns an owner of partitions partitions, on a store of
// its own, whose messages go through the scriptedTransport it returns.
func scriptedOwner(t *testing.T, partitions int) (scriptedTransport, *Owner) {
	s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	require.NoError(t, err)
	tr := newScriptedTransport()
	o, err := New(Config{Self: "a", Partitions: partitions, Store: s, Transport: tr})
	require.NoError(t, err)
	t.Cleanup(func() { o.Close(); s.Close() })
	return tr, o
}

// applied answers that the replica applied every batch.
func applied(batches []store.Batch) ([]error, error) { return make([]error, len(batches)), nil }

// fail returns an answer that fails the whole message with err.
func fail(err error) func([]store.Batch) ([]error, error) {
	return func([]store.Batch) ([]error, error) { return nil, err }
}

// lsnsOf lists the partition and the LSN after each batch.
func lsnsOf(batches []store.Batch) [][2]uint64 {
	var out [][2]uint64
	for _, b := range batches {
		out = append(out, [2]uint64{uint64(b.Partition), b.Prev.LSN + 1})
	}
	return out
}

func TestStreamDoesNotSendTheBatchesOfAClaimItsReplicaMissedABatchOf(t *testing.T) {
	tr, o := scriptedOwner(t, 4)
	st := o.stream("r")
	push := func(p int, e epoch.Epoch, lsn uint64) chan error {
		b := &store.Batch{Partition: p, Epoch: e, Prev: &store.Position{Epoch: e, LSN: lsn - 1}, Writes: []store.KV{{Key: []byte("k"), Value: []byte("v")}}}
		result := make(chan error, 1)
		enqueue(o, st, b, result)
		return result
	}

	first := push(1, 3, 1)
	require.Equal(t, [][2]uint64{{1, 1}}, lsnsOf(<-tr.sent))
	// Queued while the first message is in flight.
	second := push(1, 3, 2)
	other := push(2, 3, 1)
	for attempt := 1; attempt <= replicateAttempts; attempt++ {
		if attempt > 1 {
			<-tr.sent // sent again
		}
		tr.answers <- fail(errors.New("connection reset"))
	}
	require.Error(t, <-first)

	// The replica missed partition 1's first batch: the second is failed,
	// not sent; partition 2's goes on.
	require.Equal(t, [][2]uint64{{2, 1}}, lsnsOf(<-tr.sent))
	tr.answers <- applied
	require.NoError(t, <-other)
	require.ErrorContains(t, <-second, "missed the batch at LSN 1 of partition 1 at epoch 3")

	// Nor is a batch of that claim pushed later; one of a newer claim is
	// sent.
	require.ErrorContains(t, <-push(1, 3, 3), "missed the batch at LSN 1")
	newer := push(1, 4, 4)
	require.Equal(t, [][2]uint64{{1, 4}}, lsnsOf(<-tr.sent))
	tr.answers <- applied
	require.NoError(t, <-newer)
	st.mu.Lock()
	kept := st.missed[1]
	st.mu.Unlock()
	require.Empty(t, kept, "the miss at epoch 3 is forgotten once a batch of epoch 4 went")

	// A replica that refused a batch as stale refuses the claim's later
	// batches the same way: the owner still learns it was replaced.
	refused := push(3, 4, 1)
	<-tr.sent
	tr.answers <- func(b []store.Batch) ([]error, error) { return []error{epoch.ErrStale}, nil }
	require.ErrorIs(t, <-refused, epoch.ErrStale)
	require.ErrorIs(t, <-push(3, 4, 2), epoch.ErrStale)
	require.Zero(t, queuedBytes(st))
}

// queuedBytes returns the bytes st counts as queued.
func queuedBytes(st *stream) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.queuedBytes
}

func TestStreamFailsTheBatchesBeyondItsQueueBound(t *testing.T) {
	tr, o := scriptedOwner(t, 128)
	st := o.stream("r")
	value := make([]byte, replicateMessageBytes/2) // one batch per message
	batch := func(p int, lsn uint64, value []byte) *store.Batch {
		return &store.Batch{Partition: p, Epoch: 1, Prev: &store.Position{Epoch: 1, LSN: lsn - 1}, Writes: []store.KV{{Key: []byte("k"), Value: value}}}
	}
	size := batchBytes(batch(0, 1, value))
	fit := streamQueueBytes / size
	results := make([]chan error, fit+2)
	for p := range results {
		results[p] = make(chan error, 1)
	}
	enqueue(o, st, batch(0, 1, value), results[0])
	<-tr.sent // in flight, held, not counted

	// Behind it, partition 1's first batch, then one for each other
	// partition until the queue is full.
	for p := 1; p <= fit+1; p++ {
		enqueue(o, st, batch(p, 1, value), results[p])
	}
	require.ErrorContains(t, <-results[fit+1], "bytes of batches behind", "the batch beyond the bound")
	require.Equal(t, fit*size, queuedBytes(st))
	// The bound refuses partition 1's second batch, and so the batches
	// that follow it, not the first, queued before.
	second, third := make(chan error, 1), make(chan error, 1)
	enqueue(o, st, batch(1, 2, value), second)
	enqueue(o, st, batch(1, 3, value), third)
	require.ErrorContains(t, <-second, "bytes of batches behind")
	require.ErrorContains(t, <-third, "missed the batch at LSN 2 of partition 1")

	// The queued batches all go, one per message; then the queue is empty.
	tr.answers <- applied
	for p := 1; p <= fit; p++ {
		require.Equal(t, [][2]uint64{{uint64(p), 1}}, lsnsOf(<-tr.sent))
		tr.answers <- applied
	}
	for p := range fit + 1 {
		require.NoError(t, <-results[p])
	}
	require.Zero(t, queuedBytes(st))

	// A batch larger than the bound goes when the queue is empty.
	huge := make(chan error, 1)
	enqueue(o, st, batch(2, 2, make([]byte, streamQueueBytes)), huge)
	require.Empty(t, huge, "queued, not refused")
	require.Equal(t, [][2]uint64{{2, 2}}, lsnsOf(<-tr.sent))
	tr.answers <- applied
	require.NoError(t, <-huge)
}

func TestStreamRemembersTheFirstBatchAReplicaMissedInEachClaim(t *testing.T) {
	s := &stream{to: "r"}
	batch := func(e epoch.Epoch, lsn uint64) *store.Batch {
		return &store.Batch{Partition: 1, Epoch: e, Prev: &store.Position{Epoch: e, LSN: lsn - 1}}
	}
	s.miss(batch(4, 7), nil)                            // beyond the queue's bound
	s.miss(batch(4, 5), errors.New("connection reset")) // then 5's message failed
	s.miss(batch(5, 9), nil)                            // a newer claim's start, 4's batches still queued
	require.NoError(t, s.refusal(batch(4, 4)), "a batch before the first missed")
	require.ErrorContains(t, s.refusal(batch(4, 6)), "missed the batch at LSN 5")
	require.NotErrorIs(t, s.refusal(batch(4, 6)), epoch.ErrStale)
	require.ErrorContains(t, s.refusal(batch(5, 10)), "missed the batch at LSN 9")
	require.NoError(t, s.refusal(batch(6, 11)), "a claim without a miss goes")

	s.miss(batch(4, 8), epoch.ErrStale)
	s.miss(batch(4, 9), errors.New("connection reset"))
	require.ErrorIs(t, s.refusal(batch(4, 10)), epoch.ErrStale, "a stale refusal stays stale")
	require.NotErrorIs(t, s.refusal(batch(5, 10)), epoch.ErrStale, "in its own claim")

	// A batch of claim 5 being sent follows every queued batch of claim 4.
	s.forgetOlder(batch(5, 9))
	require.NoError(t, s.refusal(batch(4, 10)))
	require.Error(t, s.refusal(batch(5, 10)))
	s.forgetOlder(batch(6, 11))
	require.Empty(t, s.missed)
}

// oneSlowTransport confirms every message at once, signalling each on
// confirmed, except those to slow, which it holds until their context
// ends, signalling each on sent.
type oneSlowTransport struct {
	Transport
	slow            string
	sent, confirmed chan struct{}
}

func (t oneSlowTransport) Replicate(ctx context.Context, to string, req Replicate) ([]error, error) {
	if to == t.slow {
		t.sent <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	t.confirmed <- struct{}{}
	return make([]error, len(req.Batches)), nil
}

func TestOwnerMarksLaggingABackupWhoseQueueIsFull(t *testing.T) {
	s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	require.NoError(t, err)
	tr := oneSlowTransport{slow: "c", sent: make(chan struct{}, 1), confirmed: make(chan struct{}, 1)}
	o, err := New(Config{Self: "a", Partitions: 4, Store: s, Transport: tr})
	require.NoError(t, err)
	t.Cleanup(func() { o.Close(); s.Close() })
	pt := o.parts[1]
	require.True(t, pt.start(store.Claim{Epoch: 3, Owner: "a", Replicas: []string{"a", "b", "c"}}, store.Position{}, func() bool { return false }))

	// c's stream: one message held, then batches of another partition
	// filling the queue to its bound exactly.
	const fillers = 64
	value := make([]byte, streamQueueBytes/fillers-batchBytes(&store.Batch{Writes: []store.KV{{Key: []byte("k")}}}))
	filler := func(lsn uint64) *store.Batch {
		return &store.Batch{Partition: 2, Epoch: 1, Prev: &store.Position{Epoch: 1, LSN: lsn - 1}, Writes: []store.KV{{Key: []byte("k"), Value: value}}}
	}
	results := make(chan error, fillers+1)
	enqueue(o, o.stream("c"), filler(1), results)
	<-tr.sent
	for lsn := uint64(2); lsn <= fillers+1; lsn++ {
		enqueue(o, o.stream("c"), filler(lsn), results)
	}
	require.Equal(t, streamQueueBytes, queuedBytes(o.stream("c")))

	// A batch of partition 1 is refused by c's full queue on the way in,
	// after b confirmed it (c's stream is locked until then); a and b make
	// a majority, and c's refusal marks the partition lagging.
	l, err := o.Lease(1)
	require.NoError(t, err)
	bs, cs := o.stream("b"), o.stream("c")
	cs.mu.Lock()
	commits := make(chan *Commit, 1)
	go func() {
		commits <- o.Submit(l, &store.Batch{Partition: 1, Writes: []store.KV{{Key: []byte("k"), Value: []byte("v")}}})
	}()
	<-tr.confirmed
	require.Eventually(t, func() bool { // b's answer delivered, its sender gone
		bs.mu.Lock()
		defer bs.mu.Unlock()
		return !bs.sending
	}, 5*time.Second, time.Millisecond)
	cs.mu.Unlock()
	c := <-commits
	<-c.Done()
	l.Release()
	require.NoError(t, c.Err())
	pt.mu.Lock()
	defer pt.mu.Unlock()
	require.True(t, pt.lagging)
	require.False(t, pt.stalled)
}
