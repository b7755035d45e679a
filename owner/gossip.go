package owner

import "errors"

// The Owner is the ring's Delegate: its claims table travels with gossip.
// memberlist calls these methods under its own locks, so they only touch
// the claims table (which never blocks) and signal the loop.

// LocalState returns the full claims table for a push/pull exchange.
func (o *Owner) LocalState() []byte { return o.claims.Encode() }

// MergeRemoteState merges a peer's full claims table. The first one makes
// the node synced: from then on it may acquire partitions.
func (o *Owner) MergeRemoteState(buf []byte) {
	if o.merge(buf) {
		o.synced.Store(true)
	}
}

// NotifyMsg merges a gossiped claim update.
func (o *Owner) NotifyMsg(msg []byte) { o.merge(msg) }

func (o *Owner) merge(buf []byte) bool {
	_, err := o.claims.MergeEncoded(buf)
	if errors.Is(err, ErrNoCluster) {
		return false
	}
	if err != nil {
		o.cfg.Logger.Warn("ignoring claims from a peer", "err", err)
		return false
	}
	o.kick()
	return o.claims.Cluster() != ""
}
