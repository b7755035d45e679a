package ring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

const (
	// MaxBroadcastSize is the largest message Broadcast sends. It fits one
	// gossip packet (memberlist's 1400-byte UDP buffer, less headers and
	// encryption). Carry larger state in Delegate.LocalState instead.
	MaxBroadcastSize = 1024

	// maxQueuedBroadcasts bounds the broadcast queue: when nobody else is there
	// to gossip to, the oldest messages are dropped beyond it. Push/pull of
	// Delegate.LocalState repairs what they would have carried.
	maxQueuedBroadcasts = 4096

	// joinBackoffMin and joinBackoffMax bound the wait between Join attempts.
	joinBackoffMin = 50 * time.Millisecond
	joinBackoffMax = 2 * time.Second
)

// Ring is one node's membership in a cluster and its current placement Table.
// Its methods are safe for concurrent use.
type Ring struct {
	cfg    Config
	hooks  *hooks
	ml     *memberlist.Memberlist
	gossip string // advertised gossip host:port
	logger *slog.Logger

	kick chan struct{}  // signalled by hooks, read by the table goroutine
	done chan struct{}  // closed by Close: stops the table goroutine and Join
	wg   sync.WaitGroup // the table and reconnect goroutines

	// dials is the gossip transport when the ring made it (Config.Transport
	// nil); abortDials aborts its dials, first thing in Close and Leave.
	dials      *dialer
	abortDials context.CancelFunc

	// table is the published table. Invariant: never nil, and each published
	// table's Version is one more than the previous one's.
	table atomic.Pointer[Table]

	// changedMu guards changed.
	changedMu sync.Mutex
	// changed is closed when a table newer than the one it came with is
	// published, and replaced by a new channel.
	changed chan struct{}

	// leftOut holds the cluster ID of each member left out of the table
	// for it, so that rebuild logs it once; only rebuild touches it.
	leftOut map[string]string

	// lifeMu guards closed and serializes Leave with Close, so that
	// memberlist's Leave never runs after its Shutdown (it panics).
	lifeMu sync.Mutex
	closed bool
	// lifeWaiters counts the callers of lockLife waiting for lifeMu, and
	// rejoinAbort ends the dials of the reconnect round that holds it, if
	// any (see lockLife).
	lifeWaiters atomic.Int32
	rejoinAbort atomic.Pointer[context.CancelFunc]
}

// lockLife takes lifeMu for a change of this node's state, first ending a
// reconnect round that holds it: the round's dials of a seed that drops
// packets would hold it for memberlist's TCPTimeout per seed (10 s with
// PresetLAN), past the caller's own timeout. Either the round sees the
// waiter before it dials, or the waiter sees the round's abort.
func (r *Ring) lockLife() {
	r.lifeWaiters.Add(1)
	defer r.lifeWaiters.Add(-1)
	if abort := r.rejoinAbort.Load(); abort != nil {
		(*abort)()
	}
	r.lifeMu.Lock()
}

// New validates cfg, starts memberlist's listeners and the table goroutine,
// and publishes a table of this node alone. It does not contact the seeds:
// call Join. Call Close (or Leave) to release the sockets.
func New(cfg Config) (*Ring, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	r := &Ring{
		cfg:     cfg,
		logger:  cfg.Logger,
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		leftOut: map[string]string{},
	}
	r.table.Store(Place(nil, cfg.Fingerprint.Partitions, cfg.Fingerprint.RF))
	r.hooks = &hooks{
		fp:     cfg.Fingerprint,
		user:   cfg.Delegate,
		kick:   r.kick,
		logger: cfg.Logger,
	}
	r.hooks.setSelf(cfg.meta())
	mc := cfg.memberlistConfig(r.hooks)
	r.hooks.queue = &memberlist.TransmitLimitedQueue{
		NumNodes:       func() int { return len(r.table.Load().Members) },
		RetransmitMult: mc.RetransmitMult,
	}
	life, abort := context.WithCancel(context.Background())
	r.abortDials = abort
	if mc.Transport == nil {
		if r.dials, err = newDialer(life, mc, mc.Logger); err != nil {
			abort()
			return nil, fmt.Errorf("ring: start gossip on %s:%d: %w", mc.BindAddr, cfg.BindPort, err)
		}
		mc.Transport = r.dials
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		abort()
		if r.dials != nil {
			_ = r.dials.Shutdown()
		}
		return nil, fmt.Errorf("ring: start gossip on %s:%d: %w", mc.BindAddr, cfg.BindPort, err)
	}
	r.ml = ml
	self := ml.LocalNode()
	r.gossip = net.JoinHostPort(self.Addr.String(), strconv.Itoa(int(self.Port)))
	r.rebuild()
	r.wg.Add(1)
	go r.run()
	return r, nil
}

