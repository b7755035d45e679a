package owner

import (
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
	P      int
	Action Action
	Claim  store.Claim
}

// Plan compares the ring's desired placement with the claims and returns
// what node self should do. serving reports the claim self serves a
// partition under, if any; fenced reports whether self promised a partition an epoch
// above claim c's, so that c cannot be resumed. Plan is pure given those.
func Plan(self string, t *ring.Table, claims []store.Claim, serving func(p int) (store.Claim, bool), fenced func(p int, c store.Claim) bool) []Step {
	var steps []Step
	for p, c := range claims {
		if c.Owner == "" {
			continue
		}
		if served, ok := serving(p); ok {
			if served.Epoch < c.Epoch {
				steps = append(steps, Step{P: p, Action: Release, Claim: c})
			}
			continue
		}
		desired := p < len(t.Owners) && t.Owners[p] == self
		switch {
		case c.Owner == self && !fenced(p, c):
			steps = append(steps, Step{P: p, Action: Resume, Claim: c})
		case desired:
			steps = append(steps, Step{P: p, Action: Acquire, Claim: c})
		}
	}
	return steps
}
