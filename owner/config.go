package owner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
)

// Transport carries protocol messages to other nodes. The router implements
// it over its RPC connections; messages to the node itself never reach it.
type Transport interface {
	// Prepare sends phase 1 to node to.
	Prepare(ctx context.Context, to string, req Prepare) (PromiseReply, error)
	// Accept sends phase 2 to node to.
	Accept(ctx context.Context, to string, req Accept) (AcceptReply, error)
	// Sync asks node to to copy a partition's data (see Sync); a reply
	// that is not Done means the copy is still being fetched.
	Sync(ctx context.Context, to string, req Sync) (SyncReply, error)
	// Choose tells node to that a claim was chosen.
	Choose(ctx context.Context, to string, req Choose) (ChooseReply, error)
	// PreCopy asks node to to copy a partition ahead of a proposal (see
	// PreCopy); a reply that is not Done means it is still being fetched.
	PreCopy(ctx context.Context, to string, req PreCopy) (SyncReply, error)
	// Fetch reads one page of a partition's data from node from (see
	// FetchRequest); Page.Next is nil after the last page.
	Fetch(ctx context.Context, from string, req FetchRequest) (Page, error)
	// Handoff asks node to to acquire a partition now (graceful Leave).
	Handoff(ctx context.Context, to string, req Handoff) error
	// Replicate sends an owner's batches to a replica of their claims and
	// returns once the replica answered, with one outcome per batch: nil
	// once the replica holds it durably, an error matching epoch.ErrStale
	// if the replica promised a newer epoch or knows a newer claim (see
	// HandleReplicate).
	Replicate(ctx context.Context, to string, req Replicate) ([]error, error)
}

// Ring is the membership view the owner acts on; *ring.Ring implements it.
type Ring interface {
	// Table returns the current placement.
	Table() *ring.Table
	// Changed returns a channel closed when a newer table is published.
	Changed() <-chan struct{}
	// Broadcast gossips msg to every member.
	Broadcast(msg []byte)
	// SetClusterID tells the members the cluster ID this node belongs to,
	// waiting at most timeout for the gossip; nodes of another ID then
	// leave each other out.
	SetClusterID(id string, timeout time.Duration) error
	// SetLeaving tells the members, waiting at most timeout for the
	// gossip, that this node is leaving: their tables place nothing on it.
	SetLeaving(timeout time.Duration) error
}

// Config configures an Owner.
type Config struct {
	// Self is this node's name in the ring. Required.
	Self string
	// Partitions is the cluster's partition count. Zero means
	// ring.DefaultPartitions.
	Partitions int
	// Store is the node's local store. Required.
	Store *store.Store
	// Transport reaches other nodes. Required.
	Transport Transport
	// ReplicationFactor is the cluster's replication factor, the ring's
	// Fingerprint.RF. Zero means 1.
	ReplicationFactor int
	// Bootstrap lets Owner.Bootstrap create a new cluster when none is
	// known, neither in the store nor from gossip: a random cluster ID and
	// the root claim (epoch 0, this node) of every partition. Exactly one
	// node of a new cluster sets it; it is ignored when the store already
	// belongs to a cluster.
	Bootstrap bool
	// AcceptDataLoss lets this node serve, empty, a partition whose only
	// copy it was but whose data its store no longer holds (its data
	// directory was lost or replaced and it came back under its name).
	// Without it such a partition stays unavailable and the node logs it
	// at error level: serving it would silently start every key of it
	// again from nothing and forget its stored responses. It has no effect
	// on a partition with other replicas: they hold its data, and a new
	// claim syncs this node.
	AcceptDataLoss bool
	// SettleTime is how long the ring view must stay unchanged before the
	// node acquires partitions, so that nodes whose views still disagree do
	// not take partitions back and forth. Zero means 300ms.
	SettleTime time.Duration
	// DrainTimeout bounds how long a served partition waits for its
	// in-flight calls before promising a higher epoch to a new owner. Calls
	// still running then are fenced: their writes fail. Zero means 2s.
	DrainTimeout time.Duration
	// RequestTimeout bounds each protocol message to another node. Zero
	// means DrainTimeout + 2s, so a Prepare outlives the drain it causes.
	RequestTimeout time.Duration
	// RetryBackoff is the first wait after a lost race or a failed attempt;
	// it doubles per consecutive failure up to 2s. Zero means 50ms.
	RetryBackoff time.Duration
	// Logger receives protocol events. Nil discards them.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Self == "":
		return errors.New("owner: Config.Self is empty")
	case c.Store == nil:
		return errors.New("owner: Config.Store is nil")
	case c.Transport == nil:
		return errors.New("owner: Config.Transport is nil")
	case c.Partitions < 0:
		return fmt.Errorf("owner: Config.Partitions is %d, want > 0", c.Partitions)
	}
	if c.Partitions == 0 {
		c.Partitions = ring.DefaultPartitions
	}
	c.ReplicationFactor = max(c.ReplicationFactor, 1)
	c.SettleTime = orDefault(c.SettleTime, 300*time.Millisecond)
	c.DrainTimeout = orDefault(c.DrainTimeout, 2*time.Second)
	c.RequestTimeout = orDefault(c.RequestTimeout, c.DrainTimeout+2*time.Second)
	c.RetryBackoff = orDefault(c.RetryBackoff, 50*time.Millisecond)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
