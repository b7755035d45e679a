package store

import (
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// ClusterID returns the cluster ID stored in the file, "" if none.
func (s *Store) ClusterID() (string, error) {
	var id string
	err := s.view(func(tx *bolt.Tx) error {
		id = string(tx.Bucket(clusterBucket).Get(clusterIDKey))
		return nil
	})
	return id, err
}

// SetClusterID stores id as the file's cluster ID if none is stored. It
// returns nil if id is already stored, and an error wrapping
// ErrClusterMismatch, naming both IDs, if another one is: a data directory
// never moves between clusters.
func (s *Store) SetClusterID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty cluster ID", ErrInvalid)
	}
	return s.do(context.Background(), noPartition, func(tx *bolt.Tx) (outcome, abort error) {
		b := tx.Bucket(clusterBucket)
		switch stored := string(b.Get(clusterIDKey)); stored {
		case id:
			return nil, nil
		case "":
			return nil, b.Put(clusterIDKey, []byte(id))
		default:
			return fmt.Errorf("%w: stored %q, given %q", ErrClusterMismatch, stored, id), nil
		}
	})
}

// SetPartitionCount stores n as the file's partition count if none is
// stored. It returns nil if n is already stored, and an error wrapping
// ErrClusterMismatch, naming both counts, if another one is: a key's
// partition depends on the count, so a store written under one count
// would be read under another as if its keys were lost.
func (s *Store) SetPartitionCount(n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: partition count %d", ErrInvalid, n)
	}
	return s.do(context.Background(), noPartition, func(tx *bolt.Tx) (outcome, abort error) {
		b := tx.Bucket(clusterBucket)
		stored := b.Get(partitionsKey)
		switch {
		case stored == nil:
			return nil, b.Put(partitionsKey, binary.BigEndian.AppendUint64(nil, uint64(n)))
		case len(stored) == 8 && binary.BigEndian.Uint64(stored) == uint64(n):
			return nil, nil
		case len(stored) == 8:
			return fmt.Errorf("%w: stored partition count %d, given %d (the count of a cluster never changes)",
				ErrClusterMismatch, binary.BigEndian.Uint64(stored), n), nil
		default:
			return fmt.Errorf("%w: stored partition count has %d bytes, not 8", ErrCorrupt, len(stored)), nil
		}
	})
}
