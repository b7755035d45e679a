package router

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// benchmarkCalls runs b.N increments through entry with the given number
// of concurrent callers, on one hot key or on a key per caller, on a
// cluster of max(2, rf) nodes with replication factor rf, each node
// configured by setup if it is not nil.
func benchmarkCalls(b *testing.B, rf int, forwarded bool, callers int, hotKey bool, setup func(n *Node)) {
	c := newReplicatedCluster(b, max(2, rf), rf, func(n *Node) {
		if setup != nil {
			setup(n)
		}
		n.Handle("inc", counter)
	})
	entry, target := c.nodes[0], c.nodes[0].Name()
	if forwarded {
		target = c.nodes[1].Name()
	}
	keys := make([][]byte, callers)
	for i := range keys {
		if hotKey && i > 0 {
			keys[i] = keys[0]
			continue
		}
		k := keyOwnedBy(entry, target)
		keys[i] = append(k, fmt.Sprintf("/%d", i)...)
		for cl, _ := entry.Owner(entry.Partition(keys[i])); cl.Owner != target; cl, _ = entry.Owner(entry.Partition(keys[i])) {
			keys[i] = append(keys[i], 'x')
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	if callers == 1 {
		for range b.N {
			if _, err := entry.Call(ctx, keys[0], "inc", nil); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	var next atomic.Int64
	b.SetParallelism((callers + 1) / 2)
	b.RunParallel(func(pb *testing.PB) {
		key := keys[int(next.Add(1)-1)%callers]
		for pb.Next() {
			if _, err := entry.Call(ctx, key, "inc", nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkCall(b *testing.B) {
	for _, rf := range []int{1, 3} {
		for _, forwarded := range []bool{false, true} {
			for _, callers := range []int{1, 64} {
				for _, hot := range []bool{false, true} {
					if callers == 1 && hot {
						continue
					}
					name := fmt.Sprintf("rf=%d/local/callers=%d", rf, callers)
					if forwarded {
						name = fmt.Sprintf("rf=%d/forwarded/callers=%d", rf, callers)
					}
					if hot {
						name += "/hotkey"
					}
					b.Run(name, func(b *testing.B) { benchmarkCalls(b, rf, forwarded, callers, hot, nil) })
				}
			}
		}
	}
}

// BenchmarkCallOverTLS is BenchmarkCall's forwarded calls with replication
// factor 1 on RPC connections of mutual TLS (Config.TLS): what TLS costs a
// forwarded call.
func BenchmarkCallOverTLS(b *testing.B) {
	ca := newTestCA(b, "cluster")
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("rf=1/forwarded/callers=%d", callers), func(b *testing.B) {
			benchmarkCalls(b, 1, true, callers, false, func(n *Node) { n.cfg.TLS = mutualTLS(b, ca, ca) })
		})
	}
}
