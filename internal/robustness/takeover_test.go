package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
)

// With replicas, a run's fault bit only if partitions were claimed anew
// while a node was out: a join's or a leave's handoffs at other times do
// not count, nor does a node relearning, during an outage, a claim made
// before it.
func TestTakenOverCountsOnlyClaimsMadeWhileANodeWasOut(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	statuses := []api.Status{
		{Name: "a", Audit: map[int][]api.Claim{
			1: {{Owner: "a", Epoch: 1, At: at(0)}, {Owner: "b", Epoch: 2, At: at(5)}},  // taken over while a was out
			2: {{Owner: "c", Epoch: 1, At: at(0)}, {Owner: "d", Epoch: 2, At: at(30)}}, // a join's handoff, later
		}},
		{Name: "b", Audit: map[int][]api.Claim{
			1: {{Owner: "b", Epoch: 2, At: at(6)}},
			3: {{Owner: "b", Epoch: 1, At: at(0)}},
		}},
		{Name: "e", Audit: map[int][]api.Claim{
			3: {{Owner: "b", Epoch: 1, At: at(7)}}, // e, restarted, relearns it
		}},
	}
	outages := []outageWindow{{from: at(2), to: at(8)}}
	require.EqualValues(t, 1, takenOver(statuses, outages))
	require.Zero(t, takenOver(statuses, nil), "no node was out: the handoffs are planned")
}

func TestRunIsValidOnlyIfEachOfItsStepsBit(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	statuses := []api.Status{{Name: "a", Audit: map[int][]api.Claim{
		1: {{Owner: "a", Epoch: 1, At: at(0)}, {Owner: "b", Epoch: 2, At: at(5)}}, // taken over during the SIGSTOP
	}}}
	sigstop := step{name: "SIGSTOP", bitsBefore: 10, bitsAfter: 10, outages: []outageWindow{{from: at(2), to: at(8)}}}
	join := step{name: "join with paused handlers", bitsBefore: 10, bitsAfter: 12}
	idle := step{name: "leave with paused handlers", bitsBefore: 12, bitsAfter: 12}

	f := &faults{steps: []step{sigstop, join}}
	require.Empty(t, f.unbitten(statuses, true))
	require.Equal(t, "SIGSTOP", f.unbitten(statuses, false), "without replicas a takeover is no evidence")
	f.steps = []step{sigstop, idle}
	require.Equal(t, "leave with paused handlers", f.unbitten(statuses, true), "an earlier step that bit does not make up for a later one that did not")
	f.steps = []step{idle, join}
	require.Equal(t, "leave with paused handlers", f.unbitten(statuses, true), "nor a later step that bit for an earlier one")
}
