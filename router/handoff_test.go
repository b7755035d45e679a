package router

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/store"
)

func TestJoinAndLeaveUnderTrafficLoseNothing(t *testing.T) {
	probe := newOverlapProbe()
	setup := func(n *Node) {
		n.Handle("inc", probe.handler(counter))
		n.Handle("get", get)
	}
	c := newTestCluster(t, 3, setup)
	before := claimsOf(c.nodes[0])

	// The live set changes under the load; the load reads it each call.
	var mu sync.Mutex
	live := c.live()
	nodes := func() []*Node {
		mu.Lock()
		defer mu.Unlock()
		return live
	}
	const keys, perKey = 50, 1000
	type result struct {
		failed int64
		first  error
	}
	done := make(chan result, 1)
	go func() {
		f, e := incrementLoad(context.Background(), nodes, 32, keys, perKey)
		done <- result{f, e}
	}()

	waitRuns := func(n int64) {
		waitFor(t, 60*time.Second, func() error {
			if probe.runs.Load() < n {
				return errorf("%d increments so far", probe.runs.Load())
			}
			return nil
		})
	}
	waitRuns(keys * perKey / 4)
	joined := c.add("n3", false)
	mu.Lock()
	live = append(live, joined)
	mu.Unlock()
	c.waitConverged()

	waitRuns(keys * perKey / 2)
	leaving := c.nodes[1]
	mu.Lock()
	live = []*Node{c.nodes[0], c.nodes[2], joined}
	mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, leaving.Leave(ctx))
	c.waitConverged()

	r := <-done
	require.Zero(t, r.failed, "first failure: %v", r.first)
	for k, v := range readCounters(t, c.nodes[0], keys) {
		require.Equal(t, uint64(perKey), v, "counter-%d", k)
	}
	require.Zero(t, probe.overlaps.Load())

	after := claimsOf(c.nodes[0])
	moved := 0
	for p := range after {
		if after[p].Owner == before[p].Owner {
			continue
		}
		moved++
		require.Greater(t, after[p].Epoch, before[p].Epoch, "partition %d moved from %s to %s", p, before[p].Owner, after[p].Owner)
		owner := c.node(after[p].Owner)
		served, ok := owner.Serving(p)
		require.True(t, ok, "partition %d: new owner %s does not serve it", p, owner.Name())
		require.Equal(t, after[p].Epoch, served.Epoch)
	}
	require.NotZero(t, moved)
	// Every counter is readable from the node that now serves it, straight
	// from its store.
	for k := range keys {
		key := []byte(keyName(k))
		p := c.nodes[0].Partition(key)
		owner := c.node(after[p].Owner)
		v, ok, err := owner.store.Get(p, key)
		require.NoError(t, err)
		require.True(t, ok, "%s missing at its owner %s", key, owner.Name())
		require.Len(t, v, 8)
	}
}

func claimsOf(n *Node) []store.Claim { return n.owner.Claims().Snapshot() }

// TestTwoNodesLeavingAtOnceHandTheirPartitionsToTheThird: each leaving
// node first places its partitions over a table that still has the other,
// which refuses them (it is leaving too); they must go to the third node
// instead of waiting for the context (a generous one, so that a deadlock
// fails the test rather than hangs it).
func TestTwoNodesLeavingAtOnceHandTheirPartitionsToTheThird(t *testing.T) {
	c := newTestCluster(t, 3, func(n *Node) { n.Handle("inc", counter) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make(chan error, 2)
	for _, n := range c.nodes[1:] {
		go func() { errs <- n.Leave(ctx) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	stay := c.nodes[0]
	for p := range stay.cfg.Partitions {
		claim, _ := stay.Owner(p)
		require.Equal(t, "n0", claim.Owner, "partition %d", p)
	}
	_, err := stay.Call(ctx, []byte("k"), "inc", nil)
	require.NoError(t, err)
}

// With replication factor 3 a leaving node also backs up partitions that
// others own. It must leave those replica sets before it goes: in a
// cluster of two, or of three with two leaving at once, the sets it stayed
// in would have no majority left, and their partitions no owner.
func TestLeavingNodesLeaveTheReplicaSetsTheyBackUp(t *testing.T) {
	for _, tc := range []struct{ size, leaving int }{{2, 1}, {3, 2}} {
		t.Run(fmt.Sprintf("%d of %d", tc.leaving, tc.size), func(t *testing.T) {
			c := newReplicatedCluster(t, tc.size, 3, func(n *Node) { n.Handle("inc", counter) })
			c.waitConverged()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			errs := make(chan error, tc.leaving)
			for _, n := range c.nodes[tc.size-tc.leaving:] {
				go func() { errs <- n.Leave(ctx) }()
			}
			for range tc.leaving {
				require.NoError(t, <-errs)
			}
			stay := c.nodes[0]
			for p := range stay.cfg.Partitions {
				claim, _ := stay.Owner(p)
				require.Equal(t, []string{"n0"}, claim.Replicas, "partition %d", p)
			}
			covered := map[int]bool{}
			for i := 0; len(covered) < stay.cfg.Partitions; i++ {
				key := fmt.Appendf(nil, "k-%d", i)
				if p := stay.Partition(key); !covered[p] {
					covered[p] = true
					_, err := stay.Call(ctx, key, "inc", nil)
					require.NoError(t, err, "partition %d", p)
				}
			}
		})
	}
}

// A node that joins takes over, as owner or replica, partitions that hold
// data: each one's new replicas copy it while its owner still serves it,
// and once the owner has promised they fetch only what changed since
// (owner.PreCopy). Nothing is copied whole, and nothing is lost.
func TestPartitionsMovingToAJoiningNodeArePreCopied(t *testing.T) {
	for _, rf := range []int{1, 3} {
		t.Run(fmt.Sprintf("rf%d", rf), func(t *testing.T) {
			ctx := context.Background()
			c := newReplicatedCluster(t, rf, rf, func(n *Node) {
				n.Handle("inc", counter)
				n.Handle("get", get)
			})
			const keys = 300
			for i := range keys {
				_, err := c.nodes[0].Call(ctx, fmt.Appendf(nil, "key-%d", i), "inc", nil)
				require.NoError(t, err)
			}
			joined := c.add("new", false)
			c.waitConverged()

			moved := 0
			for p := range joined.cfg.Partitions {
				if cl, _ := joined.Owner(p); slices.Contains(cl.Replicas, "new") {
					moved++
				}
			}
			require.Positive(t, moved)
			st := joined.Stats()
			require.Equal(t, uint64(moved), st.PreCopiesInstalled, "every partition the new node holds was pre-copied")
			require.Zero(t, st.CopiesInstalled, "none was copied whole")
			for i := range keys {
				v, err := joined.Call(ctx, fmt.Appendf(nil, "key-%d", i), "get", nil)
				require.NoError(t, err)
				require.Equal(t, uint64(1), binary.BigEndian.Uint64(v), "key-%d", i)
			}
		})
	}
}
