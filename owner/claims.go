package owner

import (
	"fmt"
	"sync"

	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/singlewriter/singlewriter/store"
)

// Claims is a node's table of the newest chosen claim it knows per
// partition, with the cluster ID they descend from. Merge keeps the higher
// epoch, so tables converge whatever the order of updates. It is safe for
// concurrent use and never blocks, so gossip callbacks may call it.
type Claims struct {
	// mu guards every field below.
	mu      sync.Mutex
	cluster string
	// reserved is set while cluster is this node's new cluster ID, not
	// yet told to anyone (see Reserve).
	reserved bool
	// Invariant: claims[p].Owner == "" means no claim is known for p.
	claims  []store.Claim
	changed chan struct{}
}

// NewClaims returns an empty table for n partitions.
func NewClaims(n int) *Claims {
	return &Claims{claims: make([]store.Claim, n), changed: make(chan struct{})}
}

// Cluster returns the cluster ID, "" until one is known or while it is
// reserved.
func (c *Claims) Cluster() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.publishedLocked()
}

// publishedLocked is the cluster ID others may learn: none while it is
// reserved.
func (c *Claims) publishedLocked() string {
	if c.reserved {
		return ""
	}
	return c.cluster
}

// Reserve sets the cluster ID of a cluster being created if none is known,
// and reports whether id is the table's cluster ID afterwards. Until
// Publish, claims of any other cluster are refused, but Cluster returns ""
// and Encode sends no cluster ID (peers ignore the table): nobody adopts
// an ID whose cluster may still fail to be created.
func (c *Claims) Reserve(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cluster == "" {
		c.cluster, c.reserved = id, true
	}
	return c.cluster == id
}

// Publish ends Reserve: the cluster ID is known and sent from now on.
func (c *Claims) Publish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reserved = false
}

// SetCluster sets the cluster ID if none is known and reports whether id is
// the table's cluster ID afterwards.
func (c *Claims) SetCluster(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cluster == "" {
		c.cluster = id
	}
	return c.cluster == id
}

// Get returns the newest claim known for partition p.
func (c *Claims) Get(p int) (store.Claim, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p < 0 || p >= len(c.claims) || c.claims[p].Owner == "" {
		return store.Claim{}, false
	}
	return c.claims[p], true
}

// Snapshot returns a copy of every partition's newest known claim.
func (c *Claims) Snapshot() []store.Claim {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]store.Claim(nil), c.claims...)
}

// Merge records claim for partition p if it is newer than the one known,
// and reports whether it was.
func (c *Claims) Merge(p int, claim store.Claim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mergeLocked(p, claim)
}

func (c *Claims) mergeLocked(p int, claim store.Claim) bool {
	if p < 0 || p >= len(c.claims) || claim.Owner == "" {
		return false
	}
	cur := c.claims[p]
	if cur.Owner != "" && claim.Epoch <= cur.Epoch {
		return false
	}
	c.claims[p] = claim
	close(c.changed)
	c.changed = make(chan struct{})
	return true
}

// Changed returns a channel closed at the next change of the table.
func (c *Claims) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Encode returns the cluster ID and the given partitions' claims (every
// known claim when ps is nil) in the gossip encoding.
func (c *Claims) Encode(ps ...int) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var e wire.Encoder
	e.String(c.publishedLocked())
	if ps == nil {
		for p, cl := range c.claims {
			if cl.Owner != "" {
				ps = append(ps, p)
			}
		}
	}
	e.Uvarint(uint64(len(ps)))
	for _, p := range ps {
		e.Uvarint(uint64(p))
		EncodeClaim(&e, c.claims[p])
	}
	return e.Out()
}

// MergeEncoded merges claims in the gossip encoding and reports how many
// were newer. State from another cluster ID is refused with
// ErrForeignCluster; a node without a cluster ID adopts the sender's.
func (c *Claims) MergeEncoded(buf []byte) (int, error) {
	d := wire.NewDecoder(buf)
	cluster := d.String()
	n := d.Uvarint()
	type entry struct {
		p     int
		claim store.Claim
	}
	var entries []entry
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		p := DecodePartition(d)
		entries = append(entries, entry{p, DecodeClaim(d)})
	}
	if err := d.Finish(); err != nil {
		return 0, fmt.Errorf("owner: decode claims: %w", err)
	}
	if cluster == "" {
		return 0, ErrNoCluster
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cluster == "" {
		c.cluster = cluster
	}
	if cluster != c.cluster {
		return 0, fmt.Errorf("%w: ours %q, theirs %q", ErrForeignCluster, c.cluster, cluster)
	}
	merged := 0
	for _, en := range entries {
		if c.mergeLocked(en.p, en.claim) {
			merged++
		}
	}
	return merged, nil
}

// EncodeClaim appends c in the wire encoding.
func EncodeClaim(e *wire.Encoder, c store.Claim) { e.Binary(c) }

// DecodeClaim reads a claim written by EncodeClaim; errors stick to d.
func DecodeClaim(d *wire.Decoder) store.Claim {
	var c store.Claim
	d.Binary(&c)
	return c
}
