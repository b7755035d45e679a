package router

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
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

	var keys []string
	victimOwned := map[string]bool{}
	for i := 0; len(keys) < 40; i++ {
		k := fmt.Sprintf("acct-%d", i)
		keys = append(keys, k)
		if cl, _ := victim.Owner(victim.Partition([]byte(k))); cl.Owner == victim.Name() {
			victimOwned[k] = true
		}
	}
	require.NotEmpty(t, victimOwned, "no key owned by the victim")
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
