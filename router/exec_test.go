package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/store"
)

// A write the store refuses as invalid must not be seen by the key's next
// call: that refusal is not permanent for the epoch, unlike a fenced one,
// so pipelining's promise (no reply leaves with state that was not made
// durable) holds only if such a write never reaches the overlay. Call
// refuses such a key up front; a node with other limits could still send
// one, so the test enters at the owner's execute.
func TestInvalidWriteIsNotReadByTheKeysNextCall(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var hold atomic.Bool
	c := newReplicatedCluster(t, 1, 1, func(n *Node) {
		n.Handle("inc", func(ctx context.Context, req *Request) ([]byte, error) {
			if hold.Load() {
				entered <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done(): // the test failed and closes the node
					return nil, ctx.Err()
				}
			}
			return counter(ctx, req)
		})
		n.Handle("get", get)
	})
	n := c.nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := bytes.Repeat([]byte("k"), store.MaxKeySize+1)
	pe := n.exec.parts[n.Partition(key)]
	for i := range 30 {
		hold.Store(true)
		first := make(chan callResponse, 1)
		go func() { first <- n.execute(ctx, callRequest{ID: newRequestID(time.Now()), Key: key, Method: "inc"}) }()
		// Its handler holds the key's worker: the second call queues behind
		// it. (Watching the queue instead let the previous iteration's
		// worker, still finishing, pass for the first call's.)
		select {
		case <-entered:
		case <-ctx.Done():
			t.Fatalf("iteration %d: the first call's handler did not run", i)
		}
		second := make(chan callResponse, 1)
		go func() { second <- n.execute(ctx, callRequest{ID: newRequestID(time.Now()), Key: key, Method: "get"}) }()
		waitFor(t, 5*time.Second, func() error {
			pe.mu.Lock()
			defer pe.mu.Unlock()
			if len(pe.queues[string(key)]) != 1 {
				return errors.New("second call not queued yet")
			}
			return nil
		})
		hold.Store(false)
		release <- struct{}{}
		r1, r2 := <-first, <-second
		require.Equal(t, statusInvalid, r1.Status, "iteration %d: %s", i, r1.Body)
		require.Equal(t, statusOK, r2.Status, "iteration %d: %s", i, r2.Body)
		require.Empty(t, r2.Body, "iteration %d: the next call read a write the store refused", i)
	}
}

// The bytes State.Get returns belong to the handler, as store.Get's do: a
// handler that edits them in place and then fails must write nothing. When
// the previous call's commit is still pending, Get returns that pending
// batch's own value (the overlay), and the edit reaches the batch and the
// store.
func TestEditingAValueGotFromAPendingWriteChangesNothing(t *testing.T) {
	c := newReplicatedCluster(t, 1, 1, func(n *Node) {
		n.Handle("put", func(_ context.Context, req *Request) ([]byte, error) {
			req.State.Put(req.Payload)
			return nil, nil
		})
		n.Handle("scribble", func(_ context.Context, req *Request) ([]byte, error) {
			v, _ := req.State.Get()
			for i := range v {
				v[i] = 'X'
			}
			return nil, errors.New("changed my mind")
		})
		n.Handle("get", get)
	})
	n := c.nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 50 {
		key := fmt.Appendf(nil, "k%d", i)
		// Both attempts enter the key's queue at once: scribble runs while
		// put's commit is (most likely) still pending.
		done := make(chan callResponse, 2)
		go func() {
			done <- n.execute(ctx, callRequest{ID: newRequestID(time.Now()), Key: key, Method: "put", Payload: []byte("original")})
		}()
		go func() {
			done <- n.execute(ctx, callRequest{ID: newRequestID(time.Now()), Key: key, Method: "scribble"})
		}()
		<-done
		<-done
		v, err := n.Call(ctx, key, "get", nil)
		require.NoError(t, err)
		if len(v) > 0 {
			require.Equal(t, "original", string(v), "iteration %d: a failed call's in-place edit was written", i)
		}
	}
}

