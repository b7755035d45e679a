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
	o.push(o.stream("b"), batch(0, 2, nil), results)
	first := <-h.sent // in flight, held
	require.Len(t, first, 1)

	// Queued while the first message is in flight: the second message
	// carries them all, in the order they were queued.
	for lsn := uint64(1); lsn <= 4; lsn++ {
		o.push(o.stream("b"), batch(lsn, epoch.Epoch(1+lsn%2), nil), results)
	}
	h.release <- struct{}{}
	second := <-h.sent
	require.Len(t, second, 4)
	for i, b := range second {
		require.Equal(t, uint64(i+1), b.Prev.LSN)
	}
	// Batches too large to share a message go one per message.
	big := make([]byte, replicateMessageBytes*2/3)
	o.push(o.stream("b"), batch(5, 2, big), results)
	o.push(o.stream("b"), batch(6, 2, big), results)
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
		r, rs := replicaOf(t)
		s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
		require.NoError(t, err)
		tr := &lossyTransport{r: r, afterApply: afterApply, lose: 1}
		o, err := New(Config{Self: "a", Partitions: 4, Store: s, Transport: tr})
		require.NoError(t, err)

		results := make(chan error, 2)
		first := write(1, store.Position{}, "k", "v1")
		o.push(o.stream("r"), &first, results)
		require.NoError(t, <-results, "lost after it was applied: %v", afterApply)
		second := write(1, store.Position{Epoch: 1, LSN: 1}, "k", "v2")
		o.push(o.stream("r"), &second, results)
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
	o.push(o.stream("r"), &b, results)
	require.ErrorIs(t, <-results, context.DeadlineExceeded)
	require.Equal(t, int32(1), slow.calls.Load(), "a message that timed out is not sent again")
	o.Close()

	down := &failingTransport{} // every attempt fails at once
	o, err = New(Config{Self: "a", Partitions: 4, Store: s, Transport: down})
	require.NoError(t, err)
	defer o.Close()
	o.push(o.stream("r"), &b, results)
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
