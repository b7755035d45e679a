package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
	"github.com/singlewriter/singlewriter/ring"
)

// Durations of the faults.
const (
	// outage is how long a node stays paused, dead or cut off: longer than
	// failure detection (about 4-5s with the "local" gossip preset), so the
	// others try to take its partitions.
	outage = 6 * time.Second
	// handlerPause is how long a paused handler sleeps inside its critical
	// section: longer than the nodes' 300ms drain timeout, so a partition
	// that moves meanwhile fences its write.
	handlerPause = 1200 * time.Millisecond
	// bouncePause is the handler pause of bounce: long enough for a join,
	// its acquisitions, a leave and its handoffs.
	bouncePause = 3 * time.Second
	// movePause bounds the pause of a handler that wakes once its
	// partition moved (join): a join on a loaded machine can take seconds,
	// and a handler that wakes before the move is not late.
	movePause = 5 * time.Second
	// quickRestart is how long a wiped node stays down in wipe-fast:
	// shorter than failure detection, so the others never see it gone.
	quickRestart = 500 * time.Millisecond
	// rejoinBound bounds the wait for a cluster to agree again between two
	// faults of a sequence.
	rejoinBound = 30 * time.Second
)

// faults are the nemesis's moves on one cluster.
type faults struct {
	c    *cluster
	rng  *rand.Rand
	keys keyset
	logf func(format string, args ...any)
	// outages are the times when a node was paused, dead or cut off (see
	// takenOver).
	outages []outageWindow
	// steps are the faults injected so far, each with its evidence.
	steps []step
}

// A step is one fault of a scenario. A run is valid only if each of its
// steps bit: the cluster's bite counters (api.Status.Bit) grew while it
// ran, or, with replicas, a partition was taken over while a node was out
// during it (takenOver). Counting over the whole run instead would make a
// scenario whose main fault did nothing valid on the strength of a later
// step.
type step struct {
	name string
	// bitsBefore and bitsAfter are the cluster's bite counters, summed
	// over every process, when the step began and once it ended.
	bitsBefore, bitsAfter uint64
	// outages are the outages recorded during the step.
	outages []outageWindow
}

// step runs one fault, recording its evidence, and returns its error.
func (f *faults) step(name string, fault func() error) error {
	before := f.c.bites()
	first := len(f.outages)
	err := fault()
	f.steps = append(f.steps, step{name: name, bitsBefore: before, bitsAfter: f.c.bites(), outages: f.outages[first:]})
	return err
}

// unbitten returns the name of the first step that did not bite, given
// the final statuses of every process (for takenOver), and whether the
// nodes have replicas; "" if every step bit.
func (f *faults) unbitten(statuses []api.Status, replicas bool) string {
	for _, s := range f.steps {
		if s.bitsAfter > s.bitsBefore || replicas && takenOver(statuses, s.outages) > 0 {
			continue
		}
		return s.name
	}
	return ""
}

// outageWindow is a time when a node was paused, dead or cut off, until it
// was back (and, after a lost directory, the cluster settled).
type outageWindow struct{ from, to time.Time }

// down records an outage that began at from and ends now.
func (f *faults) down(from time.Time) {
	f.outages = append(f.outages, outageWindow{from, time.Now()})
}

// ownerOf returns the running node that a running node names as key's
// owner, or a random running node if none answers.
func (f *faults) ownerOf(key string) *node {
	nodes := f.c.running()
	p := ring.Partition([]byte(key), partitions)
	for _, n := range nodes {
		st, err := f.c.status(n, time.Second)
		if err != nil {
			continue
		}
		for _, o := range nodes {
			if o.name == st.Claims[p].Owner {
				return o
			}
		}
	}
	return nodes[f.rng.IntN(len(nodes))]
}

// busyOwner returns the owner of a random key: a node with traffic.
func (f *faults) busyOwner() *node {
	keys := f.keys.all()
	return f.ownerOf(keys[f.rng.IntN(len(keys))])
}

// processPause SIGSTOPs a busy owner for outage, then SIGCONTs it. Its
// error, for faults.step, is always nil.
func (f *faults) processPause() error {
	n := f.busyOwner()
	f.logf("SIGSTOP %s for %v", n.name, outage)
	from := time.Now()
	f.c.stop(n)
	time.Sleep(outage)
	f.c.cont(n)
	f.down(from)
	f.logf("SIGCONT %s", n.name)
	f.settle()
	return nil
}

// crash kills a busy owner with SIGKILL and restarts it on the same data
// directory after outage.
func (f *faults) crash() error {
	n := f.busyOwner()
	f.logf("SIGKILL %s for %v", n.name, outage)
	from := time.Now()
	f.c.kill(n)
	time.Sleep(outage)
	f.down(from)
	return f.restart(n)
}

