package owner_test

import (
	"cmp"
	"slices"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// The invariants of the simulation, checked after every step (and, for
// the fence, choice and finality, at the moment of every apply, accept and
// record). The checker keeps its own account of what was chosen (from the
// accepts themselves) and of what was recorded, and never trusts the
// nodes' view of it.

// Kinds of violation.
const (
	vSuccessor = "single successor"
	vEpoch     = "two owners at one epoch"
	vFinal     = "final claims"
	vActed     = "acted on a claim that is not final"
	vAckLost   = "acknowledged write lost"
	vFence     = "fence"
	vPromise   = "promise decreased"
	vLearned   = "learned a claim never chosen"
	vLiveness  = "liveness"
)

type pe struct {
	p int
	e epoch.Epoch
}

type pbe struct {
	p            int
	base, ballot epoch.Epoch
}

// comparePBE orders keys by partition, base and ballot.
func comparePBE(a, b pbe) int {
	return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.base, b.base), cmp.Compare(a.ballot, b.ballot))
}

type acceptRec struct {
	value  store.Claim
	by     map[string]bool
	chosen bool
}

type ackedWrite struct {
	id string
	e  epoch.Epoch
}

type checker struct {
	s *sim
	// chosen holds every claim chosen, by partition and epoch: a majority
	// of its base's replicas accepted it.
	chosen map[pe]store.Claim
	// succ holds, by partition and base epoch, the first successor value
	// chosen.
	succ map[pe]store.Claim
	// accepts holds the acceptors of each (partition, base, ballot).
	accepts map[pbe]*acceptRec
	// records holds, per claim (partition, base, epoch), the nodes whose
	// record of it counts toward finality: they knew no newer chosen claim
	// when they recorded it, and had accepted no newer successor of its
	// base.
	records map[pbe]map[string]bool
	// finals holds every claim some replica marked final, by partition
	// and epoch; finalOf by partition and base epoch (the root excepted).
	finals  map[pe]store.Claim
	finalOf map[pe]store.Claim
	// newest is each partition's highest chosen claim.
	newest []store.Claim
	// acks are each partition's acknowledged writes.
	acks [][]ackedWrite
	// promised is the last promise seen per node and partition.
	promised [][]epoch.Epoch
	// checkedAt remembers the versions last checked, to skip the serving
	// check when nothing it reads changed.
	checkedAt [3]uint64
}

func newChecker(s *sim) *checker {
	c := &checker{
		s:        s,
		chosen:   map[pe]store.Claim{},
		succ:     map[pe]store.Claim{},
		accepts:  map[pbe]*acceptRec{},
		records:  map[pbe]map[string]bool{},
		finals:   map[pe]store.Claim{},
		finalOf:  map[pe]store.Claim{},
		newest:   make([]store.Claim, s.cfg.partitions),
		acks:     make([][]ackedWrite, s.cfg.partitions),
		promised: make([][]epoch.Epoch, s.cfg.nodes),
	}
	for i := range c.promised {
		c.promised[i] = make([]epoch.Epoch, s.cfg.partitions)
	}
	return c
}

// sameValue: the same Paxos value (owner and replica set).
func sameValue(a, b store.Claim) bool {
	return a.Owner == b.Owner && slices.Equal(a.Replicas, b.Replicas)
}

// sameClaim: the same claim (value, epoch and base).
func sameClaim(a, b store.Claim) bool {
	return sameValue(a, b) && a.Epoch == b.Epoch && a.Base == b.Base && slices.Equal(a.BaseReplicas, b.BaseReplicas)
}

func isRoot(c store.Claim) bool { return c.Epoch == 0 }

// root registers partition p's bootstrap claim as chosen and final.
func (c *checker) root(p int, root store.Claim) {
	c.chosen[pe{p, root.Epoch}] = cloneClaim(root)
	c.finals[pe{p, root.Epoch}] = cloneClaim(root)
	c.newest[p] = cloneClaim(root)
}

