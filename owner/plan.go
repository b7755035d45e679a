package owner

import (
	"slices"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
)

// Action is what Plan asks of the node for one partition.
type Action int

const (
	// Resume: the newest claim is ours but we do not serve it (after a
	// restart): serve it again if no higher epoch was promised meanwhile.
	Resume Action = iota + 1
	// Acquire: the ring wants us to own the partition and the newest claim
	// names another owner (or ours, but a higher promise fenced it).
	Acquire
	// Release: we serve an older claim than the newest one (learned by
	// gossip): stop, and drop the data unless we are a replica.
	Release
	// Finalize: the store held a chosen claim not known to be final at
	// load, so the claims table lacks it: make it final (not from Plan).
	Finalize
)

// Step is one partition's action.
type Step struct {
	// P is the partition.
	P int
	// Action is what to do with it.
	Action Action
	// Claim is the claim the action starts from: the newest one known,
	// or, for Finalize, the one to make final.
	Claim store.Claim
	// Replicas, for an Acquire, is the replica set to propose, this node
	// first; nil means the ring's.
	Replicas []string
}

// Plan compares the ring's desired placement with the claims and returns
// what node self should do. serving reports the claim self serves a
// partition under, if any; fenced reports whether self promised a partition
// an epoch above claim c's, so that c cannot be resumed; lagging reports
// whether a replica of a served partition missed a write and is due a
// resync. Plan is pure given those.
//
// A partition self serves is acquired again, by self, from its own claim
// when the ring's replica set for it changed (a replica failed or a node
// joined) or a replica lags: the new claim syncs the new replica set.
// A claim with several replicas is never resumed after a restart, only
// acquired: its replicas may hold writes this node's disk lacks, and the
// acquisition takes the data of the most advanced of them.
func Plan(self string, t *ring.Table, claims []store.Claim, serving func(p int) (store.Claim, bool), fenced func(p int, c store.Claim) bool, lagging func(p int) bool) []Step {
	var steps []Step
	for p, c := range claims {
		if c.Owner == "" {
			continue
		}
		desired := p < len(t.Owners) && t.Owners[p] == self
		if served, ok := serving(p); ok {
			switch {
			case served.Epoch < c.Epoch:
				steps = append(steps, Step{P: p, Action: Release, Claim: c})
			case desired && (!sameMembers(served.Replicas, t.Replicas[p]) || lagging(p)):
				steps = append(steps, Step{P: p, Action: Acquire, Claim: c})
			}
			continue
		}
		switch {
		case c.Owner == self && len(c.Replicas) <= 1 && !fenced(p, c):
			steps = append(steps, Step{P: p, Action: Resume, Claim: c})
		case desired:
			steps = append(steps, Step{P: p, Action: Acquire, Claim: c})
		}
	}
	return steps
}

// sameMembers reports whether a and b hold the same names, in any order.
func sameMembers(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
