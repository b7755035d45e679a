package owner_test

import (
	"flag"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/internal/simnet"
	"github.com/singlewriter/singlewriter/store"
)

// The deterministic simulation of the acquire protocol (DESIGN.md,
// "Failure model and how it is tested"): 3 or 5 nodes in one goroutine
// running the library's Proposer and acceptor handlers, a seeded scheduler
// that delivers, drops, duplicates and reorders messages, starts dueling
// acquisitions, writes, gossips claims, crashes and restarts nodes and cuts
// links, and a checker run after every step. A failing seed replays
// exactly:
//
//	go test ./owner/ -run 'TestSimulation$' -sim.seed 1234 -v

var (
	simSeeds = flag.Int("sim.seeds", 2000, "number of seeds TestSimulation runs")
	simSeed  = flag.Int64("sim.seed", -1, "replay only this seed, printing its full trace with -v")
	simSteps = flag.Int("sim.steps", 0, "random steps per seed (0: the default of each configuration)")
	simRF2   = flag.Bool("sim.rf2", false, "with RF 3, give every seed's claims 2 or 3 replicas, as while a cluster grows (by default half the seeds do)")
	simWipe  = flag.Bool("sim.wipe", false, "with RF 3, let nodes lose their data directory too (finds a known liveness gap, see docs/PROTOCOL.md, Amnesia)")
)

// simConfig is one seed's simulation.
type simConfig struct {
	seed       uint64
	nodes      int
	rf         int
	partitions int
	steps      int
	faults     simnet.Faults
	// rf2 gives each claim of RF 3 two or three replicas, as while a
	// cluster grows; wipe lets nodes lose their data directories.
	rf2, wipe bool
	// keepDown has the liveness phase keep one node down (see liveness).
	keepDown bool
	// noFence disables the replicas' write fence (the control run).
	noFence bool
	// fullTrace keeps every event instead of the last traceTail.
	fullTrace bool
}

// configFor derives a seed's configuration: RF 1 and 3, 3 and 5 nodes, 1
// to 3 partitions, claims of two or three replicas with RF 3, all mixed. A
// quarter of the seeds, half of them with RF 3 and none with claims of two
// replicas (where one node down leaves no majority), keep a node down in
// the liveness phase.
func configFor(seed uint64) simConfig {
	cfg := simConfig{
		seed:       seed,
		nodes:      3 + 2*int(seed%2),
		rf:         1 + 2*int(seed/2%2),
		partitions: 1 + int(seed/4%3),
		rf2:        *simRF2 || seed/12%2 == 1,
		wipe:       *simWipe,
		keepDown:   seed/12%4 == 2 && !*simRF2 && !*simWipe,
		steps:      400,
		faults:     simnet.Faults{Drop: 0.05, Duplicate: 0.05},
	}
	if *simSteps > 0 {
		cfg.steps = *simSteps
	}
	return cfg
}

const traceTail = 50

// violation is the first broken invariant of a run.
type violation struct {
	kind string
	step int
	msg  string
}

type sim struct {
	cfg   simConfig
	rng   *rand.Rand
	net   *simnet.Net
	nodes []*simNode
	chk   *checker

	step     int
	attempts uint64
	syncs    uint64
	writes   uint64
	// Versions bumped on every change the serving check reads.
	logVersion, servingVersion, ackVersion uint64

	trace  []string
	events int
	hash   uint64

	// failure is the first violation; fences counts fence violations,
	// which the control run records without stopping.
	failure *violation
	fences  int
	// splitStall reports a partition left unserved by the known gap of
	// splitBallots.
	splitStall bool
}

