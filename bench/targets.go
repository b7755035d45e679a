package main

import (
	"fmt"
	"io"
	"math"
)

// find returns the result of system in cell (workload, clients).
func find(results []result, system, workload string, clients int) (result, bool) {
	for _, r := range results {
		if r.System == system && r.Workload == workload && r.Clients == clients {
			return r, true
		}
	}
	return result{}, false
}

// best returns the highest throughput and the lowest p99 among the given
// systems' results in one cell: a baseline at its most favourable.
func best(results []result, systems []string, workload string, clients int) (ops, p99 float64, ok bool) {
	p99 = math.Inf(1)
	for _, s := range systems {
		if r, found := find(results, s, workload, clients); found && r.Acked > 0 {
			ops, p99, ok = max(ops, r.OpsPerSec), min(p99, r.P99), true
		}
	}
	return ops, p99, ok
}

// printTargets checks the targets against results and prints one
// line per check. It returns false if this library lost an update or
// applied one twice: the correctness checks, where the others measure the
// machine.
func printTargets(w io.Writer, results []result, fl floor) (safe bool) {
	fmt.Fprintln(w, "\nTargets (ratios in this run):")
	mark := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	baselines := []struct {
		name    string
		systems []string
		factor  float64
	}{
		{rowEtcd, []string{rowEtcd}, 20},
		{"redis-lock (best durable)", []string{rowRedis, rowRedisTight}, 10},
		{rowPgRowLock, []string{rowPgRowLock}, 10},
	}
	for _, row := range targetRows {
		for _, wl := range []string{workloadZipf, workloadHotKey} {
			sw, ok := find(results, row, wl, 64)
			if !ok {
				continue
			}
			for _, b := range baselines {
				ops, p99, ok := best(results, b.systems, wl, 64)
				if !ok {
					fmt.Fprintf(w, "- %s, %s @64 vs %s: not run\n", row, wl, b.name)
					continue
				}
				ratio := sw.OpsPerSec / max(ops, 1e-9)
				fmt.Fprintf(w, "- %s, %s @64 throughput vs %s: %.1fx (target >= %.0fx): %s\n", row, wl, b.name, ratio, b.factor, mark(ratio >= b.factor))
				fmt.Fprintf(w, "- %s, %s @64 p99 vs %s: %.0fµs vs %.0fµs = %.3f (target <= 0.1): %s\n", row, wl, b.name, sw.P99, p99, sw.P99/p99, mark(sw.P99 <= p99/10))
			}
		}
	}
	floorUs, replicatedUs := micros(fl.total()), micros(fl.replicated())
	for _, row := range targetRows {
		for _, wl := range []string{workloadUniform, workloadZipf, workloadHotKey} {
			if r, ok := find(results, row, wl, 1); ok {
				// The cell's clients enter at random nodes, the owner among
				// them; the target is about the calls that were forwarded.
				if r.ForwardedP50 == 0 {
					fmt.Fprintf(w, "- %s, single client, %s: no forwarded call was acknowledged: MISSED\n", row, wl)
					continue
				}
				r.P50 = r.ForwardedP50
				x := r.P50 / floorUs
				fmt.Fprintf(w, "- %s, single client, %s: forwarded durable call p50 %.0fµs = %.2fx the floor of %.0fµs (target <= 2x): %s", row, wl, r.P50, x, floorUs, mark(x <= 2))
				if row == rowSingleWriterRF3 {
					fmt.Fprintf(w, "; %.2fx the replicated floor of %.0fµs on this one disk", r.P50/replicatedUs, replicatedUs)
				}
				routedUs := micros(fl.routed)
				if r.FloorUs > 0 {
					fmt.Fprintf(w, "; probed again just before the cell, the floor was %.0fµs (%.2fx)", r.FloorUs, r.P50/r.FloorUs)
					if row == rowSingleWriterRF3 {
						fmt.Fprintf(w, " and the replicated floor %.0fµs (%.2fx)", r.ReplicatedFloorUs, r.P50/r.ReplicatedFloorUs)
					}
					routedUs = r.RoutedProbeUs
				}
				if row == rowSingleWriter {
					fmt.Fprintf(w, "; for information, %.2fx a routed write made as one operation (%.0fµs)", r.P50/routedUs, routedUs)
				}
				fmt.Fprintln(w)
			}
		}
	}
	var lost, duplicated, uncertain uint64
	cells := 0
	for _, r := range results {
		if r.System == rowSingleWriter || r.System == rowSingleWriterOwner || r.System == rowSingleWriterRF3 {
			lost += r.LostUpdates
			duplicated += r.Duplicated
			uncertain += r.UncertainKeys
			cells++
		}
	}
	fmt.Fprintf(w, "- lost updates of this library over %d cells, pause scenario included: %d (target 0): %s", cells, lost, mark(lost == 0))
	fmt.Fprintf(w, "; increments applied twice: %d (target 0): %s; keys where an increment of unknown outcome could hide a loss: %d\n", duplicated, mark(duplicated == 0), uncertain)
	return lost == 0 && duplicated == 0
}