// accepted records that node accepted proposal v for p while its promise
// was promised, and registers v as chosen once a majority of its base's
// replicas accepted it.
func (c *checker) accepted(node string, p int, v store.Claim, promised epoch.Epoch) {
	c.applied(node, p, "accept "+fmtClaim(v), v.Epoch, promised)
	base, ok := c.chosen[pe{p, v.Base}]
	if !ok {
		c.s.violate(vSuccessor, "%s accepted %s for p%d whose base e%d was never chosen", node, fmtClaim(v), p, v.Base)
		return
	}
	k := pbe{p, v.Base, v.Epoch}
	rec := c.accepts[k]
	if rec == nil {
		rec = &acceptRec{value: cloneClaim(v), by: map[string]bool{}}
		c.accepts[k] = rec
	} else if !sameValue(rec.value, v) {
		c.s.violate(vSuccessor, "p%d ballot %d on base e%d carries two values: %s and %s", p, v.Epoch, v.Base, fmtClaim(rec.value), fmtClaim(v))
		return
	}
	rec.by[node] = true
	if rec.chosen || c.count(base.Replicas, rec.by) < len(base.Replicas)/2+1 {
		return
	}
	rec.chosen = true
	c.s.logf("CHECK p%d: %s chosen as successor of %s", p, fmtClaim(v), fmtClaim(base))
	if prev, ok := c.succ[pe{p, v.Base}]; ok && !sameValue(prev, v) {
		c.s.violate(vSuccessor, "p%d: two successors of %s chosen: %s and %s", p, fmtClaim(base), fmtClaim(prev), fmtClaim(v))
		return
	} else if !ok {
		c.succ[pe{p, v.Base}] = cloneClaim(v)
	}
	if prev, ok := c.chosen[pe{p, v.Epoch}]; ok && prev.Owner != v.Owner {
		c.s.violate(vEpoch, "p%d: epoch %d chosen with two owners: %s and %s", p, v.Epoch, fmtClaim(prev), fmtClaim(v))
		return
	}
	c.chosen[pe{p, v.Epoch}] = cloneClaim(v)
	if v.Epoch > c.newest[p].Epoch {
		c.newest[p] = cloneClaim(v)
	}
}

func (c *checker) count(replicas []string, by map[string]bool) int {
	n := 0
	for _, r := range replicas {
		if by[r] {
			n++
		}
	}
	return n
}

// wasChosen reports whether v was chosen.
func (c *checker) wasChosen(p int, v store.Claim) bool {
	if got, ok := c.chosen[pe{p, v.Epoch}]; ok && got.Base == v.Base && sameValue(got, v) {
		return true // the root, or the claim last chosen at this epoch
	}
	rec := c.accepts[pbe{p, v.Base, v.Epoch}]
	return rec != nil && rec.chosen && sameValue(rec.value, v)
}

// recorded checks a replica's record of v (a Choose, final or not) and
// notes whether it counts toward v's finality; prev is the replica's state
// before.
func (c *checker) recorded(node string, p int, v store.Claim, prev store.Meta) {
	if !c.wasChosen(p, v) {
		c.s.violate(vLearned, "%s recorded %s for p%d, which the checker never saw chosen", node, fmtClaim(v), p)
		return
	}
	// It counts if the node knew no newer chosen claim and had accepted no
	// newer successor of v's base.
	if prev.HasChosen && prev.Chosen.Epoch > v.Epoch || prev.Accepted.Owner != "" && prev.Accepted.Base == v.Base && prev.Accepted.Epoch >= v.Epoch && !sameClaim(prev.Accepted, v) {
		return
	}
	k := pbe{p, v.Base, v.Epoch}
	if c.records[k] == nil {
		c.records[k] = map[string]bool{}
	}
	c.records[k][node] = true
}