func newSim(cfg simConfig) *sim {
	s := &sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, 0x5eed))}
	s.net = simnet.New(s.rng, cfg.faults)
	s.chk = newChecker(s)
	for i := range cfg.nodes {
		s.nodes = append(s.nodes, newSimNode(s, fmt.Sprintf("n%d", i)))
	}
	// Bootstrap: the root claim of every partition is epoch 0, owned and
	// replicated by n0 alone, as Owner.Bootstrap makes it (the other nodes
	// join later). n0 records it as final, every node has it in its claims
	// table (as gossip would tell it), and n0 resumes it.
	root := store.Claim{Owner: "n0", Replicas: []string{"n0"}}
	for p := range cfg.partitions {
		s.chk.root(p, root)
		if _, err := s.nodes[0].acc.Choose(ctx, p, cloneClaim(root), true); err != nil {
			panic(err)
		}
		for _, n := range s.nodes {
			n.mergeClaim(p, root, "bootstrap")
		}
		s.nodes[0].plan(p, false, nil)
	}
	return s
}

func (s *sim) node(name string) *simNode {
	for _, n := range s.nodes {
		if n.name == name {
			return n
		}
	}
	panic("unknown node " + name)
}

func (s *sim) send(from, to string, payload any) { s.net.Send(from, to, payload) }

func (s *sim) logf(format string, args ...any) {
	line := fmt.Sprintf("%5d ", s.step) + fmt.Sprintf(format, args...)
	h := fnv.New64a()
	h.Write([]byte(line))
	s.hash = s.hash*31 + h.Sum64()
	s.events++
	if !s.cfg.fullTrace && len(s.trace) == traceTail {
		copy(s.trace, s.trace[1:])
		s.trace = s.trace[:traceTail-1]
	}
	s.trace = append(s.trace, line)
}

func (s *sim) violate(kind, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.logf("VIOLATION %s: %s", kind, msg)
	if kind == vFence && s.cfg.noFence {
		s.fences++
		return
	}
	if s.failure == nil {
		s.failure = &violation{kind: kind, step: s.step, msg: msg}
	}
}

// run runs the random phase, then the liveness phase, and returns the
// first violation (nil if none).
func (s *sim) run() *violation {
	for s.step = 1; s.step <= s.cfg.steps && s.failure == nil; s.step++ {
		s.schedule()
		s.chk.afterStep()
	}
	if s.failure == nil {
		s.liveness()
	}
	return s.failure
}

// The scheduler's actions and their weights.
var actions = []struct {
	weight int
	name   string
	do     func(s *sim) bool
}{
	{60, "deliver", (*sim).deliver},
	{8, "acquire", (*sim).randomAcquire},
	{15, "write", (*sim).randomWrite},
	{4, "commit", (*sim).randomCommit},
	{4, "retransmit", (*sim).randomRetransmit},
	{3, "timeout", (*sim).randomTimeout},
	{2, "crash", (*sim).randomCrash},
	{1, "wipe", (*sim).randomWipe},
	{3, "restart", (*sim).randomRestart},
	{2, "cut", (*sim).randomCut},
	{1, "isolate", (*sim).randomIsolate},
	{2, "heal", (*sim).heal},
	{3, "gossip", (*sim).randomGossip},
}

var totalWeight = func() int {
	t := 0
	for _, a := range actions {
		t += a.weight
	}
	return t
}()

// schedule does one random action; an action with nothing to act on gives
// way to delivering a message.
func (s *sim) schedule() {
	r := s.rng.IntN(totalWeight)
	for _, a := range actions {
		if r < a.weight {
			if !a.do(s) {
				s.deliver()
			}
			for _, n := range s.nodes {
				n.reconcileKicked()
			}
			return
		}
		r -= a.weight
	}
}

func (s *sim) deliver() bool {
	m, fate, ok := s.net.Step()
	if !ok {
		return false
	}
	s.logf("%s %v", fate, m)
	if fate != simnet.Dropped {
		s.node(m.To).handle(m.From, m.Payload)
	}
	return true
}

func (s *sim) upNodes() []*simNode {
	var up []*simNode
	for _, n := range s.nodes {
		if n.up {
			up = append(up, n)
		}
	}
	return up
}

