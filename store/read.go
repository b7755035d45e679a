package store

import (
	"bytes"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Get returns the value of key in partition p; ok is false if the key is
// absent. It reads committed state (the memtable, then the file): it does
// not check any epoch, so the caller (the owner) confirms its epoch before
// answering from it.
func (s *Store) Get(p int, key []byte) (value []byte, ok bool, err error) {
	if err := checkPartition(p); err != nil {
		return nil, false, err
	}
	if s.closing.Load() {
		return nil, false, ErrClosed
	}
	// The memtable, the one being flushed, then the file (see the
	// Invariants on Store.mem and Store.imm: the order matters).
	s.memMu.RLock()
	_, _, metaErr := s.lookupMeta(p)
	v, ok, found := s.mem.get(p, key)
	if !found && s.imm != nil {
		v, ok, found = s.imm.mem.get(p, key)
	}
	if found && ok {
		value = bytes.Clone(v)
		if value == nil {
			value = []byte{}
		}
	}
	s.memMu.RUnlock()
	if metaErr != nil || found {
		return value, ok, metaErr
	}
	return s.fileGet(p, key)
}

// fileGet returns a copy of key's value in partition p's data bucket of
// the data file. It opens the buckets directly, without decoding the
// partition's meta: the caller checked the in-memory meta.
func (s *Store) fileGet(p int, key []byte) (value []byte, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		if b := fileBucket(tx, p, dataBucket); b != nil {
			if v := b.Get(key); v != nil {
				value, ok = append([]byte{}, v...), true
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return value, ok, nil
}

// fileBucket returns partition p's sub-bucket sub, nil if absent.
func fileBucket(tx *bolt.Tx, p int, sub []byte) *bolt.Bucket {
	if pb := tx.Bucket(partitionName(p)); pb != nil {
		return pb.Bucket(sub)
	}
	return nil
}

// Meta returns partition p's meta; the zero Meta if p was never touched.
// It reflects every acknowledged operation.
func (s *Store) Meta(p int) (Meta, error) {
	if err := checkPartition(p); err != nil {
		return Meta{}, err
	}
	if s.closing.Load() {
		return Meta{}, ErrClosed
	}
	s.memMu.RLock()
	m, _, err := s.lookupMeta(p)
	s.memMu.RUnlock()
	if err != nil {
		return Meta{}, err
	}
	m.Chosen = cloneClaim(m.Chosen)
	m.Accepted = cloneClaim(m.Accepted)
	return m, nil
}

// Partitions returns, ascending, the partitions that have any meta: every
// partition this node has ever promised, accepted, learned or written.
func (s *Store) Partitions() ([]int, error) {
	if s.closing.Load() {
		return nil, ErrClosed
	}
	s.memMu.RLock()
	var ps []int
	for p := range s.metas {
		ps = append(ps, p)
	}
	s.memMu.RUnlock()
	slices.Sort(ps)
	return ps, nil
}