// Join contacts the seeds and merges their cluster's state, retrying with
// backoff (50ms doubling to 2s) until at least one seed answers or ctx
// ends. A seed that is this node's own gossip address is skipped:
// memberlist answers its own join, which would make a node whose other
// seeds are down start alone. A node that joined this one meanwhile does
// not count either: a new node knows nothing of the cluster the seeds may
// hold. Without other seeds it returns nil at once: this node starts a
// cluster. It returns an error wrapping ErrIncompatible, without retrying,
// if a seed's cluster has another Fingerprint.
func (r *Ring) Join(ctx context.Context) error {
	backoff := joinBackoffMin
	for {
		select {
		case <-r.done:
			return ErrClosed
		default:
		}
		seeds := r.otherSeeds() // again each round: a name's addresses change
		if len(seeds) == 0 {
			return nil
		}
		refused := r.hooks.refusals.Load()
		n, err := r.joinSeeds(ctx, seeds)
		if n > 0 {
			r.logger.Debug("ring: joined", "node", r.cfg.Name, "seeds_reached", n)
			r.startReconnect()
			return nil
		}
		// A refusal recorded during this attempt is almost surely this
		// attempt's: a seed answered with foreign members. (A foreign node
		// joining us at this very moment would also count; it is a
		// misconfiguration either way.)
		if r.hooks.refusals.Load() != refused {
			return fmt.Errorf("ring: join %v: %w (%v)", r.cfg.Seeds, ErrIncompatible, err)
		}
		r.logger.Debug("ring: join failed, retrying", "seeds", r.cfg.Seeds, "backoff", backoff, "err", err)
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("ring: join %v: %w (last error: %v)", r.cfg.Seeds, ctx.Err(), err)
		case <-r.done:
			timer.Stop()
			return ErrClosed
		case <-timer.C:
		}
		backoff = min(2*backoff, joinBackoffMax)
	}
}

// joinSeeds has memberlist join seeds, its dials ending with ctx.
func (r *Ring) joinSeeds(ctx context.Context, seeds []string) (int, error) {
	if r.dials != nil {
		defer r.dials.joining(ctx)()
	}
	return r.ml.Join(seeds)
}

// otherSeeds returns the addresses the seeds stand for (a name's, one
// per address it resolves to) other than this node's own gossip address:
// one name often resolves to every node, this one included.
func (r *Ring) otherSeeds() []string {
	var others []string
	for _, s := range r.cfg.Seeds {
		for _, addr := range r.resolveSeed(s) {
			if addr != r.gossip {
				others = append(others, addr)
			}
		}
	}
	return others
}

// startReconnect starts the reconnect goroutine unless the ring is
// closed.
func (r *Ring) startReconnect() {
	r.lifeMu.Lock()
	defer r.lifeMu.Unlock()
	if r.closed {
		return
	}
	r.wg.Add(1)
	go r.reconnect()
}

// Table returns the current table; it is never nil and must not be modified.
func (r *Ring) Table() *Table { return r.table.Load() }

// Changed returns a channel that is closed when a table newer than the one
// Table returned before this call is published. Call Changed before Table to
// never miss an update:
//
//	for {
//		ch := r.Changed()
//		t := r.Table()
//		// use t
//		<-ch
//	}
func (r *Ring) Changed() <-chan struct{} {
	r.changedMu.Lock()
	defer r.changedMu.Unlock()
	return r.changed
}

// Broadcast queues msg to be gossiped to every member, each of which hands it
// to its Delegate's NotifyMsg. Delivery is best effort (a few retransmissions,
// more in larger clusters); carry the state it changes in
// Delegate.LocalState too so push/pull repairs losses. msg is copied. A
// message larger than MaxBroadcastSize is dropped and logged.
func (r *Ring) Broadcast(msg []byte) {
	if len(msg) > MaxBroadcastSize {
		r.logger.Warn("ring: broadcast dropped: too large", "size", len(msg), "max", MaxBroadcastSize)
		return
	}
	r.hooks.queue.QueueBroadcast(broadcast(append([]byte(nil), msg...)))
	r.hooks.queue.Prune(maxQueuedBroadcasts)
}

