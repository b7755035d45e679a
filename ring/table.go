package ring

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Member is a node of the cluster as the table sees it.
type Member struct {
	// Name is the node's unique name (Config.Name).
	Name string
	// RPCAddr is the address the node serves RPC on (Config.RPCAddr).
	RPCAddr string
}

// Table is one view of the cluster: its members and, per partition, the
// desired owner and the replica set. A published Table is immutable: never
// modify one, its slices are shared.
type Table struct {
	// Version grows by one per table this node publishes. It is local to the
	// node: compare Checksum, not Version, across nodes.
	Version uint64
	// Members are the members placement counted, sorted by name.
	Members []Member
	// Owners holds, per partition, the desired owner's name. It has one entry
	// per partition; an entry is "" when there are no members.
	Owners []string
	// Replicas holds, per partition, the replica set: the owner first, then
	// RF-1 backups. Invariant: len(Replicas[p]) == min(RF, len(Members)) and
	// the names are distinct.
	Replicas [][]string
	// Leaving are the live members that announced they are leaving (see
	// Ring.SetLeaving), sorted by name: placement leaves them out, but
	// they still serve what they own until others take it over.
	Leaving []Member
	// Checksum is an xxhash over Members, Owners, Replicas and Leaving (not Version):
	// nodes that agree on the placement have equal checksums.
	Checksum uint64
}

// Member returns the member called name, leaving or not, and whether the
// table has it.
func (t *Table) Member(name string) (Member, bool) {
	for _, ms := range [][]Member{t.Members, t.Leaving} {
		i, ok := slices.BinarySearchFunc(ms, name, func(m Member, name string) int {
			return strings.Compare(m.Name, name)
		})
		if ok {
			return ms[i], true
		}
	}
	return Member{}, false
}

// checksum hashes the table's members, owners and replicas. Every string and
// list is length-prefixed so that different tables cannot share an encoding.
func (t *Table) checksum() uint64 {
	d := xxhash.New()
	var buf [binary.MaxVarintLen64]byte
	putLen := func(n int) {
		_, _ = d.Write(binary.AppendUvarint(buf[:0], uint64(n)))
	}
	putString := func(s string) {
		putLen(len(s))
		_, _ = d.WriteString(s)
	}
	for _, ms := range [][]Member{t.Members, t.Leaving} {
		putLen(len(ms))
		for _, m := range ms {
			putString(m.Name)
			putString(m.RPCAddr)
		}
	}
	putLen(len(t.Owners))
	for _, o := range t.Owners {
		putString(o)
	}
	putLen(len(t.Replicas))
	for _, rs := range t.Replicas {
		putLen(len(rs))
		for _, name := range rs {
			putString(name)
		}
	}
	return d.Sum64()
}
