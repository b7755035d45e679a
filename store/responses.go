package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// responseHeader is the size of a dedup record's timestamp prefix.
const responseHeader = 8

// encodeResponse encodes a dedup record: when it was stored (big-endian
// unix nanoseconds) followed by the response.
func encodeResponse(at time.Time, resp []byte) []byte {
	buf := make([]byte, responseHeader, responseHeader+len(resp))
	binary.BigEndian.PutUint64(buf, uint64(at.UnixNano()))
	return append(buf, resp...)
}

// decodeResponse is the inverse of encodeResponse. resp aliases b.
func decodeResponse(b []byte) (at time.Time, resp []byte, err error) {
	if len(b) < responseHeader {
		return time.Time{}, nil, fmt.Errorf("%w: dedup record of %d bytes", ErrCorrupt, len(b))
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b))), b[responseHeader:], nil
}

// Response returns the response stored for requestID in partition p by a
// batch that carried it; ok is false if there is none (never stored,
// pruned, or dropped).
func (s *Store) Response(p int, requestID []byte) (resp []byte, ok bool, err error) {
	if err := checkPartition(p); err != nil {
		return nil, false, err
	}
	if s.closing.Load() {
		return nil, false, ErrClosed
	}
	// The memtable, the one being flushed, then the file (see the
	// Invariants on Store.mem and Store.imm).
	s.memMu.RLock()
	_, _, metaErr := s.lookupMeta(p)
	record, found := s.mem.response(p, requestID)
	if !found && s.imm != nil {
		record, found = s.imm.mem.response(p, requestID)
	}
	if found {
		record = bytes.Clone(record)
	}
	bound, known := s.fileIDs[p]
	gen := s.fileGen
	s.memMu.RUnlock()
	if metaErr != nil {
		return nil, false, metaErr
	}
	if !found {
		if known && bytes.Compare(requestID, bound) > 0 {
			return nil, false, nil // above every ID in the file
		}
		var last []byte
		if record, found, last, err = s.fileResponse(p, requestID); err != nil {
			return nil, false, err
		}
		if !known {
			s.memMu.Lock()
			if s.fileGen == gen {
				s.fileIDs[p] = last
			}
			s.memMu.Unlock()
		}
		if !found {
			return nil, false, nil
		}
	}
	_, r, err := decodeResponse(record)
	if err != nil {
		return nil, false, fmt.Errorf("partition %d request %x: %w", p, requestID, err)
	}
	return r, true, nil
}

// fileResponse returns a copy of requestID's dedup record in partition
// p's file bucket, and the bucket's highest request ID (empty if it holds
// none), a bound for Store.fileIDs.
func (s *Store) fileResponse(p int, requestID []byte) (record []byte, ok bool, last []byte, err error) {
	last = []byte{}
	err = s.view(func(tx *bolt.Tx) error {
		b := fileBucket(tx, p, responsesBucket)
		if b == nil {
			return nil
		}
		if v := b.Get(requestID); v != nil {
			record, ok = bytes.Clone(v), true
		}
		if k, _ := b.Cursor().Last(); k != nil {
			last = bytes.Clone(k)
		}
		return nil
	})
	return record, ok, last, err
}

// PruneResponses deletes, in every partition, the dedup records stored
// before olderThan, and returns how many it deleted. A retry of a pruned
// request runs again: olderThan must be older than any client's retry
// window. Trackers do not record these deletions: a pruned record that a
// copy read before (ExportLive) stays in the copy until the receiver's
// own prune, which only keeps a retry answered a little longer.
func (s *Store) PruneResponses(ctx context.Context, olderThan time.Time) (int, error) {
	var pruned int
	err := s.do(ctx, noPartition, func(tx *bolt.Tx) (outcome, abort error) {
		cutoff := olderThan.UnixNano()
		// Collect first, modify after: deleting under a cursor can make it
		// skip keys.
		var names [][]byte
		err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			if _, ok := parsePartitionName(name); ok {
				names = append(names, append([]byte(nil), name...))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			b := tx.Bucket(name).Bucket(responsesBucket)
			if b == nil {
				continue
			}
			var old [][]byte
			err := b.ForEach(func(k, v []byte) error {
				if len(v) >= responseHeader && int64(binary.BigEndian.Uint64(v)) < cutoff {
					old = append(old, append([]byte(nil), k...))
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			for _, k := range old {
				if err := b.Delete(k); err != nil {
					return nil, err
				}
			}

			pruned += len(old)
		}
		return nil, nil
	})
	if err != nil {
		return 0, err
	}
	return pruned, nil
}
