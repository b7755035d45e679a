package owner

import (
	"context"
	"testing"

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
