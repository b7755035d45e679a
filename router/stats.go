package router

import "github.com/singlewriter/singlewriter/owner"

// Stats counts events on this node since it started.
type Stats struct {
	owner.Stats
	// FencedCommits counts calls whose handler ran here but whose commit
	// the store refused because the partition had moved to a newer epoch.
	FencedCommits uint64
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	return Stats{Stats: n.owner.Stats(), FencedCommits: n.fenced.Load()}
}
