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

// SetClusterID stores id as the file's cluster ID and partitions as its
// partition count, those of them that are not stored yet, in one
// transaction. It returns nil if they are stored already, and an error
// wrapping ErrClusterMismatch, naming both values, if another ID or count
// is: a data directory never moves between clusters, and a key's
// partition depends on the count, so a store written under one count
// would be read under another as if its keys were lost.
func (s *Store) SetClusterID(id string, partitions int) error {
	if id == "" || partitions <= 0 {
		return fmt.Errorf("%w: cluster ID %q, partition count %d", ErrInvalid, id, partitions)
	}
	return s.do(context.Background(), noPartition, func(tx *bolt.Tx) (outcome, abort error) {
		b := tx.Bucket(clusterBucket)
		storedID, storedCount := string(b.Get(clusterIDKey)), b.Get(partitionsKey)
		switch {
		case storedID != "" && storedID != id:
			return fmt.Errorf("%w: stored %q, given %q", ErrClusterMismatch, storedID, id), nil
		case storedCount != nil && len(storedCount) != 8:
			return fmt.Errorf("%w: stored partition count has %d bytes, not 8", ErrCorrupt, len(storedCount)), nil
		case storedCount != nil && binary.BigEndian.Uint64(storedCount) != uint64(partitions):
			return fmt.Errorf("%w: stored partition count %d, given %d (the count of a cluster never changes)",
				ErrClusterMismatch, binary.BigEndian.Uint64(storedCount), partitions), nil
		}
		if storedCount == nil {
			if err := b.Put(partitionsKey, binary.BigEndian.AppendUint64(nil, uint64(partitions))); err != nil {
				return nil, err
			}
		}
		if storedID == "" {
			return nil, b.Put(clusterIDKey, []byte(id))
		}
		return nil, nil
	})
}
