package owner

import "sync/atomic"

// Stats counts protocol events on this node since it started. Tests and
// operators read it to see that ownership moved, and that faults bit.
type Stats struct {
	// Acquired counts claims this node had chosen for itself.
	Acquired uint64
	// FailedAcquires counts acquire attempts that ended without a claim
	// (lost races, unreachable replicas, failed syncs).
	FailedAcquires uint64
	// RefusedPrepares counts Prepares this node answered without promising:
	// a higher promise, a newer claim known, or, with an error, a base it
	// takes no part in (it lost its data directory, or its first copy as a
	// backup never arrived). Failures, of its store say, are not counted.
	RefusedPrepares uint64
	// DrainTimeouts counts drains that ended with calls still in flight,
	// whose commits are then fenced.
	DrainTimeouts uint64
	// CopiesInstalled counts the copies of a partition this node installed
	// for a proposal, each fetched whole from its source.
	CopiesInstalled uint64
	// PreCopiesInstalled counts the copies this node installed from a
	// pre-copy and the entries that changed since (see PreCopy).
	PreCopiesInstalled uint64
}

// counters are the live Stats.
type counters struct {
	acquired, failedAcquires, refusedPrepares, drainTimeouts atomic.Uint64
	copiesInstalled, preCopiesInstalled                      atomic.Uint64
}

// Stats returns the node's protocol counters.
func (o *Owner) Stats() Stats {
	return Stats{
		Acquired:           o.stats.acquired.Load(),
		FailedAcquires:     o.stats.failedAcquires.Load(),
		RefusedPrepares:    o.stats.refusedPrepares.Load(),
		DrainTimeouts:      o.stats.drainTimeouts.Load(),
		CopiesInstalled:    o.stats.copiesInstalled.Load(),
		PreCopiesInstalled: o.stats.preCopiesInstalled.Load(),
	}
}
