package router

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/internal/smallfs"
	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// A node whose disk fills up leaves the cluster and closes by itself: its
// store refuses every write, so it could serve nothing, yet in the ring it
// kept its partitions from the others. With replication factor 3 the
// others take them over from the backups, and nothing acknowledged is
// lost. The node reports why it stopped (Done, Err), and a call on it says
// so.
func TestNodeWhoseDiskFillsUpLeavesAndTheOthersTakeOver(t *testing.T) {
	setup := func(n *Node) {
		n.Handle("inc", counter)
		n.Handle("get", get)
		n.Handle("put", func(_ context.Context, req *Request) ([]byte, error) {
			req.State.Put(req.Payload)
			return nil, nil
		})
	}
	c := newReplicatedCluster(t, 3, 3, setup)
	cfg := c.config("victim", false)
	cfg.DataDir = filepath.Join(smallfs.Mount(t, 16<<20), "victim")
	victim := c.start(cfg)
	c.waitConverged()

	keys, victimOwned := accountKeys(t, victim, 40)
	l := newLedger()
	stop := make(chan struct{})
	writers := l.incrementUntil(c, keys, stop)
	stopWriters := sync.OnceFunc(func() { close(stop); writers.Wait() })
	t.Cleanup(stopWriters) // should the test fail

	// Fill the victim's disk with 64 KiB values on keys it holds a backup
	// copy of: their owners commit them on the other backup once the
	// victim's disk is full.
	value := make([]byte, 64<<10)
	entry := c.nodes[0]
	filled := 0
	for i := 0; filled < 1024; i++ {
		key := fmt.Appendf(nil, "fill-%d", i)
		cl, _ := entry.Owner(entry.Partition(key))
		if cl.Owner == victim.Name() || !slices.Contains(cl.Replicas, victim.Name()) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := entry.Call(ctx, key, "put", value)
		cancel()
		require.NoError(t, err, "a write on the other replicas failed")
		if filled++; victim.store.Err() != nil {
			break
		}
	}
	require.ErrorIs(t, victim.store.Err(), store.ErrFailed, "1,024 values of 64 KiB fit in 16 MiB")
	select {
	case <-victim.Done():
	case <-time.After(30 * time.Second): // a hang guard, not a timing
		t.Fatal("the victim's store failed and the node did not stop")
	}
	stoppedAt := time.Now()
	require.ErrorIs(t, victim.Err(), store.ErrFailed)
	require.ErrorIs(t, victim.Err(), ErrClosed)
	_, err := victim.Call(context.Background(), []byte(keys[0]), "get", nil)
	require.ErrorIs(t, err, store.ErrFailed, "a call on the stopped node does not say why")

	c.waitDropped(victim.Name())
	dropped := time.Since(stoppedAt)
	// Every key, the victim's included, is acknowledged again after it
	// stopped.
	l.waitAcknowledgedSince(t, keys, stoppedAt)
	stopWriters()
	c.waitConverged()
	l.requireNothingLost(t, c.nodes[0])
	t.Logf("the others dropped the victim %s after it stopped; %d acknowledged increments", dropped.Round(time.Millisecond), l.acks())
	logGaps(t, "victim's keys", l, func(k string) bool { return victimOwned[k] })
}

// Whoever stops a node whose store failed, the node itself or a Close
// racing it: every call that failed says why (not a bare ErrClosed), Err
// says it too, and the goroutine that stops the node has ended once Close
// returned. Found in
// review: the calls in flight got a bare ErrClosed, and the goroutine that
// stops the node could outlive a Close that won the race. Each round fills
// a fresh disk; the race goes either way.
func TestNodeWhoseStoreFailedSaysSoAndLeavesNoGoroutineAfterClose(t *testing.T) {
	for round := range 3 {
		dir := smallfs.Mount(t, 16<<20)
		c := &testCluster{t: t, dir: dir, setup: func(n *Node) {
			n.Handle("put", func(_ context.Context, req *Request) ([]byte, error) {
				req.State.Put(req.Payload)
				return nil, nil
			})
		}}
		n := c.add("n0", true)
		c.waitConverged()
		// Leave the store about 1 MiB: its log grows by 1 MiB at a time.
		var st syscall.Statfs_t
		require.NoError(t, syscall.Statfs(dir, &st))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "filler"), make([]byte, int64(st.Bavail)*st.Bsize-1<<20), 0o600))

		errs := make(chan error, 1024)
		var callers sync.WaitGroup
		for i := range 8 {
			callers.Go(func() {
				for j := 0; ; j++ {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					_, err := n.Call(ctx, fmt.Appendf(nil, "k%d-%d", i, j), "put", make([]byte, 64<<10))
					cancel()
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		<-n.store.Failed()
		require.NoError(t, n.Close())
		for _, g := range libraryGoroutines() {
			if strings.Contains(g, "stopOnStoreFailure") {
				t.Fatalf("round %d: the goroutine stopping the node outlived Close:\n%s", round, g)
			}
		}
		callers.Wait()
		close(errs)
		for err := range errs {
			require.ErrorIs(t, err, store.ErrFailed, "round %d: a failed call does not say that the store failed", round)
		}
		require.ErrorIs(t, n.Err(), store.ErrFailed, "round %d", round)
	}
}
