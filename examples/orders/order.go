package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/examples/internal/cluster"
	"github.com/singlewriter/singlewriter/router"
)

// order is an order's state, stored as JSON under its key.
type order struct {
	Status   string `json:"status"`
	Payment  string `json:"payment,omitempty"`
	Tracking string `json:"tracking,omitempty"`
	// Node and Epoch say where, and at which epoch of the key's partition,
	// the last transition was written.
	Node  string      `json:"node"`
	Epoch epoch.Epoch `json:"epoch"`
}

func (o order) String() string {
	s := o.Status
	if o.Payment != "" {
		s += ", payment " + o.Payment
	}
	if o.Tracking != "" {
		s += ", tracking " + o.Tracking
	}
	return s
}

// transition is one edge of the state machine: method moves an order from
// status from ("" for an order that does not exist yet) to status to.
type transition struct {
	method   string
	from, to string
	// apply records the payload in the order.
	apply func(o *order, payload string)
}

// transitions are the only ones allowed: created -> paid -> shipped.
var transitions = []transition{
	{method: "create", from: "", to: "created", apply: func(*order, string) {}},
	{method: "pay", from: "created", to: "paid", apply: func(o *order, p string) { o.Payment = p }},
	{method: "ship", from: "paid", to: "shipped", apply: func(o *order, p string) { o.Tracking = p }},
}

// shop is the order service as every instance embeds it.
type shop struct {
	// ctx is the program's; a paused call waits at most until it ends.
	ctx context.Context
	// pause stops the first call of method pauseMethod on key pauseKey
	// after it computed its write and before it returns it for commit.
	pause                 *cluster.Pause
	pauseMethod, pauseKey string
	// paused is the write the paused call computed. It is set before
	// pause.Paused is closed, and read after.
	paused order
}

// handlers registers every transition and "get" on n.
func (s *shop) handlers(n *router.Node) {
	for _, t := range transitions {
		n.Handle(t.method, s.handler(n, t))
	}
	n.Handle("get", func(_ context.Context, req *router.Request) ([]byte, error) {
		v, _ := req.State.Get()
		return v, nil
	})
}

// handler applies t to the order under the call's key, or refuses it with
// an error, which writes nothing. It answers the new state.
func (s *shop) handler(n *router.Node, t transition) router.Handler {
	return func(_ context.Context, req *router.Request) ([]byte, error) {
		var o order
		if v, ok := req.State.Get(); ok {
			if err := json.Unmarshal(v, &o); err != nil {
				return nil, err
			}
		}
		if o.Status != t.from {
			return nil, refusal(t, string(req.Key), o.Status)
		}
		t.apply(&o, string(req.Payload))
		o.Status, o.Node, o.Epoch = t.to, n.Name(), req.Epoch
		v, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		if t.method == s.pauseMethod && string(req.Key) == s.pauseKey && s.pause.Due() {
			s.paused = o
			s.pause.Wait(s.ctx) // the write is computed; now a long pause
		}
		req.State.Put(v)
		return v, nil
	}
}

// refusal says why t does not apply to an order in status status.
func refusal(t transition, key, status string) error {
	if status == "" {
		return fmt.Errorf("cannot %s %s: no such order", t.method, key)
	}
	if t.from == "" {
		return fmt.Errorf("cannot %s %s: it exists, %s", t.method, key, status)
	}
	return fmt.Errorf("cannot %s %s: it is %s, not %s", t.method, key, status, t.from)
}
