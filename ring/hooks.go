package ring

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/memberlist"
)

// hooks receives memberlist's callbacks: it is the memberlist Delegate,
// EventDelegate, AliveDelegate, MergeDelegate and ConflictDelegate of one
// Ring. memberlist calls
// it from its own goroutines while holding its internal locks, so no method
// blocks or calls memberlist: membership events record a copy of the member
// and signal kick.
type hooks struct {
	fp     Fingerprint // this node's fingerprint
	user   Delegate    // may be nil
	queue  *memberlist.TransmitLimitedQueue
	kick   chan<- struct{} // capacity 1: a pending signal absorbs later ones
	logger *slog.Logger

	// refusals counts merges refused for another fingerprint. Join reads it
	// to tell a refusal from an unreachable seed.
	refusals atomic.Uint64

	// mu guards self, meta and members.
	mu sync.Mutex
	// self is this node's metadata, meta its encoding; SetClusterID and
	// SetLeaving change self.
	self nodeMeta
	meta []byte
	// members holds a copy of every live member's node, as the events
	// reported it. memberlist.Members returns its own Node values, which it
	// updates in place under its lock (a new Meta, a new address), so
	// reading them races; the events hand them over under that lock.
	members map[string]memberlist.Node
}

// setMember records a copy of node as live.
func (h *hooks) setMember(node *memberlist.Node) {
	c := *node
	c.Meta, c.Addr = slices.Clone(node.Meta), slices.Clone(node.Addr)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.members == nil {
		h.members = map[string]memberlist.Node{}
	}
	h.members[node.Name] = c
}

// liveMembers returns copies of the live members' nodes, ordered by name.
func (h *hooks) liveMembers() []memberlist.Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	nodes := make([]memberlist.Node, 0, len(h.members))
	for _, n := range h.members {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b memberlist.Node) int { return strings.Compare(a.Name, b.Name) })
	return nodes
}

// selfMeta returns this node's metadata.
func (h *hooks) selfMeta() nodeMeta {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.self
}

// setSelf makes m this node's metadata.
func (h *hooks) setSelf(m nodeMeta) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.self, h.meta = m, encodeMeta(m)
}

// notify asks the table goroutine to rebuild the table, without blocking: if
// a signal is already pending, the rebuild it causes sees this change too.
func (h *hooks) notify() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// check returns node's metadata if it decodes and carries this node's
// fingerprint, or an error naming both fingerprints.
func (h *hooks) check(node *memberlist.Node) (nodeMeta, error) {
	m, err := decodeMeta(node.Meta)
	if err != nil {
		h.logger.Warn("ring: refusing node with foreign metadata", "node", node.Name, "addr", node.Address())
		return m, fmt.Errorf("node %s: %w", node.Name, err)
	}
	if m.Fingerprint != h.fp {
		h.logger.Warn("ring: refusing node with another fingerprint",
			"node", node.Name, "addr", node.Address(), "theirs", m.Fingerprint.String(), "ours", h.fp.String())
		return m, fmt.Errorf("%w: node %s has %v, this node has %v", ErrIncompatible, node.Name, m.Fingerprint, h.fp)
	}
	return m, nil
}

// otherCluster reports whether theirs names another cluster than ours:
// both are set and differ. A node without an ID yet is of no other cluster.
func otherCluster(ours, theirs string) bool {
	return ours != "" && theirs != "" && ours != theirs
}

// NotifyAlive refuses a node with another fingerprint, and a new node of
// another cluster ID (memberlist.AliveDelegate). A member that turns out
// to be of another cluster ID (two nodes of a new cluster created two) is
// accepted, so that its new metadata is recorded, and left out of tables.
func (h *hooks) NotifyAlive(node *memberlist.Node) error {
	m, err := h.check(node)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, known := h.members[node.Name]; !known && otherCluster(h.self.ClusterID, m.ClusterID) {
		h.logger.Warn("ring: refusing node of another cluster ID",
			"node", node.Name, "addr", node.Address(), "theirs", m.ClusterID, "ours", h.self.ClusterID)
		return fmt.Errorf("%w: node %s belongs to cluster ID %s, this node to %s", ErrIncompatible, node.Name, m.ClusterID, h.self.ClusterID)
	}
	return nil
}

