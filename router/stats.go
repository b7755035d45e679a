package router

import "github.com/singlewriter/singlewriter/owner"

// Stats counts events on this node since it started.
type Stats struct {
	owner.Stats
	// FencedCommits counts calls whose handler ran here but whose commit
	// the store refused because the partition had moved to a newer epoch.
	FencedCommits uint64
	// FailedCommits counts calls whose handler ran here but whose commit
	// failed otherwise: no majority of the replicas confirmed it in time, or
	// the store failed. Like a fenced one, such a call wrote nothing and its
	// caller retries it, so its handler runs again.
	FailedCommits uint64
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	return Stats{Stats: n.owner.Stats(), FencedCommits: n.fenced.Load(), FailedCommits: n.failedCommits.Load()}
}
