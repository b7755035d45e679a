package ring

import "github.com/cespare/xxhash/v2"

// DefaultPartitions is the default number of partitions of a cluster. A prime
// spreads keys evenly; the count is fixed for the life of a cluster.
const DefaultPartitions = 271

// Partition returns the partition of key: xxhash64(key) mod partitions. It is
// the same function as consistent's FindPartitionID with the xxhash hasher
// used by Place. partitions must be positive.
func Partition(key []byte, partitions int) int {
	return int(xxhash.Sum64(key) % uint64(partitions))
}

// hasher is the consistent.Hasher used by Place.
type hasher struct{}

// Sum64 returns the xxhash64 of data.
func (hasher) Sum64(data []byte) uint64 { return xxhash.Sum64(data) }
