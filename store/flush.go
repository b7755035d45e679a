package store

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// flushEntries is the memtable size, in keys and request IDs, that triggers
// a flush whatever Config.FlushBytes says: it bounds the one transaction
// that a flush is.
const flushEntries = 50_000

// flush applies the memtable to the data file in one synced transaction
// and then empties the memtable and resets the WAL. It runs only on the
// committer goroutine, between groups. A failed flush poisons the store;
// nothing is lost: the memtable still answers reads and the WAL still
// holds every acknowledged batch for the next Open.
func (s *Store) flush() error {
	if s.mem.empty() {
		return nil
	}
	err := s.db.Update(s.flushInto)
	s.flushes.Add(1)
	if err != nil {
		s.poison(err, "flush")
		return s.failure
	}
	s.flushed()
	return nil
}

// needsFlush reports whether the memtable or the WAL outgrew its bound.
func (s *Store) needsFlush() bool {
	if s.noFlush || s.mem.empty() {
		return false
	}
	return s.wal.off >= int64(s.flushBytes) || s.mem.bytes >= s.flushBytes || s.mem.entries >= flushEntries
}

// flushInto writes the memtable into tx: each touched partition's data,
// dedup records and (once) its in-memory meta, and the sequence of the
// last WAL record, which the file then holds. Slow operations call it at
// the start of their own transaction, so that one sync covers both and
// they apply after every batch logged before them.
func (s *Store) flushInto(tx *bolt.Tx) error {
	for p, mp := range s.mem.parts {
		m, _, err := s.lookupMeta(p)
		if err != nil {
			return err // unreachable: no batch is accepted on a corrupt meta
		}
		pt := &partition{num: p, bucket: tx.Bucket(partitionName(p)), meta: m}
		if err := pt.saveMeta(tx); err != nil {
			return err
		}
		if len(mp.data) > 0 {
			data, err := pt.createSub(dataBucket)
			if err != nil {
				return err
			}
			for k, v := range mp.data {
				if v == nil {
					err = data.Delete([]byte(k))
				} else {
					err = data.Put([]byte(k), v)
				}
				if err != nil {
					return err
				}
			}
		}
		if len(mp.responses) > 0 {
			responses, err := pt.createSub(responsesBucket)
			if err != nil {
				return err
			}
			for id, record := range mp.responses {
				if err := responses.Put([]byte(id), record); err != nil {
					return err
				}
			}
		}
	}
	return putWALApplied(tx, s.walSeq)
}

// flushed empties the memtable and resets the WAL once a transaction that
// ran flushInto is durable.
func (s *Store) flushed() {
	s.memMu.Lock()
	s.mem = newMemtable()
	s.memMu.Unlock()
	s.wal.reset()
}

// walApplied returns the sequence of the last WAL record the file holds.
func walApplied(tx *bolt.Tx) (uint64, error) {
	raw := tx.Bucket(storeBucket).Get(walAppliedKey)
	if raw == nil {
		return 0, nil
	}
	if len(raw) != 8 {
		return 0, fmt.Errorf("%w: wal-applied of %d bytes", ErrCorrupt, len(raw))
	}
	return binary.BigEndian.Uint64(raw), nil
}

// putWALApplied records that the file holds every WAL record up to seq.
func putWALApplied(tx *bolt.Tx, seq uint64) error {
	return tx.Bucket(storeBucket).Put(walAppliedKey, binary.BigEndian.AppendUint64(nil, seq))
}

// readMeta reads partition p's meta from tx into an entry of the in-memory
// metas; present is false if p has no meta.
func readMeta(tx *bolt.Tx, p int) (e metaEntry, present bool) {
	b := tx.Bucket(partitionName(p))
	if b == nil || b.Get(metaKey) == nil {
		return metaEntry{}, false
	}
	m, err := decodeMeta(b.Get(metaKey))
	if err != nil {
		return metaEntry{err: corruptMeta(p, err)}, true
	}
	return metaEntry{meta: m}, true
}

// loadMetas reads every partition's meta from tx.
func loadMetas(tx *bolt.Tx) (map[int]metaEntry, error) {
	metas := make(map[int]metaEntry)
	err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		if p, ok := parsePartitionName(name); ok {
			if e, present := readMeta(tx, p); present {
				metas[p] = e
			}
		}
		return nil
	})
	return metas, err
}
