package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// A scenario is a nemesis: the faults one run injects while the traffic
// runs.
type scenario func(f *faults) error

// scenarioNames are the nemeses "all" runs, in report order.
var scenarioNames = []string{"pause", "kill", "partition", "churn", "slow", "bounce", "combined"}

// wipeNames are the nemeses that lose a data directory: they run only
// when named, and only with replicas (the short profile runs "all" with
// replication factor 1, where the loss is expected).
var wipeNames = []string{"wipe", "wipe-fast"}

// scenarios are the nemeses by name. Each fault is a step (faults.step):
// a run is valid only if each step bit.
var scenarios = map[string]scenario{
	// pause: SIGSTOP of a busy owner past failure detection (the others
	// fail to acquire its partitions: with RF=1 they need its promise),
	// then handlers paused in their critical section while a joining node
	// takes their partitions from their live owners (the commits are
	// fenced; without fencing they are acknowledged and lost).
	"pause": func(f *faults) error {
		if err := f.step("SIGSTOP", f.processPause); err != nil {
			return err
		}
		return f.step("join with paused handlers", f.joinAndSettle)
	},
	// kill: kill -9 of a busy owner, restarted on its data directory after
	// failure detection.
	"kill": func(f *faults) error { return f.step("SIGKILL", f.crash) },
	// partition: a minority cut off from the majority on gossip and RPC,
	// a node joining the majority meanwhile, handoffs after healing.
	"partition": func(f *faults) error { return f.step("network split", f.partition) },
	// churn: a join, a graceful leave with paused handlers, a rolling
	// restart of every node (which need not bite: it checks that restarts
	// under traffic lose nothing).
	"churn": func(f *faults) error {
		if err := f.step("join with paused handlers", f.joinAndSettle); err != nil {
			return err
		}
		if err := f.step("leave with paused handlers", f.leaveNewest); err != nil {
			return err
		}
		return f.rollingRestart()
	},
	// slow: delay and drop on every link during a paused handoff.
	"slow": func(f *faults) error { return f.step("slow links", f.slowLinks) },
	// bounce: partitions move away and back while their handlers are
	// paused; the regression scenario of the router's overlay bug.
	"bounce": func(f *faults) error { return f.step("bounce", f.bounce) },
	// wipe: kill -9 of a busy owner whose data directory is then deleted,
	// restarted empty under its name after failure detection; once every
	// node reports itself settled (every copy back), the same on another
	// node.
	"wipe": wipeTwice(outage),
	// wipe-fast: wipe with the node back before failure detection, so
	// that no member change prompts new claims.
	"wipe-fast": wipeTwice(quickRestart),
	// combined: three of the faults above, drawn by the seed.
	"combined": func(f *faults) error {
		moves := []struct {
			name  string
			fault func() error
		}{
			{"SIGSTOP", f.processPause},
			{"SIGKILL", f.crash}, {"leave with paused handlers", f.pausedHandoff},
			{"network split", f.partition}, {"slow links", f.slowLinks},
		}
		for range 3 {
			m := moves[f.rng.IntN(len(moves))]
			if err := f.step(m.name, m.fault); err != nil {
				return err
			}
		}
		return nil
	},
}

// wipeTwice returns a wipe scenario: two rounds of faults.wipe, each node
// down for down, the second on another node.
func wipeTwice(down time.Duration) scenario {
	return func(f *faults) error {
		var last *node
		for i := range 2 {
			err := f.step(fmt.Sprintf("lost directory %d", i+1), func() error {
				n, err := f.wipe(last, down)
				last = n
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// lookupScenarios returns the scenarios of a comma-separated list, or
// scenarioNames for "all", refusing the wipe scenarios without replicas
// (rf 1).
func lookupScenarios(list string, rf int) ([]string, error) {
	if list == "all" {
		return scenarioNames, nil
	}
	names := strings.Split(list, ",")
	for _, name := range names {
		if _, ok := scenarios[name]; !ok {
			return nil, fmt.Errorf("unknown scenario %q (want one of %v, with replicas %v, a comma-separated list, or all)", name, scenarioNames, wipeNames)
		}
		if slices.Contains(wipeNames, name) && rf <= 1 {
			return nil, fmt.Errorf("scenario %s needs replicas (-rf 3 or 5): with -rf %d a lost data directory loses its partitions' data, and the lost-update check would report it", name, rf)
		}
	}
	return names, nil
}
