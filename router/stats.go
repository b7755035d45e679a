package router

import "github.com/singlewriter/singlewriter/owner"

// Stats counts events on this node since it started.
type Stats struct {
	owner.Stats
	// FencedCommits counts calls whose handler ran here but whose commit
	// was refused because the partition had moved to a newer epoch.
	FencedCommits uint64
	// FailedCommits counts calls whose handler ran here but whose commit
	// failed otherwise: no majority of the replicas confirmed it in time, or
	// the store failed.
	//
	// With replication factor 1 a call counted in either wrote nothing. With
	// replicas, some of them may have kept its write: the caller's retry,
	// under the same request ID, is then answered with the stored response,
	// and otherwise runs the handler again.
	FailedCommits uint64
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	return Stats{Stats: n.owner.Stats(), FencedCommits: n.fenced.Load(), FailedCommits: n.failedCommits.Load()}
}
