package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sync/errgroup"
)

// result is one cell of the output: the JSON object, and a row of the
// table.
type result struct {
	System      string  `json:"system"`
	Workload    string  `json:"workload"`
	Clients     int     `json:"clients"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	P50         float64 `json:"p50_us"`
	P99         float64 `json:"p99_us"`
	P999        float64 `json:"p999_us"`
	LostUpdates uint64  `json:"lost_updates"`
	// Acked is the number of acknowledged increments.
	Acked uint64 `json:"acked"`
	// Errors is the number of increments that failed or timed out.
	Errors uint64 `json:"errors"`
	// Unacked counts increments found in the store but never
	// acknowledged (their client gave up); not losses.
	Unacked uint64 `json:"unacked_writes"`
	// Duplicated counts increments stored beyond every increment made:
	// applied twice.
	Duplicated uint64 `json:"duplicated"`
	// UncertainKeys counts the keys with increments of unknown outcome, on
	// which a stored one could hide an acknowledged one lost.
	UncertainKeys uint64 `json:"uncertain_keys"`
	Durable       bool   `json:"durable"`
	FirstError    string `json:"first_error,omitempty"`
	// FloorUs and ReplicatedFloorUs are the floors (see floor), and
	// RoutedProbeUs the probe of a routed write made as one operation
	// (floor.routed, for information), probed just before a single-client
	// cell of a target row: the disk's speed drifts between the run's
	// first probe and the cell.
	FloorUs float64 `json:"floor_us,omitempty"`
	// ForwardedP50 is the p50 of the acknowledged calls that entered at a
	// node other than their key's owner, for systems that say so
	// (forwarder): the single-client target is about those.
	ForwardedP50      float64 `json:"forwarded_p50_us,omitempty"`
	ReplicatedFloorUs float64 `json:"replicated_floor_us,omitempty"`
	RoutedProbeUs     float64 `json:"routed_probe_us,omitempty"`
}

// tally is what one client measured.
type tally struct {
	hist *hdrhistogram.Histogram
	// forwarded holds the latencies of the calls a forwarder forwarded.
	forwarded *hdrhistogram.Histogram
	ledger    ledger
	errors    uint64
	firstErr  error
}

func newTally() *tally {
	// Microseconds, from 1µs to 2 minutes, 3 significant digits.
	return &tally{hist: newHistogram(), forwarded: newHistogram(), ledger: ledger{}}
}

func newHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(1, 120_000_000, 3) }

// record accounts for one increment of key index i.
func (t *tally) record(i uint64, took time.Duration, forwarded bool, err error) {
	if err != nil {
		t.errors++
		if t.firstErr == nil {
			t.firstErr = err
		}
		t.ledger.fail(i)
		return
	}
	t.ledger.ack(i)
	t.hist.RecordValue(max(1, took.Microseconds()))
	if forwarded {
		t.forwarded.RecordValue(max(1, took.Microseconds()))
	}
}

// cell describes one measurement.
type cell struct {
	id       uint16
	workload string
	clients  int
	duration time.Duration
	// timeout is the deadline of each increment.
	timeout time.Duration
	zipf    *zipfTable
}

// runCell runs c.clients clients against sys, each incrementing keys of
// c.workload back to back for c.duration, then checks the stored counters
// against the acknowledged increments.
func runCell(ctx context.Context, sys System, c cell) (result, error) {
	if err := prepare(ctx, sys, c.id, keysOf(c.workload)); err != nil {
		return result{}, err
	}
	clients, err := openClients(ctx, sys, c.clients)
	if err != nil {
		return result{}, err
	}
	defer closeClients(clients)
	tallies := make([]*tally, c.clients)
	start := time.Now()
	stop := start.Add(c.duration)
	var wg sync.WaitGroup
	for w, cli := range clients {
		gen, err := newGenerator(c.workload, uint64(c.id)<<32|uint64(w), c.zipf)
		if err != nil {
			return result{}, err
		}
		t := newTally()
		tallies[w] = t
		fw, _ := cli.(forwarder)
		wg.Go(func() {
			for time.Now().Before(stop) && ctx.Err() == nil {
				i := gen.next()
				octx, cancel := context.WithTimeout(ctx, c.timeout)
				t0 := time.Now()
				err := cli.Incr(octx, key(c.id, i), 0)
				took := time.Since(t0)
				t.record(i, took, fw != nil && fw.Forwarded(), err)
				cancel()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	return summarize(ctx, sys, c.id, tallies, elapsed)
}

// summarize merges the clients' tallies and audits the stored counters.
func summarize(ctx context.Context, sys System, id uint16, tallies []*tally, elapsed time.Duration) (result, error) {
	all := newTally()
	for _, t := range tallies {
		all.hist.Merge(t.hist)
		all.forwarded.Merge(t.forwarded)
		all.ledger.merge(t.ledger)
		all.errors += t.errors
		if all.firstErr == nil {
			all.firstErr = t.firstErr
		}
	}
	idx := all.ledger.indexes()
	keys := make([][]byte, len(idx))
	for j, i := range idx {
		keys[j] = key(id, i)
	}
	vctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	final, err := sys.Values(vctx, keys)
	if err != nil {
		return result{}, fmt.Errorf("read final counters: %w", err)
	}
	a := all.ledger.audit(idx, final)
	r := result{
		OpsPerSec:     float64(all.hist.TotalCount()) / elapsed.Seconds(),
		P50:           float64(all.hist.ValueAtQuantile(50)),
		P99:           float64(all.hist.ValueAtQuantile(99)),
		P999:          float64(all.hist.ValueAtQuantile(99.9)),
		LostUpdates:   a.lost,
		Acked:         uint64(all.hist.TotalCount()),
		Errors:        all.errors,
		Unacked:       a.unacked,
		Duplicated:    a.duplicated,
		UncertainKeys: a.uncertainKeys,
	}
	if all.forwarded.TotalCount() > 0 {
		r.ForwardedP50 = float64(all.forwarded.ValueAtQuantile(50))
	}
	if all.firstErr != nil {
		r.FirstError = all.firstErr.Error()
	}
	return r, nil
}

// prepare creates the cell's n keys if the system needs rows to exist.
func prepare(ctx context.Context, sys System, id uint16, n uint64) error {
	p, ok := sys.(preparer)
	if !ok {
		return nil
	}
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = key(id, uint64(i))
	}
	return p.Prepare(ctx, keys)
}

// openClients opens n clients, 16 at a time.
func openClients(ctx context.Context, sys System, n int) ([]Client, error) {
	clients := make([]Client, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range clients {
		g.Go(func() error {
			c, err := sys.Client(gctx)
			clients[i] = c
			return err
		})
	}
	if err := g.Wait(); err != nil {
		closeClients(clients)
		return nil, fmt.Errorf("open clients: %w", err)
	}
	return clients, nil
}

func closeClients(clients []Client) {
	for _, c := range clients {
		if c != nil {
			c.Close()
		}
	}
}
