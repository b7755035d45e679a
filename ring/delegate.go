package ring

// Delegate is the consumer's replicated state (for example a claims table),
// carried by gossip: full state on push/pull, deltas as broadcasts.
//
// Its methods are called from memberlist's goroutines, under memberlist's
// locks: they must not block and must not call back into the Ring.
type Delegate interface {
	// LocalState returns this node's full state, sent to a peer on push/pull
	// (periodically, and when a node joins). The Ring does not keep the slice.
	LocalState() []byte
	// MergeRemoteState merges a peer's full state, received on push/pull
	// (including at Join). buf belongs to the callee.
	MergeRemoteState(buf []byte)
	// NotifyMsg handles a message a peer queued with Broadcast. msg belongs to
	// the callee.
	NotifyMsg(msg []byte)
}
