package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
	"github.com/singlewriter/singlewriter/ring"
)

const (
	// warmup is the traffic before the first fault, over which the rate
	// is measured.
	warmup = 1500 * time.Millisecond
	// minRate is the rate (definite operations per second) the traffic
	// must reach before the fault for the run to be valid.
	minRate = 20
	// cooldown is the traffic after healing, before it stops.
	cooldown = time.Second
)

// runConfig is one run: a scenario on a fresh cluster with a seed.
type runConfig struct {
	scenario string
	seed     uint64
	nodes    int
	// rf is the nodes' replication factor.
	rf int
	// bin is the node program; out is where the run's directory goes.
	bin, out string
	// keep keeps the run's directory even when it passes.
	keep bool
}

// result is a run's outcome.
type result struct {
	Scenario string  `json:"scenario"`
	Seed     uint64  `json:"seed"`
	Valid    bool    `json:"valid"`
	Invalid  string  `json:"invalid,omitempty"`
	Ops      int     `json:"ops"`
	Rate     float64 `json:"rate"`
	// Bit is the sum of the nodes' fenced commits, refused prepares,
	// failed acquires and drain timeouts, and with replicas of the
	// partitions claimed anew while a node was out (takenOver).
	Bit    uint64 `json:"bit"`
	Fenced uint64 `json:"fenced"`
	// Refused counts the calls under a reused request ID that were
	// refused (see op.Reused), Repeated the repeats answered (op.Repeat).
	Refused     int      `json:"refused"`
	Repeated    int      `json:"repeated"`
	Violations  []string `json:"violations,omitempty"`
	Unavailable float64  `json:"unavailable_s"`
	Dir         string   `json:"dir,omitempty"`
	Took        float64  `json:"took_s"`
}