// wipe kills a busy owner (another node than last, if there is one) with
// SIGKILL, deletes its data directory, and after down restarts it under
// its name on an empty one, which the node creates: a lost disk. It
// returns once the cluster has settled (cluster.settled: the claims name
// the replicas placement gives, and every node, the wiped one included,
// holds a copy of every partition that names it), and fails if that takes
// longer than rejoinBound.
func (f *faults) wipe(last *node, down time.Duration) (*node, error) {
	n := f.busyOwner()
	for nodes := f.c.running(); n == last && len(nodes) > 1; {
		n = nodes[f.rng.IntN(len(nodes))]
	}
	f.logf("SIGKILL %s and delete its data directory, for %v", n.name, down)
	defer f.down(time.Now())
	f.c.kill(n)
	if err := os.RemoveAll(n.dir); err != nil {
		return nil, err
	}
	time.Sleep(down)
	if err := f.restart(n); err != nil {
		return nil, err
	}
	if err := await(rejoinBound, f.c.settled); err != nil {
		return nil, fmt.Errorf("not settled within %v after %s came back empty: %w", rejoinBound, n.name, err)
	}
	f.logf("settled")
	return n, nil
}

// restart starts a stopped node again on its data directory.
func (f *faults) restart(n *node) error {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	f.logf("restart %s", n.name)
	if err := f.c.start(ctx, n, false); err != nil {
		return err
	}
	f.settle()
	return nil
}

// armPauses makes the next write of each key pause on nodes (on its
// owner, that is).
func (f *faults) armPauses(keys []string, nodes ...*node) {
	f.armPausesFor(handlerPause, keys, nodes...)
}

// armPausesFor is armPauses with a pause of d.
func (f *faults) armPausesFor(d time.Duration, keys []string, nodes ...*node) {
	for _, n := range nodes {
		f.c.pause(n, api.Pause{Sleep: d, Keys: keys})
	}
}

// owned returns the keys n owns.
func (f *faults) owned(n *node) []string {
	var out []string
	for _, k := range f.keys.all() {
		if f.ownerOf(k) == n {
			out = append(out, k)
		}
	}
	return out
}

// moving returns the keys whose partition moves when node joins.
func (f *faults) moving(joiner string) []string {
	var members []ring.Member
	for _, n := range f.c.running() {
		members = append(members, ring.Member{Name: n.name})
	}
	now := ring.Place(members, partitions, 1)
	next := ring.Place(append(members, ring.Member{Name: joiner}), partitions, 1)
	var out []string
	for _, k := range f.keys.all() {
		if p := ring.Partition([]byte(k), partitions); now.Owners[p] != next.Owners[p] {
			out = append(out, k)
		}
	}
	return out
}

// waitPaused waits until a handler of n is paused, for at most two
// seconds: with no traffic to n's keys none will be.
func (f *faults) waitPaused(n *node) {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := f.c.status(n, time.Second); err == nil && st.Paused > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// pausedHandoff pauses handlers inside their critical section on a busy
// owner, makes it leave gracefully (its partitions move while the handlers
// sleep past the drain timeout: their commits must be fenced), then
// restarts it on its data directory.
func (f *faults) pausedHandoff() error {
	n := f.busyOwner()
	f.armPauses(f.owned(n), n)
	f.waitPaused(n)
	f.logf("%s leaves with paused handlers", n.name)
	if err := f.c.leave(n); err != nil {
		return fmt.Errorf("leave %s: %w", n.name, err)
	}
	return f.restart(n)
}

// join adds a new node with the handlers of the keys that move to it
// paused on every other node until their partitions moved, so that the
// paused commits are late and must be fenced.
func (f *faults) join() (*node, error) {
	keys := f.moving(fmt.Sprintf("n%d", len(f.c.all())))
	for _, n := range f.c.running() {
		f.c.pause(n, api.Pause{Sleep: movePause, Keys: keys, UntilMoved: true})
	}
	return f.add()
}

// joinPausing is join with the given keys' handlers paused for
// handlerPause.
func (f *faults) joinPausing(keys []string) (*node, error) {
	f.armPauses(keys, f.c.running()...)
	return f.add()
}

// add starts a new node and waits until it joined.
func (f *faults) add() (*node, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	n, err := f.c.add(ctx)
	if err != nil {
		return nil, err
	}
	f.logf("joined %s", n.name)
	return n, nil
}

// ips returns the nodes' IPs.
func ips(nodes []*node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.ip)
	}
	return out
}

// split cuts the links, gossip and RPC, between the two groups: each node
// of one blocks each IP of the other. Extra IPs (of nodes that will join) go with the majority.
func (f *faults) split(minority, majority []*node, extra ...string) {
	for _, n := range minority {
		f.c.fault(n, api.Fault{Op: api.FaultBlock, IPs: append(ips(majority), extra...)})
	}
	for _, n := range majority {
		f.c.fault(n, api.Fault{Op: api.FaultBlock, IPs: ips(minority)})
	}
	f.logf("split %v | %v", ips(minority), ips(majority))
}