func (s *sim) randomUp() *simNode {
	up := s.upNodes()
	if len(up) == 0 {
		return nil
	}
	return up[s.rng.IntN(len(up))]
}

// replicasFor picks the replica set a node proposes: itself first, then
// RF-1 others at random.
func (s *sim) replicasFor(n *simNode) []string {
	rs := []string{n.name}
	size := s.cfg.rf
	if s.cfg.rf2 && size == 3 {
		size = 2 + s.rng.IntN(2)
	}
	for _, i := range s.rng.Perm(len(s.nodes)) {
		if len(rs) == size {
			break
		}
		if s.nodes[i] != n {
			rs = append(rs, s.nodes[i].name)
		}
	}
	return rs
}

// randomAcquire makes a random node the desired owner of a random
// partition for one pass of its reconcile loop.
func (s *sim) randomAcquire() bool {
	n := s.randomUp()
	if n == nil {
		return false
	}
	n.plan(s.rng.IntN(s.cfg.partitions), true, s.replicasFor(n))
	return true
}

// randomGossip sends a random node's claims table to another (push/pull).
func (s *sim) randomGossip() bool {
	n := s.randomUp()
	if n == nil {
		return false
	}
	i := slices.Index(s.nodes, n)
	to := s.nodes[(i+1+s.rng.IntN(len(s.nodes)-1))%len(s.nodes)]
	n.gossipTable(to.name)
	return true
}

func (s *sim) randomWrite() bool {
	type np struct {
		n *simNode
		p int
	}
	var serving []np
	for _, n := range s.upNodes() {
		for p, pt := range n.parts {
			if pt.serving {
				serving = append(serving, np{n, p})
			}
		}
	}
	if len(serving) == 0 {
		return false
	}
	w := serving[s.rng.IntN(len(serving))]
	c := w.n.admit(w.p)
	if s.rng.IntN(4) > 0 {
		w.n.commit(c)
	} else {
		s.logf("%s admits p%d %s e%d", w.n.name, w.p, c.id, c.claim.Epoch)
	}
	return true
}

// randomCommit commits a call admitted earlier, perhaps after a drain.
func (s *sim) randomCommit() bool {
	var calls []*call
	var nodes []*simNode
	for _, n := range s.upNodes() {
		for _, c := range n.calls {
			calls, nodes = append(calls, c), append(nodes, n)
		}
	}
	if len(calls) == 0 {
		return false
	}
	i := s.rng.IntN(len(calls))
	nodes[i].commit(calls[i])
	return true
}

func (s *sim) randomRetransmit() bool {
	n := s.randomUp()
	if n == nil {
		return false
	}
	n.retransmit(s.rng.IntN(s.cfg.partitions))
	return true
}

func (s *sim) randomTimeout() bool {
	n := s.randomUp()
	if n == nil {
		return false
	}
	n.abandon(s.rng.IntN(s.cfg.partitions))
	return true
}

func (s *sim) randomCrash() bool {
	n := s.randomUp()
	if n == nil {
		return false
	}
	s.crash(n)
	return true
}

func (s *sim) crash(n *simNode) {
	s.logf("CRASH %s", n.name)
	s.net.Crash(n.name)
	n.up = false
	n.resetVolatile()
	s.servingVersion++
}

