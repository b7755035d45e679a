package router

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkHandoffStall measures how long the partitions that move to a
// joining node go unserved, by partition size: one node with replication
// factor 1 and 8 partitions holds mib MiB in each (64 KiB values), while a
// caller per partition increments a key of it back to back; a second node
// joins and takes about half of them. The metric max-stall-ms is the
// longest call of the moved partitions' callers, the median over b.N
// joins. The stall is about a drain and the entries written during the
// pre-copy, not the partition's size (owner.PreCopy).
func BenchmarkHandoffStall(b *testing.B) {
	for _, mib := range []int{0, 16, 64} {
		b.Run(fmt.Sprintf("partition=%dMiB", mib), func(b *testing.B) {
			var stalls []time.Duration
			for range b.N {
				stalls = append(stalls, handoffStall(b, mib))
			}
			slices.Sort(stalls)
			b.ReportMetric(float64(stalls[len(stalls)/2].Microseconds())/1000, "max-stall-ms")
		})
	}
}

// handoffStall runs one join of BenchmarkHandoffStall and returns the
// longest call of a partition that moved.
func handoffStall(b *testing.B, mib int) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	const partitions = 8
	put := func(_ context.Context, req *Request) ([]byte, error) { req.State.Put(req.Payload); return nil, nil }
	c := &testCluster{t: b, dir: b.TempDir(), rf: 1, setup: func(n *Node) { n.Handle("put", put); n.Handle("inc", counter) }}
	cfg := c.config("n0", true)
	cfg.Partitions = partitions
	n0 := c.start(cfg)
	c.waitConverged()
	ctx := context.Background()
	value := make([]byte, 64<<10)
	var wg sync.WaitGroup
	const writers = 16
	for w := range writers {
		wg.Go(func() {
			for i := w; i < mib*16*partitions; i += writers {
				if _, err := n0.Call(ctx, fmt.Appendf(nil, "big-%d", i), "put", value); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()

	stop := make(chan struct{})
	longest := make([]time.Duration, partitions)
	for p := range partitions {
		key := keyInPartition(n0, p, "probe")
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				if _, err := n0.Call(ctx, key, "inc", nil); err != nil {
					b.Error(err)
					return
				}
				longest[p] = max(longest[p], time.Since(start))
			}
		})
	}
	cfg = c.config("n1", false)
	cfg.Partitions = partitions
	c.start(cfg)
	c.waitConverged()
	close(stop)
	wg.Wait()
	var stall time.Duration
	for p := range partitions {
		if cl, _ := n0.Owner(p); cl.Owner == "n1" {
			stall = max(stall, longest[p])
		}
	}
	for _, n := range c.nodes {
		n.Close()
	}
	return stall
}
