package router

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/internal/testhook"
	"github.com/singlewriter/singlewriter/ring"
)

// zombieScenario is the first test of "Testing for the pause": a handler
// on the owner computes its write and pauses; meanwhile another node
// acquires the partition and writes; then the paused handler resumes and
// tries to commit. It returns the paused call's error and the key's final
// value read at the new owner.
//
// The nodes keep one copy of each partition (replication factor 1): the
// refused commit then reaches the caller as ErrStaleEpoch. With replicas,
// Call retries it on the new owner instead:
// TestPausedOwnerWithReplicasIsFencedAndTheCallCompletesOnTheNewOwner.
func zombieScenario(t *testing.T) (zombieErr error, final string) {
	dir := t.TempDir()
	computed := make(chan struct{})
	release := make(chan struct{})
	setup := func(n *Node) {
		n.Handle("put", func(_ context.Context, req *Request) ([]byte, error) {
			req.State.Put(req.Payload)
			return nil, nil
		})
		n.Handle("get", get)
		n.Handle("paused-put", func(_ context.Context, req *Request) ([]byte, error) {
			req.State.Put(req.Payload)
			close(computed) // the write is computed ...
			<-release       // ... and the handler pauses, like a long GC pause
			return nil, nil
		})
	}
	c := &testCluster{t: t, dir: dir, setup: setup, rf: 1}
	cfg := c.config("old", true)
	cfg.DrainTimeout = 100 * time.Millisecond
	old := c.start(cfg)

	// A key the ring gives to "new" once it joins.
	next := ring.Place([]ring.Member{{Name: "new"}, {Name: "old"}}, ring.DefaultPartitions, 1)
	var key []byte
	for i := 0; key == nil; i++ {
		k := fmt.Appendf(nil, "order-%d", i)
		if next.Owners[old.Partition(k)] == "new" {
			key = k
		}
	}
	p := old.Partition(key)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	zombie := make(chan error, 1)
	go func() {
		_, err := old.Call(ctx, key, "paused-put", []byte("zombie"))
		zombie <- err
	}()
	<-computed

	newNode := c.start(c.config("new", false))
	waitFor(t, 30*time.Second, func() error {
		if cl, ok := newNode.Serving(p); !ok || cl.Owner != "new" {
			return fmt.Errorf("new owner does not serve partition %d yet", p)
		}
		return nil
	})
	_, err := newNode.Call(ctx, key, "put", []byte("new-owner"))
	require.NoError(t, err)

	close(release)
	zombieErr = <-zombie
	if zombieErr != nil {
		require.Equal(t, uint64(1), old.Stats().FencedCommits, "the fenced commit is counted")
		require.NotZero(t, old.Stats().DrainTimeouts, "the paused call outlived the drain")
	}
	v, err := newNode.Call(ctx, key, "get", nil)
	require.NoError(t, err)
	return zombieErr, string(v)
}

func TestPausedOwnerWriteIsFencedAfterTakeover(t *testing.T) {
	zombieErr, final := zombieScenario(t)
	require.ErrorIs(t, zombieErr, ErrStaleEpoch, "the paused owner's write must be refused")
	require.Equal(t, "new-owner", final, "only the new owner's write may be in the final state")
}

// TestPausedOwnerCorruptsWithoutFencing is the control: the same scenario
// with the store's epoch check switched off must lose an acknowledged
// write, or the test above proves nothing.
func TestPausedOwnerCorruptsWithoutFencing(t *testing.T) {
	testhook.DisableFencing(t)
	zombieErr, final := zombieScenario(t)
	require.NoError(t, zombieErr, "without fencing the paused owner's write is acknowledged")
	require.NotEqual(t, "zombie", final, "... and yet it is not in the final state: an acknowledged write was lost")
}