// randomWipe crashes a node that also loses its data directory and comes
// back blank under its name. It keeps within what replication tolerates,
// one lost memory at a time: every claim whose successor may still be
// being chosen, or known chosen only by its replicas (each partition's
// newest final claim and newest chosen one, and their bases), and that
// names the node has other replicas, and each of them remembers the
// partition and takes part in that choice. A majority of the replicas
// then still holds what was acknowledged and what was promised. With a
// single replica the loss is the data's, and no wipe runs.
func (s *sim) randomWipe() bool {
	if !s.cfg.wipe || s.cfg.rf < 3 {
		return false
	}
	n := s.nodes[s.rng.IntN(len(s.nodes))]
	for p := range s.cfg.partitions {
		final, chosen := s.chk.newestFinal(p), s.chk.newest[p]
		for _, c := range []store.Claim{final, chosen, s.chk.chosen[pe{p, final.Base}], s.chk.chosen[pe{p, chosen.Base}]} {
			if !slices.Contains(c.Replicas, n.name) {
				continue
			}
			if len(c.Replicas) < 3 {
				return false // the root claim, on n0 alone
			}
			for _, r := range c.Replicas {
				if r != n.name && !s.node(r).checkMemory(p, c) {
					return false
				}
			}
		}
	}
	if n.up {
		s.crash(n)
	}
	s.logf("WIPE %s", n.name)
	n.wipe()
	s.chk.wiped(n)
	return true
}

func (s *sim) randomRestart() bool {
	var down []*simNode
	for _, n := range s.nodes {
		if !n.up {
			down = append(down, n)
		}
	}
	if len(down) == 0 {
		return false
	}
	s.restart(down[s.rng.IntN(len(down))])
	return true
}

func (s *sim) restart(n *simNode) {
	s.logf("RESTART %s", n.name)
	s.net.Restart(n.name)
	n.up = true
	n.resetVolatile()
	for p := range n.parts {
		n.plan(p, false, nil)
	}
	// Joining the gossip: a push/pull of claims tables with a live peer.
	var peers []*simNode
	for _, o := range s.upNodes() {
		if o != n {
			peers = append(peers, o)
		}
	}
	if len(peers) > 0 {
		peer := peers[s.rng.IntN(len(peers))]
		n.gossipTable(peer.name)
		peer.gossipTable(n.name)
	}
}

func (s *sim) randomCut() bool {
	i := s.rng.IntN(len(s.nodes))
	j := (i + 1 + s.rng.IntN(len(s.nodes)-1)) % len(s.nodes)
	s.logf("CUT %s-%s", s.nodes[i].name, s.nodes[j].name)
	s.net.Cut(s.nodes[i].name, s.nodes[j].name)
	return true
}

func (s *sim) randomIsolate() bool {
	n := s.nodes[s.rng.IntN(len(s.nodes))]
	s.logf("ISOLATE %s", n.name)
	s.net.Isolate(n.name)
	return true
}

func (s *sim) heal() bool {
	s.logf("HEAL")
	s.net.Heal()
	return true
}

// liveness heals everything, restarts every node (but the one keepDown
// keeps down), stops losing messages, and drives acquisitions until the
// newest chosen claim of every partition is served by its owner.
func (s *sim) liveness() {
	s.logf("LIVENESS: heal, restart all, no more drops or duplicates")
	s.net.Heal()
	s.net.SetFaults(simnet.Faults{})
	down := s.keptDown()
	for _, n := range s.nodes {
		switch {
		case n == down && n.up:
			s.crash(n)
		case n != down && !n.up:
			s.restart(n)
		}
	}
	const rounds, perRound = 20, 20000
	for round := range rounds {
		for i := 0; i < perRound && s.net.Len() > 0 && s.failure == nil; i++ {
			s.step++
			s.deliver()
			s.chk.afterStep()
		}
		if s.failure != nil {
			return
		}
		var unserved []int
		for p := range s.cfg.partitions {
			if !s.served(p) {
				unserved = append(unserved, p)
			}
		}
		if len(unserved) == 0 {
			return
		}
		// Nothing is in flight: every running attempt is stuck. Time them
		// out, fail the start markers that a majority did not confirm
		// although they had a round to (the runtime's commit fails once its
		// replicas refused it or did not answer in time), send the writes
		// not acknowledged again (the runtime's streams do), let gossip
		// converge, let every node's reconcile loop run, and let one node
		// per unserved partition be its desired owner.
		s.step++
		up := s.upNodes()
		for _, n := range up {
			for _, o := range up {
				if o != n {
					n.gossipTable(o.name)
				}
			}
		}
		for _, p := range unserved {
			for _, n := range up {
				n.abandon(p)
				if round > 0 {
					n.failStart(p)
				}
				n.retransmit(p)
				n.plan(p, false, nil)
				n.reconcileKicked()
			}
			n := up[(round+p)%len(up)]
			if owner := s.node(s.chk.newest[p].Owner); round%2 == 0 && owner.up {
				n = owner
			}
			s.logf("LIVENESS round %d: %s is the desired owner of p%d", round, n.name, p)
			n.plan(p, true, s.replicasFor(n))
			n.reconcileKicked()
		}
		s.chk.afterStep()
	}
	for p := range s.cfg.partitions {
		if !s.served(p) && s.recoverable(p) && s.splitBallots(p) {
			s.logf("LIVENESS p%d: stalled in the known gap of one value accepted at two ballots", p)
			s.splitStall = true
			continue
		}
		if !s.served(p) && s.recoverable(p) {
			s.violate(vLiveness, "after %d rounds partition %d is not served at its newest claim %s (%s)", rounds, p, fmtClaim(s.chk.newest[p]), s.stuck(p))
			return
		}
	}
}