// healAll removes every link rule.
func (f *faults) healAll() {
	for _, n := range f.c.running() {
		f.c.fault(n, api.Fault{Op: api.FaultHeal})
	}
}

// partition isolates a minority (one node, or two of five) from the
// majority for outage. During the split a new node joins the majority
// with every handler paused, so partitions move across and beside the
// split; after healing, the minority's partitions move to it too, with
// the minority's handlers paused again; once the cluster agrees, one more
// node joins with the handlers of the keys it takes paused.
func (f *faults) partition() error {
	nodes := f.c.running()
	f.rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	k := 1
	if len(nodes) >= 5 && f.rng.IntN(2) == 0 {
		k = 2
	}
	minority, majority := nodes[:k], nodes[k:]
	joiner := f.c.ipOf(len(f.c.all()))
	start := time.Now()
	f.split(minority, majority, joiner)
	// Which partitions move depends on the majority's view, without the
	// minority: pause every key.
	n, err := f.joinPausing(f.keys.all())
	if err != nil {
		return err
	}
	f.c.fault(n, api.Fault{Op: api.FaultBlock, IPs: ips(minority)})
	time.Sleep(time.Until(start.Add(outage)))
	// The sides merge again within a few seconds of healing, and the
	// minority's partitions move to the joiner then: pause long enough.
	f.armPausesFor(bouncePause, f.keys.all(), minority...)
	f.healAll()
	f.down(start)
	f.logf("healed")
	f.settle()
	// And a handoff after the split, from live owners with paused
	// handlers.
	if _, err := f.join(); err != nil {
		return err
	}
	f.settle()
	return nil
}

// slowLinks delays and drops on every link while a paused handoff runs.
func (f *faults) slowLinks() error {
	delay := time.Duration(5+f.rng.IntN(20)) * time.Millisecond
	drop := 0.02 + 0.08*f.rng.Float64()
	f.logf("slow links: delay %v, drop %.2f", delay, drop)
	for _, n := range f.c.running() {
		f.c.fault(n, api.Fault{Op: api.FaultDelay, Delay: delay})
		f.c.fault(n, api.Fault{Op: api.FaultDrop, Drop: drop})
	}
	time.Sleep(time.Second)
	err := f.pausedHandoff()
	f.healAll()
	return err
}

// joinAndSettle is join, then settle.
func (f *faults) joinAndSettle() error {
	if _, err := f.join(); err != nil {
		return err
	}
	f.settle()
	return nil
}

// leaveNewest makes the node that joined last leave gracefully with its
// handlers paused inside their critical section (their commits must be
// fenced), and waits for the cluster to agree.
func (f *faults) leaveNewest() error {
	all := f.c.all()
	n := all[len(all)-1]
	f.armPauses(f.owned(n), n)
	f.waitPaused(n)
	f.logf("%s leaves with paused handlers", n.name)
	if err := f.c.leave(n); err != nil {
		return fmt.Errorf("leave %s: %w", n.name, err)
	}
	f.settle()
	return nil
}

// rollingRestart restarts every running node in turn (a graceful stop,
// then a start on its data directory).
func (f *faults) rollingRestart() error {
	for _, n := range f.c.running() {
		f.logf("rolling restart: %s", n.name)
		f.c.terminate(n)
		if err := f.restart(n); err != nil {
			return err
		}
	}
	return nil
}

// settle waits until the cluster agrees, at most rejoinBound; the final
// convergence check is the one that counts.
func (f *faults) settle() {
	await(rejoinBound, func() error {
		_, err := f.c.agreement()
		return err
	})
}

// bounce moves partitions away and back while handlers that wrote them
// are paused: the owners' handlers of the keys that move to a joining node
// pause for bouncePause, the node joins and takes the partitions, then
// leaves and hands them back, and only then do the handlers resume. Their
// commits must be fenced, and the writes must not be seen by the calls
// that follow them at the partitions' new epoch. (This found the router's
// pipelining overlay leaking a fenced write across epochs.)
func (f *faults) bounce() error {
	joiner := fmt.Sprintf("n%d", len(f.c.all()))
	moving := f.moving(joiner)
	running := f.c.running()
	f.armPausesFor(bouncePause, moving, running...)
	for _, n := range running {
		f.waitPaused(n)
	}
	n, err := f.add()
	if err != nil {
		return err
	}
	f.logf("handlers of %v paused while %s joins", moving, n.name)
	f.settle()
	f.logf("%s leaves", n.name)
	if err := f.c.leave(n); err != nil {
		return fmt.Errorf("leave %s: %w", n.name, err)
	}
	f.settle()
	return nil
}
