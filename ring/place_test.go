package ring

import (
	"fmt"
	"math"
	"testing"

	"github.com/buraksezer/consistent"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func members(n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{Name: fmt.Sprintf("node-%02d", i), RPCAddr: fmt.Sprintf("10.0.0.%d:9000", i)}
	}
	return ms
}

func TestPartitionEqualsConsistentFindPartitionID(t *testing.T) {
	for _, p := range []int{1, 7, DefaultPartitions, 1024} {
		c := consistent.New(nil, consistent.Config{PartitionCount: p, ReplicationFactor: virtualNodes, Load: loadBound, Hasher: hasher{}})
		for i := range 10000 {
			key := fmt.Appendf(nil, "key-%d", i)
			require.Equal(t, c.FindPartitionID(key), Partition(key, p), "key %q, %d partitions", key, p)
		}
	}
}

func TestPlaceOwnersAreConsistentsOwners(t *testing.T) {
	ms := members(5)
	cms := make([]consistent.Member, len(ms))
	for i, m := range ms {
		cms[i] = ringMember(m.Name)
	}
	c := consistent.New(cms, consistent.Config{PartitionCount: DefaultPartitions, ReplicationFactor: virtualNodes, Load: loadBound, Hasher: hasher{}})
	tbl := Place(ms, DefaultPartitions, 3)
	for p, owner := range tbl.Owners {
		assert.Equal(t, c.GetPartitionOwner(p).String(), owner, "partition %d", p)
	}
}

func TestPlaceIsDeterministic(t *testing.T) {
	ms := members(7)
	reversed := make([]Member, len(ms))
	for i, m := range ms {
		reversed[len(ms)-1-i] = m
	}
	a := Place(ms, DefaultPartitions, 3)
	b := Place(reversed, DefaultPartitions, 3)
	assert.Equal(t, a, b, "input order must not matter")
	assert.Equal(t, a.Checksum, Place(ms, DefaultPartitions, 3).Checksum)
	assert.NotEqual(t, a.Checksum, Place(ms[:6], DefaultPartitions, 3).Checksum)
	assert.NotEqual(t, a.Checksum, Place(ms, DefaultPartitions, 2).Checksum)
}

func TestPlaceIsBalanced(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 10, 31, 100} {
		for _, p := range []int{1, 13, DefaultPartitions, 1009} {
			tbl := Place(members(n), p, 3)
			bound := int(math.Ceil(float64(p) / float64(n) * loadBound))
			load := map[string]int{}
			for _, o := range tbl.Owners {
				require.NotEmpty(t, o)
				load[o]++
			}
			for name, l := range load {
				assert.LessOrEqual(t, l, bound, "%d members, %d partitions: %s owns %d", n, p, name, l)
			}
		}
	}
}

func TestReplicaSetsAreOwnerFirstAndDistinct(t *testing.T) {
	for n := 1; n <= 6; n++ {
		tbl := Place(members(n), DefaultPartitions, 3)
		for p, rs := range tbl.Replicas {
			require.Len(t, rs, min(3, n), "partition %d", p)
			assert.Equal(t, tbl.Owners[p], rs[0], "partition %d", p)
			seen := map[string]bool{}
			for _, name := range rs {
				assert.False(t, seen[name], "partition %d repeats %s", p, name)
				seen[name] = true
				_, ok := tbl.Member(name)
				assert.True(t, ok, "partition %d names unknown %s", p, name)
			}
		}
	}
}

func TestBackupsOfOneOwnerAreSpreadOverAllOthers(t *testing.T) {
	ms := members(5)
	tbl := Place(ms, DefaultPartitions, 3)
	for _, owner := range ms {
		backups := map[string]int{}
		for p, rs := range tbl.Replicas {
			if tbl.Owners[p] == owner.Name {
				for _, b := range rs[1:] {
					backups[b]++
				}
			}
		}
		assert.Len(t, backups, len(ms)-1, "backups of %s: %v", owner.Name, backups)
	}
}

func TestPlaceIsTotal(t *testing.T) {
	empty := Place(nil, DefaultPartitions, 3)
	assert.Empty(t, empty.Members)
	require.Len(t, empty.Owners, DefaultPartitions)
	require.Len(t, empty.Replicas, DefaultPartitions)
	for p := range empty.Owners {
		assert.Empty(t, empty.Owners[p])
		assert.Empty(t, empty.Replicas[p])
	}

	noPartitions := Place(members(3), 0, 3)
	assert.Len(t, noPartitions.Members, 3)
	assert.Empty(t, noPartitions.Owners)

	rf0 := Place(members(3), 11, 0)
	for _, rs := range rf0.Replicas {
		assert.Len(t, rs, 1)
	}

	dup := Place(append(members(2), Member{Name: "node-00", RPCAddr: "elsewhere"}), 11, 3)
	assert.Equal(t, members(2), dup.Members, "duplicates are dropped, the first wins")
}

func TestTableMember(t *testing.T) {
	tbl := Place(members(4), 11, 3)
	m, ok := tbl.Member("node-02")
	assert.True(t, ok)
	assert.Equal(t, "10.0.0.2:9000", m.RPCAddr)
	_, ok = tbl.Member("node-09")
	assert.False(t, ok)
}

// Nodes of different builds must place partitions alike, or two of them
// would each see itself as a partition's owner. Place's result for a fixed
// membership, and the partitions of a few keys, are pinned here: a change of consistent's algorithm or
// defaults, of the hashing, or of Place itself that moves any partition
// fails this test, and must come with a new PlacementVersion (nodes of
// another version are refused at join).
func TestPlacementOfThisVersionIsPinned(t *testing.T) {
	require.Equal(t, 1, PlacementVersion, "a new version pins its own placement here")
	var sums []uint64
	for _, n := range []int{1, 3, 5, 8} {
		sums = append(sums, Place(members(n), DefaultPartitions, 3).Checksum)
	}
	require.Equal(t, []uint64{0x4ee723c1a8239423, 0x172c556dea92ebb, 0x89e146ef663ceb8f, 0x567e10e08ff30f02}, sums)
	var parts []int
	for _, key := range []string{"a", "user:42", "user:7"} {
		parts = append(parts, Partition([]byte(key), DefaultPartitions))
	}
	require.Equal(t, []int{122, 195, 264}, parts, "keys map to other partitions")
}
