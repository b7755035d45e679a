package store

import (
	bolt "go.etcd.io/bbolt"
)

// Get returns the value of key in partition p; ok is false if the key is
// absent. It reads committed state: it does not check any epoch, so the
// caller (the owner) confirms its epoch before answering from it.
func (s *Store) Get(p int, key []byte) (value []byte, ok bool, err error) {
	if err := checkPartition(p); err != nil {
		return nil, false, err
	}
	err = s.view(func(tx *bolt.Tx) error {
		pt, err := loadPartition(tx, p)
		if err != nil {
			return err
		}
		b := pt.sub(dataBucket)
		if b == nil {
			return nil
		}
		if v := b.Get(key); v != nil {
			value, ok = append([]byte{}, v...), true
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return value, ok, nil
}

// Meta returns partition p's meta; the zero Meta if p was never touched.
func (s *Store) Meta(p int) (Meta, error) {
	if err := checkPartition(p); err != nil {
		return Meta{}, err
	}
	var m Meta
	err := s.view(func(tx *bolt.Tx) error {
		pt, err := loadPartition(tx, p)
		if err != nil {
			return err
		}
		m = pt.meta
		return nil
	})
	return m, err
}

// Partitions returns, ascending, the partitions that have any meta: every
// partition this node has ever promised, accepted, learned or written.
func (s *Store) Partitions() ([]int, error) {
	var ps []int
	err := s.view(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if p, ok := parsePartitionName(name); ok && b.Get(metaKey) != nil {
				ps = append(ps, p)
			}
			return nil
		})
	})
	return ps, err
}
