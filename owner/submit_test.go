package owner

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// recordingTransport confirms replicated batches and records them, and
// whether any was sent after closed was closed.
type recordingTransport struct {
	Transport
	closed chan struct{}
	mu     sync.Mutex
	sent   []store.Batch
	late   bool
}

func (r *recordingTransport) Replicate(_ context.Context, _ string, req Replicate) ([]error, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.closed:
		r.late = true
	default:
	}
	r.sent = append(r.sent, req.Batches...)
	return make([]error, len(req.Batches)), nil
}

// servingOwner returns an Owner that serves partition 1 under a claim with
// replicas a (itself), b and c, over transport tr.
func servingOwner(t *testing.T, tr Transport) *Owner {
	s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	o, err := New(Config{Self: "a", Partitions: 4, Store: s, Transport: tr})
	require.NoError(t, err)
	t.Cleanup(o.Close)
	claim := store.Claim{Epoch: 3, Owner: "a", Replicas: []string{"a", "b", "c"}}
	require.True(t, o.parts[1].start(claim, store.Position{}, func() bool { return false }))
	return o
}

func submit(t *testing.T, o *Owner, key []byte) error {
	l, err := o.Lease(1)
	require.NoError(t, err)
	defer l.Release()
	c := o.Submit(l, &store.Batch{Partition: 1, Writes: []store.KV{{Key: key, Value: []byte("v")}}})
	<-c.Done()
	return c.Err()
}

// A batch the store refuses as invalid is refused before it is numbered:
// had it taken a position in the claim's order, every later batch would
// follow a position the replicas never reach.
func TestInvalidBatchTakesNoPlaceInTheClaimsOrder(t *testing.T) {
	tr := &recordingTransport{closed: make(chan struct{})}
	o := servingOwner(t, tr)
	require.NoError(t, submit(t, o, []byte("first")))
	require.ErrorIs(t, submit(t, o, bytes.Repeat([]byte("k"), store.MaxKeySize+1)), store.ErrInvalid)
	require.NoError(t, submit(t, o, []byte("second")), "the batch after an invalid one must commit")
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, b := range tr.sent {
		switch string(b.Writes[0].Key) {
		case "first":
		case "second":
			require.Equal(t, store.Position{Epoch: 3, LSN: 1}, *b.Prev, "the batch after the invalid one must follow the one before it")
		default:
			t.Fatal("the invalid batch was sent to a backup")
		}
	}
}

// Close does not wait for leases: a call that holds one across Close must
// not make the Owner start goroutines after Close returned (the stream
// sends), nor get a write acknowledged by an Owner that is closed.
func TestSubmitAfterCloseStartsNoGoroutine(t *testing.T) {
	tr := &recordingTransport{closed: make(chan struct{})}
	o := servingOwner(t, tr)
	l, err := o.Lease(1)
	require.NoError(t, err)
	o.Close()
	close(tr.closed)
	c := o.Submit(l, &store.Batch{Partition: 1, Writes: []store.KV{{Key: []byte("k"), Value: []byte("v")}}})
	<-c.Done()
	l.Release()
	require.ErrorIs(t, c.Err(), ErrClosed, "a closed Owner acknowledged a write")
	tr.mu.Lock()
	defer tr.mu.Unlock()
	require.False(t, tr.late, "a stream goroutine sent a batch after Close returned")
}

// ErrClosed is what every method returns after Close, the lifecycle
// calls included: Bootstrap used to report its store's cancelled
// context, and Leave of a node alone in its table nil.
func TestBootstrapAndLeaveAfterCloseReturnErrClosed(t *testing.T) {
	o := servingOwner(t, &recordingTransport{closed: make(chan struct{})})
	o.Close()
	_, err := o.Bootstrap()
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, o.Leave(context.Background()), ErrClosed)
}