// markedFinal checks a replica marking v final: a majority of its base's
// replicas recorded it, and it is the only final claim at its epoch and
// the only final successor of its base.
func (c *checker) markedFinal(node string, p int, v store.Claim) {
	if isRoot(v) {
		if got := c.finals[pe{p, 0}]; !sameClaim(got, v) {
			c.s.violate(vFinal, "%s marked %s final for p%d, not the root %s", node, fmtClaim(v), p, fmtClaim(got))
		}
		return
	}
	if n := c.count(v.BaseReplicas, c.records[pbe{p, v.Base, v.Epoch}]); n < len(v.BaseReplicas)/2+1 {
		c.s.violate(vFinal, "%s marked %s final for p%d, recorded by only %d of base replicas %v", node, fmtClaim(v), p, n, v.BaseReplicas)
		return
	}
	if got, ok := c.finals[pe{p, v.Epoch}]; ok && !sameClaim(got, v) {
		c.s.violate(vFinal, "p%d: two final claims at epoch %d: %s and %s", p, v.Epoch, fmtClaim(got), fmtClaim(v))
		return
	}
	if got, ok := c.finalOf[pe{p, v.Base}]; ok && !sameClaim(got, v) {
		c.s.violate(vFinal, "p%d: two final successors of base e%d: %s and %s", p, v.Base, fmtClaim(got), fmtClaim(v))
		return
	}
	if _, ok := c.finals[pe{p, v.Epoch}]; !ok {
		c.s.logf("CHECK p%d: %s final", p, fmtClaim(v))
	}
	c.finals[pe{p, v.Epoch}] = cloneClaim(v)
	c.finalOf[pe{p, v.Base}] = cloneClaim(v)
}

// acting checks that a claim a node acts on (serves, builds on, keeps in
// its claims table) is final.
func (c *checker) acting(node string, p int, v store.Claim, what string) {
	if got, ok := c.finals[pe{p, v.Epoch}]; !ok || !sameClaim(got, v) {
		c.s.violate(vActed, "%s acted on %s for p%d (%s), which no replica marked final", node, fmtClaim(v), p, what)
	}
}

// applied checks the fence at an apply site: nothing at e below the
// fence in force (a promise; for a data write, store.Meta.Fence).
func (c *checker) applied(node string, p int, what string, e, fence epoch.Epoch) {
	if err := epoch.CheckWrite(fence, e); err != nil {
		c.s.violate(vFence, "%s applied %s to p%d at epoch %d below its fence %d", node, what, p, e, fence)
	}
}

// acked records a write acknowledged to the client.
func (c *checker) acked(p int, id string, e epoch.Epoch) {
	c.acks[p] = append(c.acks[p], ackedWrite{id, e})
	c.s.ackVersion++
}

// newestFinal returns p's final claim with the highest epoch.
func (c *checker) newestFinal(p int) store.Claim {
	var newest store.Claim
	for k, v := range c.finals {
		if k.p == p && k.e >= newest.Epoch {
			newest = v
		}
	}
	return newest
}

// wiped forgets the promises seen at n, whose data directory was lost.
func (c *checker) wiped(n *simNode) {
	i := slices.Index(c.s.nodes, n)
	clear(c.promised[i])
}

// afterStep checks what is not checked at its source.
func (c *checker) afterStep() {
	for i, n := range c.s.nodes {
		for p := range c.promised[i] {
			got := n.meta(p).Promised
			if got < c.promised[i][p] {
				c.s.violate(vPromise, "%s p%d promise went from %d down to %d", n.name, p, c.promised[i][p], got)
			}
			c.promised[i][p] = got
		}
	}
	v := [3]uint64{c.s.logVersion, c.s.servingVersion, c.s.ackVersion}
	if v == c.checkedAt {
		return
	}
	c.checkedAt = v
	for _, n := range c.s.nodes {
		if !n.up {
			continue
		}
		for p, pt := range n.parts {
			if pt.serving {
				c.checkServing(n, p)
			}
		}
	}
}

// checkServing: a node serving p under claim C has every write of p
// acknowledged at an epoch up to C's. (A zombie serving an older claim
// cannot have the writes of its successors, but must not be able to get its
// own acknowledged: the fence and the successor's majority see to that.)
func (c *checker) checkServing(n *simNode, p int) {
	pt := n.parts[p]
	for _, w := range c.acks[p] {
		if w.e > pt.claim.Epoch {
			continue
		}
		if !slices.ContainsFunc(n.logs[p], func(e logEntry) bool { return e.ID == w.id }) {
			c.s.violate(vAckLost, "%s serves p%d under %s without %s, acknowledged at epoch %d; its log: %s",
				n.name, p, fmtClaim(pt.claim), w.id, w.e, fmtLog(n.logs[p]))
			return
		}
	}
}