// keptDown returns the node the liveness phase keeps down, if the seed
// keeps one: the owner named by a successor of a partition's newest final
// claim that some replica accepted but that was not chosen, if there is
// one (its re-proposal names that owner), else a random node.
func (s *sim) keptDown() *simNode {
	if !s.cfg.keepDown {
		return nil
	}
	for p := range s.cfg.partitions {
		final := s.chk.newestFinal(p)
		for _, k := range slices.SortedFunc(maps.Keys(s.chk.accepts), comparePBE) {
			if rec := s.chk.accepts[k]; k.p == p && k.base == final.Epoch && !rec.chosen {
				s.logf("LIVENESS: %s stays down, the owner of %s, accepted by %v", rec.value.Owner, fmtClaim(rec.value), slices.Sorted(maps.Keys(rec.by)))
				return s.node(rec.value.Owner)
			}
		}
	}
	n := s.nodes[s.rng.IntN(len(s.nodes))]
	s.logf("LIVENESS: %s stays down", n.name)
	return n
}

// recoverable reports whether a majority of the replicas of p's newest
// final claim are up and can take part in choosing its successor, and a
// node that is up knows that claim to be final, or knows it chosen and can
// make it final again (a majority of its base's replicas are up and
// remember the base). Lost data directories can leave too few (two faults
// among three replicas: one lost its directory while another never got its
// copy), and then no node may serve p again: that is the safe outcome. So
// can a node kept down: it may be the only one that knows the claim final.
func (s *sim) recoverable(p int) bool {
	c := s.chk.newestFinal(p)
	up := s.upNodes()
	knownFinal := slices.ContainsFunc(up, func(n *simNode) bool {
		known, ok := n.claims.Get(p)
		m := n.meta(p)
		return ok && known.Epoch >= c.Epoch || m.HasChosen && m.Final && m.Chosen.Epoch >= c.Epoch
	})
	knownChosen := slices.ContainsFunc(up, func(n *simNode) bool {
		m := n.meta(p)
		return m.HasChosen && m.Chosen.Epoch >= c.Epoch
	})
	base := store.Claim{Epoch: c.Base, Replicas: c.BaseReplicas}
	switch {
	case !knownFinal && !knownChosen:
		s.logf("LIVENESS p%d: no node that is up knows %s: not recoverable", p, fmtClaim(c))
		return false
	case !knownFinal && !isRoot(c) && !s.remembered(p, base):
		s.logf("LIVENESS p%d: no node that is up knows %s final, and too few of its base's replicas remember the base: not recoverable", p, fmtClaim(c))
		return false
	case !s.remembered(p, c):
		s.logf("LIVENESS p%d: too few of the replicas of %s are up and remember it: not recoverable", p, fmtClaim(c))
		return false
	}
	return true
}

