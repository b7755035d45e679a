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
	// The memtable first, then the file (see the Invariant on Store.mem:
	// the order matters).
	s.memMu.RLock()
	v, ok, found := s.mem.get(p, key)
	if found && ok {
		value = bytes.Clone(v)
		if value == nil {
			value = []byte{}
		}
	}
	s.memMu.RUnlock()
	if found {
		return value, ok, nil
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