// execute performs one run. Its directory holds the node logs and data
// directories, and, when kept, the history and the checkers' findings;
// it is removed when the run is valid and clean unless cfg.keep.
func execute(cfg runConfig) (res result) {
	began := time.Now()
	dir := filepath.Join(cfg.out, fmt.Sprintf("%s-%d", cfg.scenario, cfg.seed))
	os.RemoveAll(dir)
	res = result{Scenario: cfg.scenario, Seed: cfg.seed, Dir: dir}
	invalid := func(format string, args ...any) result {
		res.Invalid = fmt.Sprintf(format, args...)
		return res
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return invalid("%v", err)
	}
	progress, _ := os.Create(filepath.Join(dir, "nemesis.log"))
	defer progress.Close()
	logf := func(format string, args ...any) {
		fmt.Fprintf(progress, "%8.3fs "+format+"\n", append([]any{time.Since(began).Seconds()}, args...)...)
	}
	c := newCluster(dir, cfg.bin, cfg.seed, cfg.rf)
	defer func() {
		c.close()
		res.Took = time.Since(began).Seconds()
		if res.Valid && len(res.Violations) == 0 && !cfg.keep {
			os.RemoveAll(dir)
			res.Dir = ""
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for range cfg.nodes {
		if _, err := c.add(ctx); err != nil {
			return invalid("start: %v", err)
		}
	}
	if _, err := c.converge(); err != nil {
		return invalid("the new cluster did not converge: %v", err)
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 0x5eed))
	keys := chooseKeys(rng, cfg.nodes)
	h := newHistory()
	tr := startTraffic(c, h, keys, 2*cfg.nodes, cfg.seed)
	time.Sleep(warmup)
	res.Rate = float64(h.countSince(0, h.now())) / warmup.Seconds()
	f := &faults{c: c, rng: rng, keys: keys, logf: logf}
	logf("traffic at %.0f ops/s; nemesis %s", res.Rate, cfg.scenario)
	nemesisErr := scenarios[cfg.scenario](f)
	if nemesisErr != nil {
		logf("nemesis failed: %v", nemesisErr)
	}
	f.healAll()
	time.Sleep(cooldown)
	tr.finish()
	logf("traffic stopped")

	statuses, err := c.converge()
	if err != nil {
		res.Violations = append(res.Violations, fmt.Sprintf("convergence: not within %v after healing: %v", convergeBound, err))
	}
	final, finalViolations := finalReads(c, h, keys, 2*cfg.nodes)
	res.Violations = append(res.Violations, finalViolations...)
	ops := h.snapshot()
	res.Ops = len(ops)
	res.Unavailable = h.unavailable()
	lin, finished := checkLinearizable(ops, dir)
	res.Violations = append(res.Violations, lin...)
	res.Violations = append(res.Violations, checkRequestIDs(ops)...)
	for _, o := range ops {
		switch {
		case o.Reused && o.Kind == api.KindReused:
			res.Refused++
		case o.Repeat && o.Kind == api.KindOK:
			res.Repeated++
		}
	}
	if len(finalViolations) == 0 {
		res.Violations = append(res.Violations, checkLostWrites(ops, keys, final)...)
	}
	all := append(c.retiredStatuses(), statuses...)
	res.Violations = append(res.Violations, checkEpochs(all)...)
	for _, st := range all {
		res.Bit += st.Bit()
		res.Fenced += st.Stats.FencedCommits
	}
	if cfg.rf > 1 {
		// With replicas, a crashed owner's partitions are taken over
		// without a refusal or a failure: the claims made while a node
		// was out are the bite (not the handoffs of joins and leaves).
		res.Bit += takenOver(all, f.outages)
	}
	unbitten := f.unbitten(all, cfg.rf > 1)
	switch {
	case nemesisErr != nil:
		res.Invalid = fmt.Sprintf("nemesis failed: %v", nemesisErr)
	case res.Rate < minRate:
		res.Invalid = fmt.Sprintf("traffic reached %.0f ops/s before the fault, want %d", res.Rate, minRate)
	case unbitten != "":
		res.Invalid = fmt.Sprintf("the fault %q did not bite: no fenced write, refused promise, failed acquire or drain timeout while it ran, nor (with replicas) a claim made while a node was out", unbitten)
	case !finished:
		res.Invalid = "the linearizability check timed out"
	default:
		res.Valid = true
	}
	if !res.Valid || len(res.Violations) > 0 || cfg.keep {
		writeJSON(filepath.Join(dir, "history.json"), ops)
		writeJSON(filepath.Join(dir, "statuses.json"), all)
		writeJSON(filepath.Join(dir, "result.json"), res)
	}
	return res
}

// chooseKeys picks 4 registers and 2 counters on distinct partitions, at
// least two of which move to the node that would join next.
func chooseKeys(rng *rand.Rand, nodes int) keyset {
	var members []ring.Member
	for i := range nodes {
		members = append(members, ring.Member{Name: fmt.Sprintf("n%d", i)})
	}
	now := ring.Place(members, partitions, 1)
	next := ring.Place(append(members, ring.Member{Name: fmt.Sprintf("n%d", nodes)}), partitions, 1)
	used := map[int]bool{}
	var moving, staying []string
	for len(moving) < 2 || len(staying) < 4 {
		k := fmt.Sprintf("k%x", rng.Uint32())
		p := ring.Partition([]byte(k), partitions)
		if used[p] {
			continue
		}
		switch {
		case now.Owners[p] != next.Owners[p] && len(moving) < 2:
			moving = append(moving, k)
		case now.Owners[p] == next.Owners[p] && len(staying) < 4:
			staying = append(staying, k)
		default:
			continue
		}
		used[p] = true
	}
	return keyset{registers: []string{moving[0], staying[0], staying[1], staying[2]}, counters: []string{moving[1], staying[3]}}
}

// finalReads reads every key through every running node, recording the
// reads in the history, and returns each key's value. The nodes must agree.
func finalReads(c *cluster, h *history, keys keyset, client int) (map[string]string, []string) {
	final := map[string]string{}
	var v []string
	for i, n := range c.running() {
		for _, key := range keys.all() {
			o := op{Client: client + i, Key: key, Method: api.MethodGet, Call: h.now()}
			var res api.CallResult
			for attempt := 0; attempt < 10; attempt++ {
				res = c.call(n, api.CallRequest{Key: key, Method: api.MethodGet, RequestID: fmt.Sprintf("final-%s-%s", n.name, key), Timeout: 2 * time.Second})
				if res.Definite() {
					break
				}
			}
			if res.Kind != api.KindOK {
				v = append(v, fmt.Sprintf("convergence: final read of %s through %s failed: %s %s", key, n.name, res.Kind, res.Error))
				continue
			}
			o.Kind, o.Out, o.Return = res.Kind, res.Body, h.now()
			h.add(o)
			if prev, ok := final[key]; ok && prev != res.Body {
				v = append(v, fmt.Sprintf("convergence: %s reads %q through %s, %q elsewhere", key, res.Body, n.name, prev))
			}
			final[key] = res.Body
		}
	}
	return final, v
}

func writeJSON(path string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		os.WriteFile(path, b, 0o644)
	}
}

// takenOver counts the partitions that got a new claim while a node was
// paused, dead or cut off: a claim whose first record, on any node, falls
// in one of outages (a node that relearns an old claim records it later).
func takenOver(statuses []api.Status, outages []outageWindow) uint64 {
	first := map[[2]uint64]time.Time{} // by partition and epoch
	for _, st := range statuses {
		for p, claims := range st.Audit {
			for _, c := range claims {
				k := [2]uint64{uint64(p), c.Epoch}
				if at, ok := first[k]; !ok || c.At.Before(at) {
					first[k] = c.At
				}
			}
		}
	}
	moved := map[uint64]bool{}
	for k, at := range first {
		for _, o := range outages {
			if !at.Before(o.from) && !at.After(o.to) {
				moved[k[0]] = true
			}
		}
	}
	return uint64(len(moved))
}
