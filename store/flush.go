package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// flushEntries is the memtable size, in keys and request IDs, that triggers
// a flush whatever Config.FlushBytes says: it bounds the one transaction
// that a flush is.
const flushEntries = 50_000

// maxFlushBacklog is how many times Config.FlushBytes the memtable may
// grow to while a background flush runs before the committer waits for
// that flush: the bound on memory when the disk cannot keep up.
const maxFlushBacklog = 4

// frozen is a memtable as a flush writes it into the data file, with what
// the flush writes besides it.
type frozen struct {
	mem *memtable
	// metas are the metas of mem's partitions as mem left them.
	metas map[int]metaEntry
	// seq is the sequence of the last WAL record mem holds.
	seq uint64
	// maxIDs is, per partition, the highest request ID the flush wrote;
	// set by writeFrozen.
	maxIDs map[int][]byte
}

// snapshot returns the memtable as a flush would write it now. Committer
// only: it reads the metas without the lock.
func (s *Store) snapshot() *frozen {
	f := &frozen{mem: s.mem, metas: make(map[int]metaEntry, len(s.mem.parts)), seq: s.walSeq}
	for p := range s.mem.parts {
		f.metas[p] = s.metas[p]
	}
	return f
}

// startFlush hands the memtable to a background flush, so that commits go
// on while it is written into the data file: the committer switches to a
// fresh memtable and to the other WAL file, whose records the file already
// holds. If a flush already runs, it waits for it only when the memtable
// or the active WAL file outgrew maxFlushBacklog times its bound (the WAL
// outgrows the memtable where batches overwrite the same keys); otherwise
// the next trigger after that flush starts another.
func (s *Store) startFlush() {
	if s.failure != nil || s.mem.empty() {
		return
	}
	if s.flushDone != nil {
		if s.mem.bytes < maxFlushBacklog*s.flushBytes && s.mem.entries < maxFlushBacklog*flushEntries &&
			s.wals[s.active].off < int64(maxFlushBacklog*s.flushBytes) {
			return
		}
		s.waitFlush()
		if s.failure != nil {
			return
		}
	}
	f := s.snapshot()
	s.memMu.Lock()
	s.imm, s.mem = f, newMemtable()
	s.memMu.Unlock()
	s.active = 1 - s.active
	s.wals[s.active].reset()
	done := make(chan error, 1)
	s.flushDone = done
	hook := s.flushHook
	go func() {
		if hook != nil {
			hook()
		}
		done <- s.db.Update(func(tx *bolt.Tx) error { return writeFrozen(tx, f) })
	}()
}

// collectFlush finishes the background flush if it has ended, without
// waiting for one that runs.
func (s *Store) collectFlush() {
	select {
	case err := <-s.flushDone: // a nil channel (no flush running) never fires
		s.finishFlush(err)
	default:
	}
}

// waitFlush waits for the background flush, if one runs, and finishes it.
func (s *Store) waitFlush() {
	if s.flushDone != nil {
		s.finishFlush(<-s.flushDone)
	}
}

// finishFlush records the background flush's outcome: on success the data
// file holds imm, which readers stop consulting. A failed flush poisons the
// store and keeps imm: it still answers reads, and both WAL files still
// hold every acknowledged batch for the next Open.
func (s *Store) finishFlush(err error) {
	s.flushDone = nil
	defer s.flushes.Add(1)
	if err != nil {
		s.poison(err, "flush")
		return
	}
	s.memMu.Lock()
	s.fileChanged(s.imm.maxIDs)
	s.imm = nil
	s.memMu.Unlock()
}

// flush writes everything acknowledged into the data file before it
// returns: it waits for the background flush, then flushes the memtable in
// one synced transaction and empties it. It runs only on the committer.
func (s *Store) flush() error {
	s.waitFlush()
	if s.failure != nil || s.mem.empty() {
		return s.failure
	}
	defer s.flushes.Add(1)
	err := s.db.Update(s.flushInto)
	if err != nil {
		s.poison(err, "flush")
		return s.failure
	}
	s.flushed()
	return nil
}

// needsFlush reports whether the memtable or the active WAL file outgrew
// its bound.
func (s *Store) needsFlush() bool {
	if s.noFlush || s.mem.empty() {
		return false
	}
	return s.wals[s.active].off >= int64(s.flushBytes) || s.mem.bytes >= s.flushBytes || s.mem.entries >= flushEntries
}

// flushInto writes the memtable into tx. Slow operations call it at the
// start of their own transaction, after waitFlush, so that one sync covers
// both and they apply after every batch logged before them.
func (s *Store) flushInto(tx *bolt.Tx) error { return writeFrozen(tx, s.snapshot()) }

// writeFrozen writes f into tx: each touched partition's data, dedup
// records and (once) its meta, and the sequence of f's last WAL record,
// which the file then holds.
func writeFrozen(tx *bolt.Tx, f *frozen) error {
	f.maxIDs = make(map[int][]byte)
	for p, mp := range f.mem.parts {
		e := f.metas[p]
		if e.err != nil {
			return e.err // unreachable: no batch is accepted on a corrupt meta
		}
		pt := &partition{num: p, bucket: tx.Bucket(partitionName(p)), meta: e.meta}
		if err := pt.saveMeta(tx); err != nil {
			return err
		}
		if len(mp.data) > 0 {
			data, err := pt.createSub(dataBucket)
			if err != nil {
				return err
			}
			for _, k := range slices.Sorted(maps.Keys(mp.data)) {
				v := mp.data[k]
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
			// Router-generated request IDs grow with time: full pages
			// suit a bucket that is appended to.
			responses.FillPercent = 0.9
			ids := slices.Sorted(maps.Keys(mp.responses))
			for _, id := range ids {
				if err := responses.Put([]byte(id), mp.responses[id]); err != nil {
					return err
				}
			}
			f.maxIDs[p] = []byte(ids[len(ids)-1])
		}
	}
	return putWALApplied(tx, f.seq)
}

// flushed empties the memtable and restarts the active WAL file once a
// transaction that ran flushInto is durable. No background flush runs
// (flushInto's callers waited for it), so both files are applied.
func (s *Store) flushed() {
	s.memMu.Lock()
	s.mem = newMemtable()
	s.fileChanged(nil)
	s.memMu.Unlock()
	s.wals[s.active].reset()
}

// fileChanged records that a transaction that changed the data file
// committed; the caller holds memMu's write lock. written maps partitions
// to the highest request ID a flush wrote into each: known bounds grow to
// cover them. A nil written, for a transaction that may have written or
// replaced anything, forgets every bound.
func (s *Store) fileChanged(written map[int][]byte) {
	s.fileGen++
	if written == nil {
		clear(s.fileIDs)
		return
	}
	for p, id := range written {
		if b, ok := s.fileIDs[p]; ok && bytes.Compare(id, b) > 0 {
			s.fileIDs[p] = id
		}
	}
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