// A call whose caller gave up still runs (Call's doc); it must run on the
// key the caller named, not on whatever the caller's buffer holds after
// Call returned.
func TestAbandonedLocalCallRunsOnTheKeyItNamed(t *testing.T) {
	started, proceed := make(chan struct{}), make(chan struct{})
	var hold atomic.Bool
	c := newReplicatedCluster(t, 1, 1, func(n *Node) {
		n.Handle("inc", func(ctx context.Context, req *Request) ([]byte, error) {
			if hold.Load() {
				select {
				case started <- struct{}{}:
				case <-ctx.Done(): // the test failed and closes the node
					return nil, ctx.Err()
				}
				<-proceed
			}
			return counter(ctx, req)
		})
		n.Handle("get", get)
	})
	letGo := sync.OnceFunc(func() { close(proceed) })
	t.Cleanup(letGo) // before the cluster closes, should the test fail first
	n := c.nodes[0]
	key := []byte("key-a")
	p := n.Partition(key)
	hold.Store(true)
	lost, cancelLost := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := n.Call(lost, key, "inc", nil)
		first <- err
	}()
	<-started
	cancelLost()
	require.ErrorIs(t, <-first, context.Canceled)
	copy(key, "key-b") // the caller reuses its buffer: Call has returned
	hold.Store(false)
	letGo()

	// Wait for the abandoned call's commit to be decided.
	pe := n.exec.parts[p]
	waitFor(t, 5*time.Second, func() error {
		pe.mu.Lock()
		defer pe.mu.Unlock()
		if len(pe.queues) > 0 || len(pe.responses) > 0 {
			return errors.New("the abandoned call is still running")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := n.Call(ctx, []byte("key-a"), "get", nil)
	require.NoError(t, err)
	require.Len(t, v, 8, "the call on key-a did not write key-a")
	stray, ok, err := n.store.Get(p, []byte("key-b"))
	require.NoError(t, err)
	require.False(t, ok, "key-b was written in key-a's partition %d: %x", p, stray)
}

// A handler that ends its goroutine without returning or panicking
// (runtime.Goexit: t.FailNow in a test's handler) must not wedge its key:
// the key's later calls still run.
func TestHandlerGoexitDoesNotWedgeItsKey(t *testing.T) {
	var exited atomic.Bool
	c := newReplicatedCluster(t, 1, 1, func(n *Node) {
		n.Handle("inc", func(ctx context.Context, req *Request) ([]byte, error) {
			if exited.CompareAndSwap(false, true) {
				runtime.Goexit()
			}
			return counter(ctx, req)
		})
	})
	n := c.nodes[0]
	// Hang guards: the first call fails at once, and the second needs one
	// durable write, which a loaded disk may take seconds to make.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := n.Call(ctx, []byte("k"), "inc", nil)
	require.ErrorIs(t, err, ErrHandler)
	_, err = n.Call(ctx, []byte("k"), "inc", nil)
	require.NoError(t, err, "the key's calls are stuck behind a worker that is gone")
}

// workers counts the goroutines of this process waiting for or running a
// key's calls (executor.worker).
func workers() int {
	n := 0
	for _, g := range libraryGoroutines() {
		if strings.Contains(g, "(*executor).worker(") {
			n++
		}
	}
	return n
}

// A worker that ran a key's calls waits for the next key instead of
// exiting, so calls made one after the other on different keys reuse a
// few (a worker may not be waiting yet when the next call comes); Close
// ends the waiting ones at once, and a worker that waited workerIdleTime
// exits.
func TestWorkersAreReusedAndEndWhenIdleOrClosed(t *testing.T) {
	defer func(d time.Duration) { workerIdleTime = d }(workerIdleTime)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	callKeys := func(n *Node) {
		for i := range 50 {
			_, err := n.Call(ctx, fmt.Appendf(nil, "k%d", i), "inc", nil)
			require.NoError(t, err)
		}
	}

	workerIdleTime = time.Minute // longer than ctx: Close must not wait for it
	c := newReplicatedCluster(t, 1, 1, func(n *Node) { n.Handle("inc", counter) })
	callKeys(c.nodes[0])
	require.NotZero(t, workers(), "every worker exited after its key")
	require.LessOrEqual(t, workers(), 5, "50 keys called one after the other started a worker each")
	closed := make(chan error, 1)
	go func() { closed <- c.nodes[0].Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Close waits for the workers waiting for a key")
	}
	require.Zero(t, workers(), "Close returned with workers waiting for a key")

	workerIdleTime = time.Millisecond
	c = newReplicatedCluster(t, 1, 1, func(n *Node) { n.Handle("inc", counter) })
	callKeys(c.nodes[0])
	waitFor(t, 10*time.Second, func() error {
		if w := workers(); w > 0 {
			return fmt.Errorf("%d workers still wait after %v", w, workerIdleTime)
		}
		return nil
	})
	// Close orders the exited workers' reads of workerIdleTime before the
	// deferred write (its wait for n.wg).
	require.NoError(t, c.nodes[0].Close())
}
