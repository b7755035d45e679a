// Package api is the HTTP control and client API between the robustness
// harness and its node program: the JSON bodies of each endpoint, and the
// register and counter semantics both sides agree on.
//
//	POST /call            CallRequest  -> CallResult
//	POST /fault           Fault        -> 204
//	POST /pause-handlers  Pause        -> 204
//	GET  /status                       -> Status
//	POST /leave                        -> Status, then the process exits
package api

import (
	"bytes"
	"time"

	"github.com/singlewriter/singlewriter/router"
)

// The methods of the node program. Registers take put, get and cas;
// counters take inc and get.
const (
	// MethodGet returns the key's value ("" if none).
	MethodGet = "get"
	// MethodPut sets the key's value to the payload and returns "ok "
	// and the payload: an answer of its own, which a repeat must get.
	MethodPut = "put"
	// MethodCAS sets the key's value to new if it is old (payload
	// CASPayload(old, new)) and returns "1", else returns "0".
	MethodCAS = "cas"
	// MethodInc adds one to the key's decimal counter and returns the new
	// value.
	MethodInc = "inc"
)

// CASPayload encodes a compare-and-set's arguments.
func CASPayload(old, new string) []byte { return []byte(old + "\x00" + new) }

// ParseCAS decodes CASPayload.
func ParseCAS(b []byte) (old, new string) {
	o, n, _ := bytes.Cut(b, []byte{0})
	return string(o), string(n)
}

// CallRequest is one router.Call to run on the node.
type CallRequest struct {
	// Key is the call's key.
	Key string `json:"key"`
	// Method is one of the Method constants.
	Method string `json:"method"`
	// Payload is the call's payload.
	Payload string `json:"payload"`
	// RequestID is passed to router.RequestID.
	RequestID string `json:"request_id"`
	// Timeout bounds the call; at its end the outcome is unknown.
	Timeout time.Duration `json:"timeout"`
}

// The kinds of call outcome.
const (
	// KindOK: the call ran and its writes are durable.
	KindOK = "ok"
	// KindFenced: the handler ran but its commit was refused at a stale
	// epoch; nothing was written.
	KindFenced = "fenced"
	// KindHandler: the handler failed; nothing was written.
	KindHandler = "handler"
	// KindReused: the request ID was used before for another call on the
	// key (router.ErrRequestIDReused); nothing was written.
	KindReused = "reused"
	// KindUnavailable: no owner answered in time; the call may or may not
	// have run.
	KindUnavailable = "unavailable"
	// KindOther: any other error; the outcome is unknown.
	KindOther = "other"
)

// CallResult is a call's outcome.
type CallResult struct {
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// Body is the handler's response, for KindOK.
	Body string `json:"body,omitempty"`
	// Error is the call's error text, for every other kind.
	Error string `json:"error,omitempty"`
}

// Definite reports whether the outcome is known: it ran (ok) or it wrote
// nothing (fenced, handler, reused).
func (r CallResult) Definite() bool {
	return r.Kind == KindOK || r.Kind == KindFenced || r.Kind == KindHandler || r.Kind == KindReused
}

// The fault operations.
const (
	FaultBlock   = "block"
	FaultUnblock = "unblock"
	FaultHeal    = "heal"
	FaultDelay   = "delay"
	FaultDrop    = "drop"
)

// Fault changes the node's link rules (see internal/faultnet).
type Fault struct {
	// Op is one of the Fault constants.
	Op string `json:"op"`
	// IPs are the peers to block or unblock.
	IPs []string `json:"ips,omitempty"`
	// Delay is the delay of every outgoing write and packet, for
	// FaultDelay (faultnet.Net.SetDelay).
	Delay time.Duration `json:"delay,omitempty"`
	// Drop is the drop rule's probability, for FaultDrop
	// (faultnet.Net.SetDrop).
	Drop float64 `json:"drop,omitempty"`
}

// Pause makes the node's next write handler on each of Keys sleep for
// Sleep after computing its write, as a long GC pause of one goroutine
// would. A key's later writes queue behind it.
type Pause struct {
	// Sleep is how long each paused handler sleeps.
	Sleep time.Duration `json:"sleep"`
	// UntilMoved ends a pause as soon as the node knows a claim of the
	// key's partition newer than the one the handler runs under: its
	// partition moved, and its write is late. Sleep is then the longest
	// pause.
	UntilMoved bool `json:"until_moved"`
	// Keys are the keys whose next write handler pauses.
	Keys []string `json:"keys"`
}

// Claim is a partition's claim as a node knows it.
type Claim struct {
	// Owner is the owning node's name; "" if no claim is known.
	Owner string `json:"owner"`
	// Epoch is the claim's epoch.
	Epoch uint64 `json:"epoch"`
	// At is when the node recorded the claim (audit entries only).
	At time.Time `json:"at,omitzero"`
}

// Status is a node's view of the cluster and its own counters.
type Status struct {
	// Name is the node's name.
	Name string `json:"name"`
	// Members are the members in the node's view.
	Members []string `json:"members"`
	// Claims is the newest claim known per partition.
	Claims []Claim `json:"claims"`
	// Serving maps each partition served here to its epoch.
	Serving map[int]uint64 `json:"serving"`
	// Settled is router.Node.Settled: every claim the node knows has the
	// owner and the replicas that placement gives.
	Settled bool `json:"settled"`
	// Audit lists each partition's epoch transitions recorded here.
	Audit map[int][]Claim `json:"audit"`
	// Stats are the node's counters.
	Stats router.Stats `json:"stats"`
	// Paused counts handlers sleeping in a pause now; PausedTotal, since
	// start.
	Paused      int64 `json:"paused"`
	PausedTotal int64 `json:"paused_total"`
}

// Bit reports whether the node saw the faults bite: a fenced write, a
// refused promise, a failed acquire or a drain timeout.
func (s Status) Bit() uint64 {
	return s.Stats.FencedCommits + s.Stats.RefusedPrepares + s.Stats.FailedAcquires + s.Stats.DrainTimeouts
}
