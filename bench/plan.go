package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// zipfTheta is the Zipf exponent of the skewed workload (YCSB's default).
const zipfTheta = 0.99

// plan is the sweep: which cells every row runs.
type plan struct {
	workloads []string
	clients   []int
	// pause runs the pause scenario.
	pause    bool
	duration time.Duration
	timeout  time.Duration
	rounds   int
	zipf     *zipfTable
}

// newPlan returns the full sweep, or the smoke test with -quick, with the
// flags' overrides.
func newPlan(o options) (*plan, error) {
	p := &plan{
		workloads: []string{workloadUniform, workloadZipf, workloadHotKey},
		clients:   []int{1, 8, 64, 256},
		pause:     true,
		duration:  4 * time.Second,
		timeout:   5 * time.Second,
		rounds:    3,
		zipf:      newZipfTable(keySpace, zipfTheta),
	}
	if o.quick {
		p.workloads = []string{workloadZipf, workloadHotKey}
		p.clients = []int{1, 64}
		p.duration, p.timeout, p.rounds = time.Second, 2*time.Second, 1
	}
	if o.duration > 0 {
		p.duration = o.duration
	}
	if o.timeout > 0 {
		p.timeout = o.timeout
	}
	if o.rounds > 0 {
		p.rounds = o.rounds
	}
	if o.workloads != "" {
		p.workloads, p.pause = nil, false
		for _, w := range strings.Split(o.workloads, ",") {
			switch w {
			case workloadPause:
				p.pause = true
			case workloadUniform, workloadZipf, workloadHotKey:
				p.workloads = append(p.workloads, w)
			default:
				return nil, fmt.Errorf("unknown workload %q", w)
			}
		}
	}
	if o.clients != "" {
		p.clients = nil
		for _, c := range strings.Split(o.clients, ",") {
			n, err := strconv.Atoi(c)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("bad client count %q", c)
			}
			p.clients = append(p.clients, n)
		}
	}
	return p, nil
}

// selectRows returns the rows to run: those named in only (all if empty)
// whose binaries exist, and a message for each row skipped for a missing
// binary.
func (p *plan) selectRows(e env, only string) (run []row, skipped []string) {
	var names []string
	if only != "" {
		names = strings.Split(only, ",")
	}
	for _, r := range rows() {
		if names != nil && !slices.Contains(names, r.name) {
			continue
		}
		missing := (r.needs == "redis-server" && e.redisBin == "") || (r.needs == "postgres" && e.pgBinDir == "")
		if missing {
			skipped = append(skipped, fmt.Sprintf("skipping %s: %s not found; install it with %s", r.name, r.needs, installHints[r.needs]))
			continue
		}
		run = append(run, r)
	}
	return run, skipped
}

// steps returns the number of cells and pause scenarios of rs.
func (p *plan) steps(rs []row) int {
	n := 0
	for _, r := range rs {
		if r.cells {
			n += len(p.workloads) * len(p.clients)
		}
		if p.pause && r.pause > 0 {
			n++
		}
	}
	return n
}

// execute runs every row in turn: it starts the row's system, runs its
// cells and its pause scenario, and stops it. It returns the results so
// far and the first error of a row that must run (this library's and
// etcd's); the others' failures are reported and skipped.
func (p *plan) execute(ctx context.Context, e env, rs []row) ([]result, error) {
	bar := progressbar.NewOptions(p.steps(rs),
		progressbar.OptionSetWriter(os.Stderr),
		// Redrawn with carriage returns: for a terminal, noise in a log.
		progressbar.OptionSetVisibility(isTerminal(os.Stderr)),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionClearOnFinish(),
	)
	defer bar.Finish()
	var results []result
	var id uint16
	for _, r := range rs {
		out, err := p.runRow(ctx, e, r, &id, bar)
		results = append(results, out...)
		if err != nil {
			err = fmt.Errorf("%s: %w", r.name, err)
			if r.needs == "" || ctx.Err() != nil {
				return results, err
			}
			fmt.Fprintln(os.Stderr, "\nbench:", err, "(skipped)")
		}
	}
	return results, nil
}

// runRow runs one row's cells and pause scenario on a system of its own.
func (p *plan) runRow(ctx context.Context, e env, r row, id *uint16, bar *progressbar.ProgressBar) ([]result, error) {
	bar.Describe(r.name + ": starting")
	sys, err := r.start(ctx, e)
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	var out []result
	label := func(res result, w string, clients int) result {
		res.System, res.Workload, res.Clients, res.Durable = r.name, w, clients, r.durable
		return res
	}
	if r.cells {
		for _, w := range p.workloads {
			for _, c := range p.clients {
				*id++
				bar.Describe(fmt.Sprintf("%s %s x%d", r.name, w, c))
				var fl floor
				if c == 1 && slices.Contains(targetRows, r.name) {
					if fl, err = probeFloor(e.dir, cellProbes); err != nil {
						return out, err
					}
				}
				res, err := runCell(ctx, sys, cell{id: *id, workload: w, clients: c, duration: p.duration, timeout: p.timeout, zipf: p.zipf})
				if err != nil {
					return out, err
				}
				if fl.writes != nil {
					res.FloorUs, res.ReplicatedFloorUs, res.RoutedProbeUs = micros(fl.total()), micros(fl.replicated()), micros(fl.routed)
				}
				out = append(out, label(res, w, c))
				bar.Add(1)
			}
		}
	}
	if p.pause && r.pause > 0 {
		*id++
		bar.Describe(r.name + ": pause")
		res, err := runPause(ctx, sys, pauseScenario{id: *id, pause: r.pause, rounds: p.rounds, timeout: p.timeout})
		if err != nil {
			return out, err
		}
		out = append(out, label(res, workloadPause, pauseBackground+1))
		bar.Add(1)
	}
	return out, nil
}

// isTerminal reports whether f is a character device, a terminal.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
