package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// printTable writes results as a Markdown table.
func printTable(w io.Writer, results []result) {
	fmt.Fprintln(w, "| system | workload | clients | ops/s | p50 µs | p99 µs | p99.9 µs | lost updates | errors |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		name := r.System
		if !r.Durable {
			name += " (not durable)"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %.0f | %.0f | %.0f | %.0f | %d | %d |\n",
			name, r.Workload, r.Clients, r.OpsPerSec, r.P50, r.P99, r.P999, r.LostUpdates, r.Errors)
	}
}

// writeJSON writes results to path as an indented JSON array.
func writeJSON(path string, results []result) error {
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
