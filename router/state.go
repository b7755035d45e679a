package router

import (
	"context"

	"github.com/singlewriter/singlewriter/epoch"
)

// Handler runs a call on the key's owner. Calls for one key run one at a
// time, in arrival order; calls for different keys run in parallel. The
// returned bytes are the caller's response; they are stored with req.State's
// changes in one commit, and a retry with the same request ID gets them
// back without running again. A non-nil error makes the call write nothing
// and reaches the caller wrapped in ErrHandler.
//
// ctx derives from the caller's own context when the call entered at the owner. A
// call forwarded from another node runs under the caller's deadline (the
// time the caller had left when the request was sent, so it ends no
// earlier than the caller's), and its ctx also ends when the caller
// cancels its own (a best-effort notice, which a full connection may
// drop) or the connection from that node drops. Either way ctx
// ends when the node closes, and when the handler returns (as an
// http.Request's does: a goroutine that must outlive the handler needs
// its own). It also ends, with cause owner.ErrRevoked, when the
// partition moves to a new claim while the handler runs (its drain ran
// out of Config.DrainTimeout, and this node promised the new claim): the
// new owner may run the key's next calls from then on, so stop. A
// handler that then returns ctx's error (context.Canceled or the cause)
// has its call run again at the new owner; one that returns a result has
// its commit fenced; any other error reaches the caller. A call whose ctx ends
// while it waits behind its key's earlier calls does not run.
//
// A handler may Call other keys, with ctx: a Call of its own key, which
// would wait behind the handler itself, fails with ErrCallCycle. Two
// handlers that Call each other's keys wait for each other until one's
// ctx ends, as two locks taken in opposite orders would: give such calls
// a deadline, or take keys in one order. It must
// not Close its node or Leave the cluster: both wait for every running
// handler, its own included, and would never return. Its goroutine goes on
// to run other keys' calls: a handler that locks it to its thread
// (runtime.LockOSThread) or sets its profiler labels
// (pprof.SetGoroutineLabels) must undo that before it returns.
type Handler func(ctx context.Context, req *Request) ([]byte, error)

// Request is one call as its handler sees it.
type Request struct {
	// Key is the call's key.
	Key []byte
	// Method is the handler's name.
	Method string
	// Payload is the caller's payload.
	Payload []byte
	// Partition is the key's partition.
	Partition int
	// Epoch is the partition's fencing token on this owner. Every write of
	// this call is checked against it; pass it to resources outside the
	// library to fence them too (UPDATE ... WHERE fence <= $epoch).
	Epoch epoch.Epoch
	// State is the key's value, as of every earlier call on the key.
	State *State
	// ID is the call's request ID (see RequestID; Call draws one if the
	// caller gave none); do not modify it. A call can run again on
	// another owner (its owner was deposed mid-call), so a handler that
	// Calls other keys should give those calls request IDs derived from
	// it (a hash of ID and the other key, say): they then run once.
	ID []byte
}

// State is a transactional view of one key's value: changes apply only if
// the handler succeeds, atomically with the call's response.
type State struct {
	old     []byte
	found   bool
	changed bool
	value   []byte
}

// Get returns the key's value and whether it exists. After Put, the value
// is the one the call will write: changing it before the handler returns
// changes the write, and the handler may return it as its response (the
// write is copied when the handler returns).
func (s *State) Get() ([]byte, bool) {
	if s.changed {
		return s.value, s.value != nil
	}
	return s.old, s.found
}

// Put sets the key's value (an empty value is a value, not a delete).
func (s *State) Put(v []byte) {
	s.changed, s.value = true, append([]byte{}, v...)
}

// Delete removes the key.
func (s *State) Delete() {
	s.changed, s.value = true, nil
}
