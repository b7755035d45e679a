package store

import (
	"fmt"
	"slices"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/internal/wire"
)

// Claim says who owns a partition at which epoch, and which nodes replicate
// it.
type Claim struct {
	// Epoch is the ballot under which the claim was proposed (and, once
	// chosen, the epoch of every write its owner makes).
	Epoch epoch.Epoch
	// Base is the epoch of the claim this one succeeds (0 for the root).
	Base epoch.Epoch
	// BaseReplicas is the replica set of the claim this one succeeds (nil
	// for the root): the nodes that must record this claim before anyone
	// acts on it.
	BaseReplicas []string
	// Owner is the owning node's name; "" in a zero Claim.
	Owner string
	// Replicas is the claim's replica set, owner included.
	Replicas []string
}

// Position is the position of a partition's last applied data write.
type Position struct {
	// Epoch is the epoch of the batch that wrote it.
	Epoch epoch.Epoch
	// LSN counts applied batches; it grows by one per batch, across epochs.
	LSN uint64
}

// Less orders positions by Epoch, then LSN.
func (p Position) Less(o Position) bool {
	if p.Epoch != o.Epoch {
		return p.Epoch < o.Epoch
	}
	return p.LSN < o.LSN
}

// Meta is what a replica keeps about a partition, even after it drops the
// partition's data, so that the chain of claims can always be followed.
type Meta struct {
	// Promised is the highest ballot promised.
	// Invariant: it never decreases, and every applied write, accepted
	// proposal and promise is at or below it.
	Promised epoch.Epoch
	// Chosen is the latest claim this replica knows to be chosen; meaningful
	// only when HasChosen.
	Chosen Claim
	// Accepted is the successor proposal accepted, Accepted.Epoch being its
	// ballot. Accepted.Owner == "" means none.
	Accepted Claim
	// Position is the position of the last applied data write; zero when the
	// replica holds no data (never written, or dropped).
	Position Position
	// HasChosen is false when no chosen claim is known for the partition.
	HasChosen bool
	// Final is true when Chosen is known to be recorded by a majority of its
	// base claim's replicas, so that nodes may act on it (serve it, build
	// on it). A chosen claim that is not final was only recorded here.
	Final bool
	// Amnesia is set on a replica that lost its data and was given a copy
	// again (Readmit): it may have promised or accepted, before the loss, in
	// the choice of the successor of any claim below Amnesia, and forgot
	// it, so it takes no part in those choices. Zero means none.
	// Invariant: it never decreases.
	Amnesia epoch.Epoch
}

// Fence is the lowest epoch a data batch may carry here: the promise, or
// the epoch of the newest claim known to be chosen if that is higher. A
// replica may learn a claim (Store.Choose) without having promised its
// ballot, when the proposer's majority did not include it; a batch below
// that claim comes from an owner already replaced, and refusing it is
// always safe.
func (m Meta) Fence() epoch.Epoch {
	if m.HasChosen {
		return max(m.Promised, m.Chosen.Epoch)
	}
	return m.Promised
}

// RecordCounts reports whether a replica in state m, recording claim c as
// chosen, counts toward making c final: it knows no chosen claim newer
// than c, and it accepted no successor of c's base newer than c (nor
// another one at c's epoch, which only a lost memory could produce).
//
// That is what keeps two successors of one base from both being final. Of
// two final successors, some replica accepted the newer one and recorded
// the older one (a majority did each). It accepted first: a replica that
// holds a successor as chosen accepts nothing more from the base. So when
// it recorded the older one its accepted proposal was the newer one or a
// later successor, and its record did not count. The argument needs the
// replica's memory to be continuous: a replica that lost its data
// directory records nothing that is not final (owner.Owner.HandleChoose).
//
// A rule any stricter strands chosen claims. A replica that promised a
// competing ballot without accepting anything, or after accepting c,
// still counts: otherwise c, recorded by some replicas (which then refuse
// every proposer from the base) and not countable by the others, could
// never become final, and the partition would never be served again.
func (m Meta) RecordCounts(c Claim) bool {
	if m.HasChosen && m.Chosen.Epoch > c.Epoch {
		return false
	}
	a := m.Accepted
	return a.Owner == "" || a.Base != c.Base || a.Epoch < c.Epoch || a.Equal(c)
}

