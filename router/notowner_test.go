package router

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/owner"
)

// A call that reaches a node without its method, through a stale claim,
// must not be told that nothing ran: an earlier attempt may have run at
// the owner. Only the owner, past its dedup check, answers
// statusUnknownMethod; another node redirects.
func TestNodeWithoutTheMethodRedirectsACallForAKeyItDoesNotOwn(t *testing.T) {
	c := newReplicatedCluster(t, 2, 1, func(n *Node) {
		if n.Name() == "n0" {
			n.Handle("added", counter) // a method only the upgraded node has
		}
	})
	owner, other := c.nodes[0], c.nodes[1]
	key := keyOwnedBy(other, owner.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	r := other.execute(ctx, callRequest{ID: []byte("id"), Key: key, Method: "added"})
	require.Equal(t, statusNotOwner, r.Status, "answer %q", r.Body)
	require.Equal(t, owner.Name(), r.Claim.Owner)
	_, err := other.Call(ctx, key, "added", nil)
	require.NoError(t, err)
}

// A handler that outlives a handoff keeps its key's queue busy on the
// deposed owner; a call for that key reaching it meanwhile is redirected
// at once, not after the handler ends.
func TestDeposedOwnerRedirectsAtOnceWhileAHandlerStillRuns(t *testing.T) {
	running, release := make(chan struct{}), make(chan struct{})
	c := newReplicatedCluster(t, 3, 1, func(n *Node) {
		n.Handle("inc", counter)
		n.Handle("block", func(context.Context, *Request) ([]byte, error) {
			close(running)
			<-release
			return nil, nil
		})
	})
	x, entry := c.nodes[1], c.nodes[0]
	key := keyOwnedBy(entry, x.Name())
	p := x.Partition(key)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	unblock := sync.OnceFunc(func() { close(release) })
	defer unblock() // a failing test must not leave Close waiting for the handler

	blocked := callAsync(ctx, entry, key, "block")
	<-running
	handedOff := make(chan error, 1)
	go func() { handedOff <- x.owner.Leave(ctx) }() // its drain gives up on the running handler
	waitFor(t, 30*time.Second, func() error {
		if cl, ok := x.Serving(p); ok {
			return fmt.Errorf("%s still serves partition %d at epoch %d", x.Name(), p, cl.Epoch)
		}
		return nil
	})

	// The hang guard only: the answer must not wait for release.
	guard, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	r := x.execute(guard, callRequest{ID: []byte("next"), Key: key, Method: "inc"})
	require.Equal(t, statusNotOwner, r.Status, "answer %q", r.Body)
	unblock()
	<-blocked
	require.NoError(t, <-handedOff)
}

// A handler still running when its partition's drain times out has its
// ctx cancelled, with owner.ErrRevoked as the cause: the new owner runs
// the key's next calls meanwhile. A handler that stops and fails then has
// its call run again at the new owner, not failed.
func TestHandlerOutlivingItsDrainHasItsContextCancelledAndItsCallRunsAgain(t *testing.T) {
	first := make(chan struct{})
	causes := make(chan error, 1)
	var runs atomic.Int32
	c := newReplicatedCluster(t, 3, 1, func(n *Node) {
		n.Handle("wait-once", func(ctx context.Context, req *Request) ([]byte, error) {
			if runs.Add(1) > 1 {
				return counter(ctx, req)
			}
			close(first)
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil, ctx.Err()
		})
	})
	x, entry := c.nodes[1], c.nodes[0]
	key := keyOwnedBy(entry, x.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	called := callAsync(ctx, entry, key, "wait-once")
	<-first
	handedOff := make(chan error, 1)
	go func() { handedOff <- x.owner.Leave(ctx) }() // its drain gives up on the running handler
	select {
	case cause := <-causes:
		require.ErrorIs(t, cause, owner.ErrRevoked)
	case <-ctx.Done():
		t.Fatal("the handler's ctx did not end")
	}
	require.NoError(t, <-called, "the call runs again at the new owner")
	require.EqualValues(t, 2, runs.Load())
	require.NoError(t, <-handedOff)
}
