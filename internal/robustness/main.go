// Command robustness is the end-to-end robustness harness: real node
// processes (internal/robustness/node) on 127.0.0.0/8 addresses, traffic
// from several clients with unique written values, a nemesis per scenario
// (process pause, kill, network partition, churn, slow links, all
// combined; and wipe and wipe-fast, the loss of a data directory, which
// run only when named and need replicas), and checkers (porcupine
// linearizability per key, no acknowledged write lost, epochs per
// partition, convergence after healing). It is modeled on etcd's
// robustness tests and Jepsen's nemeses.
//
// The long profile:
//
//	go run ./internal/robustness -runs 100 -out results.json
//	go run ./internal/robustness -scenario pause -runs 20 -nodes 5 -parallel 3
//	go run ./internal/robustness -scenario wipe -rf 3 -nodes 5 -runs 20
//
// It prints one row per scenario (runs, valid runs, operations,
// violations, unavailable seconds) and writes the rows as a JSON array to
// -out. A run is valid only if the traffic reached its minimum rate before
// the faults and each fault bit while it ran (a fenced write, a refused
// promise, a failed acquire or a drain timeout, or, with replicas, a
// partition taken over while a node was out: faults.step). Failing and
// invalid runs keep their
// directory under -dir: history, node logs, data directories and, for a
// non-linearizable history, porcupine's visualization. The short profile
// runs under go test.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"text/tabwriter"
	"time"
)

func main() {
	var (
		runs     = flag.Int("runs", 10, "runs per scenario")
		duration = flag.Duration("duration", 0, "stop starting runs after this long (0: no limit)")
		out      = flag.String("out", "robustness.json", "where to write the table as JSON")
		scenario = flag.String("scenario", "all", "scenarios to run, comma-separated, or all")
		nodes    = flag.Int("nodes", 3, "nodes per cluster")
		rf       = flag.Int("rf", 3, "the nodes' replication factor (1, 3 or 5; 3 is the library's default)")
		parallel = flag.Int("parallel", 2, "runs at once")
		dir      = flag.String("dir", "", "directory for the runs (default: a new temporary one)")
		noFence  = flag.Bool("nofencing", false, "control: build the nodes with the epoch check switched off")
		seed     = flag.Uint64("seed", 1, "seed of the first run; run i uses seed+i")
		keep     = flag.Bool("keep", false, "keep every run's directory, not only failing ones")
	)
	flag.Parse()
	if err := profile(*runs, *duration, *out, *scenario, *nodes, *rf, *parallel, *dir, *noFence, *seed, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "robustness:", err)
		os.Exit(1)
	}
}

func profile(runs int, duration time.Duration, out, scenario string, nodes, rf, parallel int, dir string, noFence bool, seed uint64, keep bool) error {
	names, err := lookupScenarios(scenario, rf)
	if err != nil {
		return err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "robustness-"); err != nil {
			return err
		}
	}
	bin, err := buildNode(dir, noFence)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "runs under %s\n", dir)
	deadline := time.Now().Add(duration)
	var cfgs []runConfig
	for i := range runs {
		for _, name := range names {
			cfgs = append(cfgs, runConfig{scenario: name, seed: seed + uint64(i), nodes: nodes, rf: rf, bin: bin, out: dir, keep: keep})
		}
	}
	log, err := os.Create(filepath.Join(dir, "runs.jsonl"))
	if err != nil {
		return err
	}
	defer log.Close()
	results := runAll(cfgs, parallel, func(r result) bool {
		json.NewEncoder(log).Encode(r)
		fmt.Fprintf(os.Stderr, "%-9s seed %-4d valid=%-5v ops=%-5d bit=%-3d fenced=%-3d refused=%-3d repeated=%-3d violations=%d unavailable=%.1fs took=%.0fs %s\n",
			r.Scenario, r.Seed, r.Valid, r.Ops, r.Bit, r.Fenced, r.Refused, r.Repeated, len(r.Violations), r.Unavailable, r.Took, r.Invalid)
		for _, v := range r.Violations {
			fmt.Fprintf(os.Stderr, "    %s (%s)\n", v, r.Dir)
		}
		return duration == 0 || time.Now().Before(deadline)
	})
	rows := summarize(names, results)
	printTable(os.Stdout, rows)
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// buildNode builds the node program into dir, with the nofencing tag for
// the control.
func buildNode(dir string, noFence bool) (string, error) {
	bin := filepath.Join(dir, "node")
	args := []string{"build", "-o", bin}
	if noFence {
		bin += "-nofencing"
		args = []string{"build", "-tags", "nofencing", "-o", bin}
	}
	cmd := exec.Command("go", append(args, "github.com/singlewriter/singlewriter/internal/robustness/node")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the node program: %v: %s", err, b)
	}
	return bin, nil
}

// runAll runs cfgs, parallel at a time, handing each result to done; it
// starts no new run once done returns false.
func runAll(cfgs []runConfig, parallel int, done func(result) bool) []result {
	var (
		mu      sync.Mutex
		results []result
		more    = true
		wg      sync.WaitGroup
	)
	jobs := make(chan runConfig)
	for range max(parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cfg := range jobs {
				r := execute(cfg)
				mu.Lock()
				results = append(results, r)
				more = done(r) && more
				mu.Unlock()
			}
		}()
	}
	for _, cfg := range cfgs {
		mu.Lock()
		ok := more
		mu.Unlock()
		if !ok {
			break
		}
		jobs <- cfg
	}
	close(jobs)
	wg.Wait()
	return results
}

// row is one scenario's line of the report.
type row struct {
	Scenario    string  `json:"scenario"`
	Runs        int     `json:"runs"`
	ValidRuns   int     `json:"valid_runs"`
	Ops         int     `json:"ops"`
	Violations  int     `json:"violations"`
	Unavailable float64 `json:"unavailable_s"`
}

// summarize adds up the results per scenario. Violations count in every
// run, valid or not: an invalid run proves nothing, but a violation it
// found is still a bug.
func summarize(names []string, results []result) []row {
	var rows []row
	for _, name := range names {
		r := row{Scenario: name}
		for _, res := range results {
			if res.Scenario != name {
				continue
			}
			r.Runs++
			if res.Valid {
				r.ValidRuns++
			}
			r.Ops += res.Ops
			r.Violations += len(res.Violations)
			r.Unavailable += res.Unavailable
		}
		rows = append(rows, r)
	}
	return rows
}

func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\truns\tvalid runs\toperations\tviolations\tunavailable s\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t\n", r.Scenario, r.Runs, r.ValidRuns, r.Ops, r.Violations, r.Unavailable)
	}
	tw.Flush()
}
