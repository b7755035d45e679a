package ring

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

const (
	// virtualNodes is the number of points each member has on consistent's
	// hash circle (consistent.Config.ReplicationFactor).
	virtualNodes = 20
	// loadBound caps each member's owned partitions at
	// ceil(partitions/members*loadBound). It must stay above 1: with
	// members*ceil(partitions/members*loadBound) > partitions there is always
	// room, which is what keeps consistent from panicking "not enough room".
	loadBound = 1.25
)

// ringMember is a member as consistent sees it: its name.
type ringMember string

// String returns the member's name.
func (m ringMember) String() string { return string(m) }

// Place is the placement function: the table (Version 0) that members, split
// into partitions partitions each replicated rf times, should have. It is pure
// and deterministic: every node computing it from the same members gets the
// same table, so tests use it to predict owners.
//
// Owners come from consistent (xxhash, 20 virtual nodes per member, load
// bound 1.25: no member owns more than ceil(partitions/len(members)*1.25)).
// Each partition's rf-1 backups are the other members with the highest
// xxhash(partition as 8 little-endian bytes || name) (rendezvous hashing), so
// the backups of one owner's partitions are spread over all other members.
// With fewer than rf members every member is a replica.
//
// Members are sorted by name and deduplicated by name (the first wins). With
// no members, or partitions < 1, no partition has an owner. rf < 1 counts as 1.
func Place(members []Member, partitions, rf int) *Table {
	ms := slices.Clone(members)
	slices.SortStableFunc(ms, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	ms = slices.CompactFunc(ms, func(a, b Member) bool { return a.Name == b.Name })

	t := &Table{Members: ms}
	if partitions > 0 {
		t.Owners = make([]string, partitions)
		t.Replicas = make([][]string, partitions)
	}
	if len(ms) > 0 && partitions > 0 {
		placeOwners(t, partitions)
		placeReplicas(t, max(1, min(rf, len(ms))))
	}
	t.Checksum = t.checksum()
	return t
}

// placeOwners fills t.Owners from consistent's bounded-load placement. It needs
// at least one member and one partition.
func placeOwners(t *Table, partitions int) {
	cms := make([]consistent.Member, len(t.Members))
	for i, m := range t.Members {
		cms[i] = ringMember(m.Name)
	}
	c := consistent.New(cms, consistent.Config{
		PartitionCount:    partitions,
		ReplicationFactor: virtualNodes,
		Load:              loadBound,
		Hasher:            hasher{},
	})
	for p := range t.Owners {
		t.Owners[p] = c.GetPartitionOwner(p).String()
	}
}

// placeReplicas fills t.Replicas: each partition's owner, then the n-1 other
// members with the highest rendezvous score for that partition.
func placeReplicas(t *Table, n int) {
	type scored struct {
		name  string
		score uint64
	}
	others := make([]scored, 0, len(t.Members))
	key := make([]byte, 8, 64)
	for p, owner := range t.Owners {
		binary.LittleEndian.PutUint64(key, uint64(p))
		others = others[:0]
		for _, m := range t.Members {
			if m.Name != owner {
				others = append(others, scored{m.Name, xxhash.Sum64(append(key[:8], m.Name...))})
			}
		}
		slices.SortFunc(others, func(a, b scored) int {
			return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.name, b.name))
		})
		rs := make([]string, 0, n)
		rs = append(rs, owner)
		for _, o := range others[:n-1] {
			rs = append(rs, o.name)
		}
		t.Replicas[p] = rs
	}
}