// splitBallots reports the known liveness gap of one value chosen at two
// ballots (docs/PROTOCOL.md, "Liveness"): a node that is up knows a
// successor of a base chosen, not final, the newest final claim or its
// successor; another one that is up accepted the same value at a higher
// ballot, and so refuses to record the first, while the first refuses the
// proposals from the base; and a third replica of the base, the one whose
// record would count, is down or lost its directory.
func (s *sim) splitBallots(p int) bool {
	final := s.chk.newestFinal(p)
	up := s.upNodes()
	for _, n := range up {
		m := n.meta(p)
		c := m.Chosen
		if !m.HasChosen || m.Final || c.Epoch < final.Epoch && c.Base != final.Epoch {
			continue
		}
		base := store.Claim{Epoch: c.Base, Replicas: c.BaseReplicas}
		if slices.ContainsFunc(up, func(o *simNode) bool {
			a := o.meta(p).Accepted
			return a.Owner != "" && a.Base == c.Base && a.Epoch > c.Epoch && sameValue(a, c)
		}) && slices.ContainsFunc(base.Replicas, func(r string) bool {
			o := s.node(r)
			return !o.up || !o.checkMemory(p, base)
		}) {
			return true
		}
	}
	return false
}

// remembered reports whether a majority of claim c's replicas are up and
// can take part in choosing its successor.
func (s *sim) remembered(p int, c store.Claim) bool {
	able := 0
	for _, r := range c.Replicas {
		if n := s.node(r); n.up && n.checkMemory(p, c) {
			able++
		}
	}
	return able >= len(c.Replicas)/2+1
}

// stuck describes where partition p stands, for a liveness violation:
// whether its newest chosen claim is final, the claim each node's table
// holds and each node's protocol state.
func (s *sim) stuck(p int) string {
	var b strings.Builder
	newest := s.chk.newest[p]
	_, final := s.chk.finals[pe{p, newest.Epoch}]
	fmt.Fprintf(&b, "newest final=%v", final)
	for _, n := range s.nodes {
		fmt.Fprintf(&b, "; %s", n.name)
		if c, ok := n.claims.Get(p); ok {
			fmt.Fprintf(&b, " table=%s", fmtClaim(c))
		} else {
			b.WriteString(" table=none")
		}
		fmt.Fprintf(&b, " %s", fmtMeta(*n.meta(p)))
	}
	return b.String()
}

// served reports whether p's newest chosen claim is served by its owner,
// which is up.
func (s *sim) served(p int) bool {
	newest := s.chk.newest[p]
	n := s.node(newest.Owner)
	return n.up && n.parts[p].serving && n.parts[p].claim.Epoch == newest.Epoch
}