// GossipAddr returns the gossip host:port other nodes reach this one at (the
// bound port when Config.BindPort was zero): a seed for other nodes.
func (r *Ring) GossipAddr() string { return r.gossip }

// LocalName returns this node's name.
func (r *Ring) LocalName() string { return r.cfg.Name }

// SetClusterID sets the ID of the cluster this node belongs to, once it
// knows it (see Config.ClusterID), and gossips it within timeout. From
// then on, members of another cluster ID are left out of the table. It
// does nothing if id is already set, and returns an error wrapping
// ErrInvalidConfig if another ID is set or id is empty or longer than
// MaxClusterIDLen, and ErrClosed after Leave or Close.
func (r *Ring) SetClusterID(id string, timeout time.Duration) error {
	return r.updateSelf(timeout, func(m *nodeMeta) error {
		switch {
		case id == "" || len(id) > MaxClusterIDLen:
			return fmt.Errorf("%w: cluster ID %q is empty or longer than %d bytes", ErrInvalidConfig, id, MaxClusterIDLen)
		case m.ClusterID != "" && m.ClusterID != id:
			return fmt.Errorf("%w: cluster ID %q set, not %q", ErrInvalidConfig, m.ClusterID, id)
		}
		m.ClusterID = id
		return nil
	})
}

// SetLeaving tells the members, within timeout, that this node is
// leaving: from then on their tables (and this node's) place no partition
// on it and list it in Table.Leaving, so that they take over what it
// holds while it still answers. It cannot be undone: Leave or Close the
// Ring next. It returns ErrClosed after Leave or Close.
func (r *Ring) SetLeaving(timeout time.Duration) error {
	return r.updateSelf(timeout, func(m *nodeMeta) error {
		m.Leaving = true
		return nil
	})
}

// updateSelf applies change to this node's metadata and, if that changed
// it, rebuilds the table and gossips the new metadata within timeout.
func (r *Ring) updateSelf(timeout time.Duration, change func(*nodeMeta) error) error {
	r.lockLife()
	defer r.lifeMu.Unlock()
	if r.closed {
		return ErrClosed
	}
	self := r.hooks.selfMeta()
	next := self
	if err := change(&next); err != nil || next == self {
		return err
	}
	r.hooks.setSelf(next)
	r.hooks.notify()
	if err := r.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("ring: gossip this node's new metadata: %w", err)
	}
	return nil
}

// Founders returns the names, sorted, of the live members (this node
// included) started with Config.Founder that have no cluster ID yet: the
// nodes that may each create a new cluster. It returns none once any
// member has a cluster ID: the cluster exists.
func (r *Ring) Founders() []string {
	var names []string
	for _, n := range r.hooks.liveMembers() {
		m, err := decodeMeta(n.Meta)
		switch {
		case err != nil || m.Fingerprint != r.cfg.Fingerprint:
		case m.ClusterID != "":
			return nil
		case m.Founder:
			names = append(names, n.Name)
		}
	}
	return names
}

// Leave tells the cluster that this node is leaving, waiting until the
// message is gossiped (a few gossip intervals while others are alive) or
// ctx's deadline passes, then closes the Ring. Others drop the node from
// their tables at once instead of after failure detection. memberlist
// offers no way to interrupt that wait, so the cancellation of a ctx
// without a deadline does not end it. Close waits for a Leave in progress.
func (r *Ring) Leave(ctx context.Context) error {
	r.abortDials()
	r.lifeMu.Lock()
	defer r.lifeMu.Unlock()
	if r.closed {
		return ErrClosed
	}
	var timeout time.Duration // zero: memberlist waits until gossiped
	if deadline, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(deadline), time.Nanosecond)
	}
	var leaveErr error
	if err := r.ml.Leave(timeout); err != nil {
		leaveErr = fmt.Errorf("ring: leave: %w", err)
	}
	return errors.Join(leaveErr, r.closeLocked())
}

// Close shuts gossip down without telling the cluster (it will detect the
// node as failed) and stops the table goroutine, waiting for it. It is
// idempotent.
func (r *Ring) Close() error {
	r.abortDials()
	r.lifeMu.Lock()
	defer r.lifeMu.Unlock()
	return r.closeLocked()
}

// closeLocked is Close with lifeMu held.
func (r *Ring) closeLocked() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.ml.Shutdown()
	close(r.done)
	r.wg.Wait()
	if err != nil {
		return fmt.Errorf("ring: shutdown: %w", err)
	}
	return nil
}
