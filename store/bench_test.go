package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkCommit measures one-write commits with real fsync, from 1 and
// from 64 concurrent callers; txs/op shows how many callers share one
// transaction (and one fsync).
func BenchmarkCommit(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) { benchCommit(b, callers) })
	}
}

// BenchmarkCommitPartitions measures one-write commits with real fsync from
// 64 callers, each writing its own partition with a dedup record: a group
// dirties pages of many partitions (meta, data and responses).
func BenchmarkCommitPartitions(b *testing.B) {
	benchCommitOver(b, 64, 64)
}

// benchCommit runs b.N commits spread over callers goroutines.
func benchCommit(b *testing.B, callers int) {
	benchCommitOver(b, callers, 8)
}

// benchCommitOver runs b.N commits spread over callers goroutines, caller w
// writing partition w % partitions; with more than 8 partitions each batch
// also stores a dedup record, as the router's do.
func benchCommitOver(b *testing.B, callers, partitions int) {
	s, err := Open(Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	value := make([]byte, 100)
	var next atomic.Int64
	txs := s.txs.Load()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				key := binary.BigEndian.AppendUint64(nil, uint64(i))
				batch := &Batch{Partition: w % partitions, Writes: []KV{{Key: key, Value: value}}}
				if partitions > 8 {
					batch.RequestID, batch.Response = key, value[:16]
				}
				if err := s.Commit(ctx, batch); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(s.txs.Load()-txs)/float64(b.N), "txs/op")
}

// BenchmarkFsync measures a raw 4 KiB write plus fsync in the same kind of
// directory, for scale: a lone Commit cannot beat it.
func BenchmarkFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	for b.Loop() {
		if _, err := f.WriteAt(page, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}
