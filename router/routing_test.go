package router

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// whoRuns is a handler that returns the name of the node it runs on.
func whoRuns(n *Node) Handler {
	return func(context.Context, *Request) ([]byte, error) { return []byte(n.Name()), nil }
}

func TestEveryNodeRoutesEveryKeyToTheSameOwner(t *testing.T) {
	c := newTestCluster(t, 3, func(n *Node) { n.Handle("who", whoRuns(n)) })
	for i := range 10_000 {
		key := fmt.Appendf(nil, "key-%d", i)
		p := c.nodes[0].Partition(key)
		want, ok := c.nodes[0].Owner(p)
		require.True(t, ok)
		for _, n := range c.nodes[1:] {
			got, ok := n.Owner(p)
			require.True(t, ok)
			require.Equal(t, want.Owner, got.Owner, "key %q, partition %d, seen from %s", key, p, n.Name())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owners := map[string]int{}
	for i := range 300 {
		key := fmt.Appendf(nil, "key-%d", i)
		want, _ := c.nodes[0].Owner(c.nodes[0].Partition(key))
		for _, n := range c.nodes {
			ran, err := n.Call(ctx, key, "who", nil)
			require.NoError(t, err)
			require.Equal(t, want.Owner, string(ran), "call for %q entered at %s", key, n.Name())
		}
		owners[want.Owner]++
	}
	require.Len(t, owners, 3, "300 keys should spread over all 3 nodes: %v", owners)
}

// overlapProbe counts handlers running per key and records any overlap.
type overlapProbe struct {
	mu       sync.Mutex
	running  map[string]int
	overlaps atomic.Int64
	runs     atomic.Int64
}

func newOverlapProbe() *overlapProbe { return &overlapProbe{running: map[string]int{}} }

func (o *overlapProbe) enter(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.running[key]++
	if o.running[key] > 1 {
		o.overlaps.Add(1)
	}
	o.runs.Add(1)
}

func (o *overlapProbe) exit(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.running[key]--
}

// handler wraps h so the probe sees it run; it yields once inside, so two
// overlapping runs have a chance to be seen.
func (o *overlapProbe) handler(h Handler) Handler {
	return func(ctx context.Context, req *Request) ([]byte, error) {
		o.enter(string(req.Key))
		defer o.exit(string(req.Key))
		time.Sleep(50 * time.Microsecond)
		return h(ctx, req)
	}
}

// incrementLoad runs goroutines per node that increment keys through
// Call, perKey times per key in total, and returns the number of failed
// calls with their first error.
func incrementLoad(ctx context.Context, nodes func() []*Node, goroutinesPerNode, keys, perKey int) (failed int64, first error) {
	var next atomic.Int64
	total := int64(keys * perKey)
	var fails atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for g := range goroutinesPerNode * 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				live := nodes()
				n := live[g%len(live)]
				key := []byte(keyName(int(i % int64(keys))))
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := n.Call(cctx, key, "inc", nil)
				cancel()
				if err != nil {
					fails.Add(1)
					once.Do(func() { first = fmt.Errorf("call %d via %s: %w", i, n.Name(), err) })
				}
			}
		}()
	}
	wg.Wait()
	return fails.Load(), first
}

// readCounters returns each counter's value, read through Call.
func readCounters(t *testing.T, n *Node, keys int) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vals := make([]uint64, keys)
	for k := range keys {
		v, err := n.Call(ctx, []byte(keyName(k)), "get", nil)
		require.NoError(t, err)
		if len(v) == 8 {
			vals[k] = binary.BigEndian.Uint64(v)
		}
	}
	return vals
}

func TestConcurrentIncrementsOfOneKeyNeverOverlapAndNoneIsLost(t *testing.T) {
	probe := newOverlapProbe()
	c := newTestCluster(t, 3, func(n *Node) {
		n.Handle("inc", probe.handler(counter))
		n.Handle("get", get)
	})
	const keys, perKey = 50, 1000
	failed, first := incrementLoad(context.Background(), c.live, 32, keys, perKey)
	require.Zero(t, failed, "first failure: %v", first)
	for k, v := range readCounters(t, c.nodes[0], keys) {
		require.Equal(t, uint64(perKey), v, "counter-%d", k)
	}
	// A handler runs again only for a call whose commit failed (a replica
	// too slow on a loaded machine, say) and that its caller retried.
	var failedCommits uint64
	for _, n := range c.nodes {
		st := n.Stats()
		failedCommits += st.FencedCommits + st.FailedCommits
	}
	require.Equal(t, int64(keys*perKey)+int64(failedCommits), probe.runs.Load(), "every increment ran once, plus once per failed commit")
	require.Zero(t, probe.overlaps.Load(), "handlers of one key overlapped")
}

func keyName(k int) string { return fmt.Sprintf("counter-%d", k) }
