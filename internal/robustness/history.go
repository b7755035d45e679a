package main

import (
	"slices"
	"sync"
	"time"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
)

// op is one operation of the history: a client's call with its call and
// return times (nanoseconds since the run began). An operation whose
// outcome is unknown has Unknown set and no meaningful Return.
type op struct {
	Client int `json:"client"`
	// ID is the request ID of every attempt (empty for the final reads).
	ID     string `json:"id"`
	Key    string `json:"key"`
	Method string `json:"method"`
	// Arg is put's value, or cas's new value; Old is cas's expected value.
	Arg string `json:"arg,omitempty"`
	Old string `json:"old,omitempty"`
	// Kind is the outcome's kind (see api); Out is the response body.
	Kind    string `json:"kind"`
	Out     string `json:"out,omitempty"`
	Unknown bool   `json:"unknown,omitempty"`
	Call    int64  `json:"call"`
	Return  int64  `json:"return"`
	// Attempts counts the attempts, all with the same request ID.
	Attempts int `json:"attempts"`
	// Reused is set on a put sent under the request ID of an earlier
	// acknowledged put or cas (swapped or not) of its client on the same
	// key: it must be refused (api.KindReused) and write nothing.
	Reused bool `json:"reused,omitempty"`
	// Repeat is set on a call sent again, request ID, method and payload,
	// after it was acknowledged with Want: it must get Want again and
	// write nothing.
	Repeat bool   `json:"repeat,omitempty"`
	Want   string `json:"want,omitempty"`
}

// isWrite reports whether the operation may change its key.
func (o op) isWrite() bool { return o.Method != "get" }

// wroteNothing reports whether the operation certainly changed nothing: it
// ended with a refusal (fenced, handler error, refused as reused), it
// reused a request ID and was not acknowledged, or it repeated an
// acknowledged call: the library promises to run neither (a violation of
// that promise is checkRequestIDs's).
func (o op) wroteNothing() bool {
	return o.Repeat || (o.Kind != api.KindOK && (!o.Unknown || o.Reused))
}

// history collects the operations of a run, and the periods during which
// some attempt ended without an answer.
type history struct {
	start time.Time
	// mu guards ops and outages.
	mu      sync.Mutex
	ops     []op
	outages []interval
}

// interval is a period in nanoseconds since the run began.
type interval struct{ From, To int64 }

func newHistory() *history { return &history{start: time.Now()} }

// now returns the time since the run began.
func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(o op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, o)
}

func (h *history) outage(from, to int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outages = append(h.outages, interval{from, to})
}

// snapshot returns the operations so far.
func (h *history) snapshot() []op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]op(nil), h.ops...)
}

// countSince counts operations with a definite outcome that returned in
// [from, to).
func (h *history) countSince(from, to int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, o := range h.ops {
		if !o.Unknown && o.Return >= from && o.Return < to {
			n++
		}
	}
	return n
}

// unavailable returns the time, in seconds, during which at least one
// attempt was under way that ended without an answer.
func (h *history) unavailable() float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	ivs := append([]interval(nil), h.outages...)
	slices.SortFunc(ivs, func(a, b interval) int { return int(a.From - b.From) })
	var total, end int64
	for _, iv := range ivs {
		if iv.From > end {
			end = iv.From
		}
		if iv.To > end {
			total += iv.To - end
			end = iv.To
		}
	}
	return float64(total) / 1e9
}