// runSeeds runs seeds [from, from+n) on every CPU and returns the runs that
// failed, by seed.
func runSeeds(from uint64, n int, mod func(*simConfig)) (failed []*sim, all []*sim) {
	all = make([]*sim, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				cfg := configFor(from + uint64(i))
				if mod != nil {
					mod(&cfg)
				}
				s := newSim(cfg)
				s.run()
				if s.failure == nil {
					s = s.summary()
				}
				all[i] = s
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, s := range all {
		if s.failure != nil {
			failed = append(failed, s)
		}
	}
	return failed, all
}

// summary is what the callers of runSeeds read of a run that broke
// nothing: long runs then do not hold every seed's nodes and trace.
func (s *sim) summary() *sim {
	return &sim{cfg: s.cfg, events: s.events, fences: s.fences, splitStall: s.splitStall}
}

func (s *sim) report() string {
	v := s.failure
	var b strings.Builder
	var flags string
	if *simRF2 {
		flags += " -sim.rf2"
	}
	if *simWipe {
		flags += " -sim.wipe"
	}
	fmt.Fprintf(&b, "seed %d (%d nodes, RF %d, claims of 2 replicas %v, lost directories %v, %d partitions): step %d: %s: %s\n",
		s.cfg.seed, s.cfg.nodes, s.cfg.rf, s.cfg.rf2 && s.cfg.rf == 3, s.cfg.wipe && s.cfg.rf == 3, s.cfg.partitions, v.step, v.kind, v.msg)
	fmt.Fprintf(&b, "replay: go test ./owner/ -run 'TestSimulation$' -sim.seed %d%s -v\n", s.cfg.seed, flags)
	fmt.Fprintf(&b, "last %d events:\n", len(s.trace))
	for _, l := range s.trace[max(0, len(s.trace)-traceTail):] {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestSimulation(t *testing.T) {
	if *simSeed >= 0 {
		cfg := configFor(uint64(*simSeed))
		cfg.fullTrace = true
		s := newSim(cfg)
		v := s.run()
		for _, l := range s.trace {
			t.Log(l)
		}
		if v != nil {
			t.Fatal(s.report())
		}
		return
	}
	n := *simSeeds
	if testing.Short() {
		n = min(n, 200)
	}
	start := time.Now()
	failed, all := runSeeds(1, n, nil)
	events := 0
	var split []uint64
	for _, s := range all {
		events += s.events
		if s.splitStall {
			split = append(split, s.cfg.seed)
		}
	}
	elapsed := time.Since(start)
	t.Logf("%d seeds, %d events in %v (%.0f seeds/s)", n, events, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	if len(split) > 0 {
		t.Logf("%d seeds left a partition unserved in the known gap of one value chosen at two ballots (docs/PROTOCOL.md): %v", len(split), split[:min(20, len(split))])
	}
	kinds := map[string][]uint64{}
	for _, s := range failed {
		kinds[s.failure.kind] = append(kinds[s.failure.kind], s.cfg.seed)
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		seeds := kinds[k]
		t.Errorf("%d of %d seeds violate %q: %v", len(seeds), n, k, seeds[:min(20, len(seeds))])
	}
	if testing.Verbose() {
		for _, s := range failed {
			t.Logf("seed %d: step %d: %s: %s", s.cfg.seed, s.failure.step, s.failure.kind, s.failure.msg)
		}
	}
	for _, s := range failed[:min(3, len(failed))] {
		t.Error(s.report())
	}
}

// TestSimulationReplaysExactly runs seeds twice and compares their traces:
// a failing seed must replay step for step.
func TestSimulationReplaysExactly(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 7, 12, 14, 15} { // 14 and 15: RF 3, claims of two or three replicas
		a, b := newSim(configFor(seed)), newSim(configFor(seed))
		a.run()
		b.run()
		if a.hash != b.hash || a.events != b.events {
			t.Errorf("seed %d: two runs differ: %d events hash %x, then %d events hash %x", seed, a.events, a.hash, b.events, b.hash)
		}
	}
}

// TestSimulationWithoutFencingLosesWrites is the control: with the
// replicas' write fence switched off, the checker must catch broken
// seeds. A simulation that passes without fencing proves nothing.
func TestSimulationWithoutFencingLosesWrites(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	_, all := runSeeds(1, n, func(c *simConfig) { c.noFence = true })
	var fenced, lost, other int
	for _, s := range all {
		if s.fences > 0 {
			fenced++
		}
		if s.failure != nil {
			switch s.failure.kind {
			case vAckLost:
				lost++
			default:
				other++
			}
		}
	}
	t.Logf("without fencing, of %d seeds: %d applied a write below a promise, %d lost an acknowledged write, %d broke another invariant", n, fenced, lost, other)
	if fenced == 0 || lost == 0 {
		t.Fatalf("the checker did not catch the missing fence: %d seeds with a fenced write applied, %d with an acknowledged write lost", fenced, lost)
	}
}