// NotifyMerge refuses a push/pull if any peer has another fingerprint, or
// if the peers carry cluster IDs and none is this node's: they are another
// cluster's (memberlist.MergeDelegate). A push/pull that also lists a
// member of another cluster ID, which tables leave out, is not refused.
func (h *hooks) NotifyMerge(peers []*memberlist.Node) error {
	ids := make([]string, 0, len(peers))
	for _, p := range peers {
		m, err := h.check(p)
		if err != nil {
			h.refusals.Add(1)
			return err
		}
		ids = append(ids, m.ClusterID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	other := slices.ContainsFunc(ids, func(id string) bool { return otherCluster(h.self.ClusterID, id) })
	if other && !slices.Contains(ids, h.self.ClusterID) {
		h.refusals.Add(1)
		h.logger.Warn("ring: refusing the state of another cluster ID", "theirs", ids, "ours", h.self.ClusterID)
		return fmt.Errorf("%w: the peers belong to cluster IDs %v, this node to %s", ErrIncompatible, slices.Compact(slices.Sorted(slices.Values(ids))), h.self.ClusterID)
	}
	return nil
}

// NotifyJoin records the member and signals the table goroutine
// (memberlist.EventDelegate).
func (h *hooks) NotifyJoin(node *memberlist.Node) {
	h.setMember(node)
	h.notify()
}

// NotifyLeave forgets the member and signals the table goroutine
// (memberlist.EventDelegate).
func (h *hooks) NotifyLeave(node *memberlist.Node) {
	h.mu.Lock()
	delete(h.members, node.Name)
	h.mu.Unlock()
	h.notify()
}

// NotifyUpdate records the member's new state and signals the table
// goroutine (memberlist.EventDelegate).
func (h *hooks) NotifyUpdate(node *memberlist.Node) {
	h.setMember(node)
	h.notify()
}

// NotifyConflict logs a node that claims a member's name from another
// address (memberlist.ConflictDelegate), which memberlist ignores: two
// nodes configured with one name, or a node restarted at a new address
// before its old one was found dead (then it is accepted after
// deadNodeReclaimTime).
func (h *hooks) NotifyConflict(existing, other *memberlist.Node) {
	h.logger.Warn("ring: two nodes claim one name; keeping the known one",
		"node", existing.Name, "addr", existing.Address(), "other_addr", other.Address())
}

// NodeMeta returns this node's metadata (memberlist.Delegate); validate
// checked it fits memberlist.MetaMaxSize.
func (h *hooks) NodeMeta(int) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.meta
}

// NotifyMsg hands a copy of a peer's broadcast to the Delegate
// (memberlist.Delegate); memberlist reuses its buffer.
func (h *hooks) NotifyMsg(msg []byte) {
	if h.user != nil && len(msg) > 0 {
		h.user.NotifyMsg(slices.Clone(msg))
	}
}

// GetBroadcasts serves queued broadcasts to memberlist's gossip
// (memberlist.Delegate).
func (h *hooks) GetBroadcasts(overhead, limit int) [][]byte {
	return h.queue.GetBroadcasts(overhead, limit)
}

// LocalState returns the Delegate's full state (memberlist.Delegate).
func (h *hooks) LocalState(bool) []byte {
	if h.user == nil {
		return nil
	}
	return h.user.LocalState()
}

// MergeRemoteState hands a copy of a peer's full state to the Delegate
// (memberlist.Delegate).
func (h *hooks) MergeRemoteState(buf []byte, _ bool) {
	if h.user != nil && len(buf) > 0 {
		h.user.MergeRemoteState(slices.Clone(buf))
	}
}

// broadcast is one message in the TransmitLimitedQueue.
type broadcast []byte

// Invalidates reports false: every message is sent on its own merits.
func (broadcast) Invalidates(memberlist.Broadcast) bool { return false }

// Message returns the message.
func (b broadcast) Message() []byte { return b }

// Finished does nothing: nobody waits for a broadcast to go out.
func (broadcast) Finished() {}
