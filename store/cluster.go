package store

import (
	"context"
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
