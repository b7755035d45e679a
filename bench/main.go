// Command bench is the proof the library's users ask for: on their own
// machine and in one run, it compares this library with the distributed
// locks it replaces, on the same job, for speed and for safety.
//
// Each system increments per-key counters (8-byte keys, 256-byte values),
// durably, under its own mutual exclusion: a 3-node singlewriter cluster
// on loopback (clients entering at random nodes, and at the owner), an
// etcd server embedded in process with concurrency.Mutex, a redis-server
// with SET NX PX locks, and a private PostgreSQL with SELECT ... FOR
// UPDATE. For every workload and client count it reports throughput,
// latency percentiles and lost updates, then runs a pause scenario where a
// client stalls inside its critical section for longer than its lock's TTL.
//
//	go run .                # the full sweep, 10-20 minutes
//	go run . -quick         # a smoke test, under 3 minutes
//
// It exits non-zero if this library loses an acknowledged update.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
	"time"

	"github.com/singlewriter/singlewriter/internal/pgserver"
)

// options are the command's flags.
type options struct {
	quick      bool
	out        string
	chart      string
	duration   time.Duration
	timeout    time.Duration
	rounds     int
	systems    string
	workloads  string
	clients    string
	cpuProfile string
	memProfile string
	trace      string
}

func main() {
	var o options
	flag.BoolVar(&o.quick, "quick", false, "smoke test: fewer cells, 1s each (under 3 minutes)")
	flag.StringVar(&o.out, "out", "results.json", "write the cells as a JSON array to `FILE`")
	flag.StringVar(&o.chart, "chart", "results.png", "write the throughput and p99 chart to `FILE` (PNG)")
	flag.DurationVar(&o.duration, "duration", 0, "measuring time per cell (default 4s, 1s with -quick)")
	flag.DurationVar(&o.timeout, "timeout", 0, "deadline of each increment (default 5s, 2s with -quick)")
	flag.IntVar(&o.rounds, "rounds", 0, "pauses per system in the pause scenario (default 3, 1 with -quick)")
	flag.StringVar(&o.systems, "systems", "", "comma-separated rows to run (default all)")
	flag.StringVar(&o.workloads, "workloads", "", "comma-separated workloads to run, of uniform, zipf, hotkey, pause (default all; zipf,hotkey,pause with -quick)")
	flag.StringVar(&o.clients, "clients", "", "comma-separated client counts (default 1,8,64,256; 1,64 with -quick)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE`")
	flag.StringVar(&o.memProfile, "memprofile", "", "write a profile of the whole run's allocations to `FILE`")
	flag.StringVar(&o.trace, "trace", "", "write an execution trace of the whole run to `FILE` (go tool trace)")
	flag.Parse()
	os.Exit(run(o))
}

// run runs the bench and returns the exit code. Every server, process and
// directory it starts is undone before it returns, Ctrl-C included.
func run(o options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cl := &cleanups{}
	defer cl.run()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return fail(err)
		}
		pprof.StartCPUProfile(f)
		cl.push("cpu profile", func() error { pprof.StopCPUProfile(); return f.Close() })
	}
	if o.trace != "" {
		f, err := os.Create(o.trace)
		if err != nil {
			return fail(err)
		}
		if err := trace.Start(f); err != nil {
			return fail(errors.Join(err, f.Close()))
		}
		cl.push("execution trace", func() error { trace.Stop(); return f.Close() })
	}
	if o.memProfile != "" {
		f, err := os.Create(o.memProfile)
		if err != nil {
			return fail(err)
		}
		cl.push("allocation profile", func() error {
			err := pprof.Lookup("allocs").WriteTo(f, 0)
			return errors.Join(err, f.Close())
		})
	}
	p, err := newPlan(o)
	if err != nil {
		return fail(err)
	}
	dir, err := os.MkdirTemp("", "singlewriter-bench-")
	if err != nil {
		return fail(err)
	}
	cl.push("temporary directory", func() error { return os.RemoveAll(dir) })
	// Servers that run as another user (PostgreSQL as root) need to
	// traverse it.
	if err := os.Chmod(dir, 0o711); err != nil {
		return fail(err)
	}
	fl, err := probeFloor(dir, 500)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("Floor of one routed durable write on this machine: %v\n\n", fl)
	e := env{cl: cl, dir: dir}
	e.redisBin, _ = findBinary("redis-server")
	e.pgBinDir, _ = pgserver.BinDir()
	rs, skipped := p.selectRows(e, o.systems)
	for _, s := range skipped {
		fmt.Fprintln(os.Stderr, "bench:", s)
	}
	results, err := p.execute(ctx, e, rs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	if len(results) == 0 {
		return 1
	}
	printTable(os.Stdout, results)
	if werr := writeJSON(o.out, results); werr != nil {
		fmt.Fprintln(os.Stderr, "bench:", werr)
	}
	if cerr := drawChart(o.chart, results); cerr != nil {
		fmt.Fprintln(os.Stderr, "bench:", cerr)
	}
	fmt.Printf("\nJSON: %s, chart: %s\n", o.out, o.chart)
	safe := printTargets(os.Stdout, results, fl)
	if err != nil || !safe {
		return 1
	}
	return 0
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "bench:", err)
	return 1
}