// Equal reports whether c and o are the same claim.
func (c Claim) Equal(o Claim) bool {
	return c.Epoch == o.Epoch && c.Base == o.Base && c.Owner == o.Owner &&
		slices.Equal(c.Replicas, o.Replicas) && slices.Equal(c.BaseReplicas, o.BaseReplicas)
}

// metaVersion is the first byte of an encoded Meta. Version 3, without
// Amnesia, is still read.
const metaVersion = 4

// encodeMeta encodes m compactly with a version byte first.
func encodeMeta(m Meta) []byte {
	var e wire.Encoder
	e.Uint8(metaVersion)
	e.Uvarint(uint64(m.Promised))
	e.Bool(m.HasChosen)
	e.Bool(m.Final)
	encodeClaim(&e, m.Chosen)
	encodeClaim(&e, m.Accepted)
	e.Uvarint(uint64(m.Position.Epoch))
	e.Uvarint(m.Position.LSN)
	e.Uvarint(uint64(m.Amnesia))
	return e.Out()
}

func encodeClaim(e *wire.Encoder, c Claim) {
	e.Uvarint(uint64(c.Epoch))
	e.Uvarint(uint64(c.Base))
	e.String(c.Owner)
	e.Strings(c.Replicas)
	e.Strings(c.BaseReplicas)
}

// decodeMeta is the inverse of encodeMeta. It returns an ErrCorrupt for
// anything encodeMeta cannot have produced.
func decodeMeta(b []byte) (Meta, error) {
	d := wire.NewDecoder(b)
	v := d.Uint8()
	if d.Err() == nil && v != metaVersion && v != 3 {
		return Meta{}, fmt.Errorf("%w: meta version %d", ErrCorrupt, v)
	}
	m := Meta{
		Promised:  epoch.Epoch(d.Uvarint()),
		HasChosen: d.Bool(),
		Final:     d.Bool(),
		Chosen:    decodeClaim(d),
		Accepted:  decodeClaim(d),
		Position:  Position{Epoch: epoch.Epoch(d.Uvarint()), LSN: d.Uvarint()},
	}
	if v == metaVersion {
		m.Amnesia = epoch.Epoch(d.Uvarint())
	}
	if err := d.Finish(); err != nil {
		return Meta{}, fmt.Errorf("%w: meta: %w", ErrCorrupt, err)
	}
	return m, nil
}

func decodeClaim(d *wire.Decoder) Claim {
	return Claim{
		Epoch:        epoch.Epoch(d.Uvarint()),
		Base:         epoch.Epoch(d.Uvarint()),
		Owner:        d.String(),
		Replicas:     d.Strings(),
		BaseReplicas: d.Strings(),
	}
}

// MarshalBinary encodes c; it never fails.
func (c Claim) MarshalBinary() ([]byte, error) {
	var e wire.Encoder
	encodeClaim(&e, c)
	return e.Out(), nil
}

// UnmarshalBinary decodes what MarshalBinary encoded.
func (c *Claim) UnmarshalBinary(b []byte) error {
	d := wire.NewDecoder(b)
	*c = decodeClaim(d)
	if err := d.Finish(); err != nil {
		return fmt.Errorf("%w: claim: %w", ErrCorrupt, err)
	}
	return nil
}

// MarshalBinary encodes m; it never fails.
func (m Meta) MarshalBinary() ([]byte, error) { return encodeMeta(m), nil }

// UnmarshalBinary decodes what MarshalBinary encoded.
func (m *Meta) UnmarshalBinary(b []byte) (err error) {
	*m, err = decodeMeta(b)
	return err
}
