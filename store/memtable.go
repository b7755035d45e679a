package store

import (
	"bytes"
	"fmt"
)

// memtable holds what the data batches logged in the WAL since the last
// flush wrote: per partition, the latest value (or deletion) of each key
// and the latest dedup record of each request ID. The committer fills it
// after each WAL sync and empties it by flushing it into the data file;
// readers consult it before the data file. The Store's memMu guards it.
type memtable struct {
	// parts has an entry for every partition a logged batch wrote, even an
	// empty one (a start marker): its meta must be flushed.
	parts map[int]*memPartition
	// bytes counts the keys and values held, a flush trigger.
	bytes int
	// entries counts the keys and request IDs held, a flush trigger.
	entries int
}

// memPartition is one partition's part of the memtable.
type memPartition struct {
	// data maps a key to its latest value; a nil value is a deletion (a
	// stored empty value is non-nil).
	data map[string][]byte
	// responses maps a request ID to its dedup record.
	responses map[string][]byte
}

// newMemtable returns an empty memtable.
func newMemtable() *memtable {
	return &memtable{parts: make(map[int]*memPartition)}
}

// empty reports whether nothing awaits a flush.
func (m *memtable) empty() bool { return len(m.parts) == 0 }

// has reports whether partition p has anything awaiting a flush.
func (m *memtable) has(p int) bool { return m.parts[p] != nil }

// apply records b, copying what it keeps: the caller may reuse b's writes
// once b is acknowledged.
func (m *memtable) apply(b walBatch) {
	mp := m.parts[b.partition]
	if mp == nil {
		mp = &memPartition{data: make(map[string][]byte), responses: make(map[string][]byte)}
		m.parts[b.partition] = mp
	}
	for _, w := range b.writes {
		var v []byte
		if w.Value != nil {
			v = bytes.Clone(w.Value)
			if v == nil {
				v = []byte{}
			}
		}
		if old, ok := mp.data[string(w.Key)]; ok {
			m.bytes -= len(old)
		} else {
			m.bytes += len(w.Key)
			m.entries++
		}
		m.bytes += len(v)
		mp.data[string(w.Key)] = v
	}
	if len(b.requestID) > 0 {
		if old, ok := mp.responses[string(b.requestID)]; ok {
			m.bytes -= len(old)
		} else {
			m.bytes += len(b.requestID)
			m.entries++
		}
		m.bytes += len(b.record)
		mp.responses[string(b.requestID)] = bytes.Clone(b.record)
	}
}

// get returns what the memtable knows of key in partition p: found is
// false if it knows nothing (the data file has the answer); otherwise ok
// says whether the key holds value (false: deleted). value aliases the
// memtable: copy it before releasing the lock.
func (m *memtable) get(p int, key []byte) (value []byte, ok, found bool) {
	mp := m.parts[p]
	if mp == nil {
		return nil, false, false
	}
	v, found := mp.data[string(key)]
	return v, v != nil, found
}

// response returns partition p's dedup record for requestID; found is
// false if the memtable has none. The record aliases the memtable.
func (m *memtable) response(p int, requestID []byte) (record []byte, found bool) {
	mp := m.parts[p]
	if mp == nil {
		return nil, false
	}
	record, found = mp.responses[string(requestID)]
	return record, found
}

// metaEntry is a partition's meta as the committer knows it, or the error
// decoding it from the file reported (a corrupt meta fails every operation
// on the partition, as it did when read from the file).
type metaEntry struct {
	meta Meta
	err  error
}

// lookupMeta returns partition p's meta from the in-memory metas; present
// is false if the partition has no meta. Call with memMu held (read or
// write), or from the committer, their only writer.
func (s *Store) lookupMeta(p int) (m Meta, present bool, err error) {
	e, present := s.metas[p]
	return e.meta, present, e.err
}

// corruptMeta is the error a partition with an undecodable meta reports.
func corruptMeta(p int, err error) error {
	return fmt.Errorf("partition %d: %w", p, err)
}
