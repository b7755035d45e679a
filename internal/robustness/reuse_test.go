package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
)

// The checkers' view of a reused request ID: the refused put has no
// effect, one acknowledged is a violation, and so is a fresh ID refused.
func TestReusedIDChecks(t *testing.T) {
	acked := op{Client: 1, ID: "c1-3", Key: "r1", Method: api.MethodPut, Arg: "v1.3", Kind: api.KindOK, Call: 0, Return: 10}
	refused := op{Client: 1, ID: "c1-3", Key: "r1", Method: api.MethodPut, Arg: "v1.9", Kind: api.KindReused, Reused: true, Call: 20, Return: 30}
	require.Empty(t, checkRequestIDs([]op{acked, refused}))

	ran := refused
	ran.Kind = api.KindOK
	require.Len(t, checkRequestIDs([]op{acked, ran}), 1, "a reused ID's call acknowledged")
	fresh := acked
	fresh.ID, fresh.Kind = "c1-4", api.KindReused
	require.Len(t, checkRequestIDs([]op{fresh}), 1, "a fresh ID refused as reused")

	require.Empty(t, checkRegister([]op{acked, refused}, "r1", "v1.3"))
	require.NotEmpty(t, checkRegister([]op{acked, refused}, "r1", "v1.9"), "the refused put's value is final")

	get := op{Client: 2, Key: "r1", Method: api.MethodGet, Kind: api.KindOK, Out: "v1.3", Call: 40, Return: 50}
	violations, finished := checkLinearizable([]op{acked, refused, get}, t.TempDir())
	require.True(t, finished)
	require.Empty(t, violations)
	get.Out = "v1.9"
	violations, finished = checkLinearizable([]op{acked, refused, get}, t.TempDir())
	require.True(t, finished)
	require.NotEmpty(t, violations, "a read of the refused put's value")

	// Not acknowledged, a reused ID's put still never ran: unknown, its
	// value read or final is a violation; run to a handler error, the
	// handler ran.
	unknown := refused
	unknown.Kind, unknown.Unknown = api.KindUnavailable, true
	violations, finished = checkLinearizable([]op{acked, unknown, get}, t.TempDir())
	require.True(t, finished)
	require.NotEmpty(t, violations, "a read of the unknown reused put's value")
	require.NotEmpty(t, checkRegister([]op{acked, unknown}, "r1", "v1.9"), "the unknown reused put's value is final")
	handled := refused
	handled.Kind = api.KindHandler
	require.Len(t, checkRequestIDs([]op{acked, handled}), 1, "a reused ID's handler ran")
}

// The checkers' view of a repeated call: it has no effect, and must get
// the first answer again.
func TestRepeatChecks(t *testing.T) {
	acked := op{Client: 1, ID: "c1-3", Key: "r1", Method: api.MethodPut, Arg: "v1.3", Kind: api.KindOK, Out: "ok v1.3", Call: 0, Return: 10}
	newer := op{Client: 2, ID: "c2-1", Key: "r1", Method: api.MethodPut, Arg: "v2.1", Kind: api.KindOK, Out: "ok v2.1", Call: 12, Return: 14}
	repeat := acked
	repeat.Repeat, repeat.Want, repeat.Call, repeat.Return = true, acked.Out, 20, 30
	get := op{Client: 3, Key: "r1", Method: api.MethodGet, Kind: api.KindOK, Out: "v2.1", Call: 40, Return: 50}
	require.Empty(t, checkRequestIDs([]op{acked, newer, repeat, get}))
	violations, finished := checkLinearizable([]op{acked, newer, repeat, get}, t.TempDir())
	require.True(t, finished)
	require.Empty(t, violations, "the repeat counted as a second write of its value")
	require.Empty(t, checkRegister([]op{acked, newer, repeat}, "r1", "v2.1"))

	other := repeat
	other.Out = "another answer"
	require.Len(t, checkRequestIDs([]op{acked, other}), 1, "a repeat answered otherwise")
	refused := repeat
	refused.Kind, refused.Out = api.KindReused, ""
	require.Len(t, checkRequestIDs([]op{acked, refused}), 1, "a repeat refused as reused")
}
