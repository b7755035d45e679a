package store

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The file's layout:
//
//	cluster/               top-level bucket
//	    id         -> cluster ID
//	    partitions -> 8-byte big-endian partition count
//	store/                 top-level bucket, the store's own bookkeeping
//	    wal-applied -> 8-byte big-endian sequence of the last WAL record
//	                   applied to this file (see recover.go)
//	p<8-byte big-endian partition>/   one top-level bucket per partition
//	    meta     -> encodeMeta(Meta)
//	    data/       key -> value
//	    responses/  request ID -> encodeResponse(stored at, response)
//	    audit/      8-byte big-endian sequence -> encodeAudit(AuditRecord)
//	staging/               top-level bucket, the copies being received
//	    <8-byte copy number>/   data/ and responses/ as in a partition
//
// Partition buckets sort by partition number; the cluster, store and
// staging buckets' names cannot collide with them (different first byte).
var (
	clusterBucket   = []byte("cluster")
	clusterIDKey    = []byte("id")
	partitionsKey   = []byte("partitions")
	storeBucket     = []byte("store")
	walAppliedKey   = []byte("wal-applied")
	metaKey         = []byte("meta")
	dataBucket      = []byte("data")
	responsesBucket = []byte("responses")
	auditBucket     = []byte("audit")
)

// partitionPrefix is the first byte of a partition bucket's name.
const partitionPrefix = 'p'

// partitionName is the top-level bucket name of partition p (p >= 0).
func partitionName(p int) []byte {
	name := make([]byte, 9)
	name[0] = partitionPrefix
	binary.BigEndian.PutUint64(name[1:], uint64(p))
	return name
}

// parsePartitionName is the inverse of partitionName; ok is false for other
// top-level buckets.
func parsePartitionName(name []byte) (p int, ok bool) {
	if len(name) != 9 || name[0] != partitionPrefix {
		return 0, false
	}
	return int(binary.BigEndian.Uint64(name[1:])), true
}

// checkPartition rejects a negative partition number.
func checkPartition(p int) error {
	if p < 0 {
		return fmt.Errorf("%w: negative partition %d", ErrInvalid, p)
	}
	return nil
}

// partition is a partition's bucket inside a transaction, with its decoded
// meta. A nil bucket means the partition was never touched.
type partition struct {
	num    int
	bucket *bolt.Bucket
	meta   Meta
}

// loadPartition reads partition p in tx without creating anything.
func loadPartition(tx *bolt.Tx, p int) (*partition, error) {
	pt := &partition{num: p, bucket: tx.Bucket(partitionName(p))}
	if pt.bucket == nil {
		return pt, nil
	}
	raw := pt.bucket.Get(metaKey)
	if raw == nil {
		return pt, nil
	}
	m, err := decodeMeta(raw)
	if err != nil {
		return nil, fmt.Errorf("partition %d: %w", p, err)
	}
	pt.meta = m
	return pt, nil
}

// withPartition returns a committer step that loads partition p and runs
// step on it; a failure to load is the step's outcome.
func withPartition(p int, step func(tx *bolt.Tx, pt *partition) (outcome, abort error)) applyFunc {
	return func(tx *bolt.Tx) (outcome, abort error) {
		pt, err := loadPartition(tx, p)
		if err != nil {
			return err, nil
		}
		return step(tx, pt)
	}
}

// ensure creates the partition's bucket if needed. tx must be writable.
func (pt *partition) ensure(tx *bolt.Tx) error {
	if pt.bucket != nil {
		return nil
	}
	b, err := tx.CreateBucket(partitionName(pt.num))
	if err != nil {
		return err
	}
	pt.bucket = b
	return nil
}

// saveMeta writes pt.meta, creating the partition's bucket if needed. tx
// must be writable.
func (pt *partition) saveMeta(tx *bolt.Tx) error {
	if err := pt.ensure(tx); err != nil {
		return err
	}
	return pt.bucket.Put(metaKey, encodeMeta(pt.meta))
}

// sub returns the named sub-bucket, or nil if the partition or the
// sub-bucket does not exist.
func (pt *partition) sub(name []byte) *bolt.Bucket {
	if pt.bucket == nil {
		return nil
	}
	return pt.bucket.Bucket(name)
}

// createSub returns the named sub-bucket, creating it if needed. Call it
// only after ensure or saveMeta, which create the partition's bucket.
func (pt *partition) createSub(name []byte) (*bolt.Bucket, error) {
	return pt.bucket.CreateBucketIfNotExists(name)
}

// deleteSub deletes the named sub-bucket if it exists.
func (pt *partition) deleteSub(name []byte) error {
	if pt.sub(name) == nil {
		return nil
	}
	return pt.bucket.DeleteBucket(name)
}
