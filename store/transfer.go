package store

import (
	"bytes"
	"context"
	"fmt"

	"github.com/singlewriter/singlewriter/epoch"
	bolt "go.etcd.io/bbolt"
)

// EntryKind says which part of a partition an Entry belongs to.
type EntryKind uint8

// The kinds of Entry, in the order Export streams them.
const (
	// KindData is a data key and its value.
	KindData EntryKind = 1
	// KindResponse is a dedup record: a request ID and its stored record
	// (timestamp included), opaque to callers.
	KindResponse EntryKind = 2
	// KindDataDeleted is a data key that is absent, with no value
	// (ExportChanges: deleted since the tracker started).
	KindDataDeleted EntryKind = 3
	// KindResponseDeleted is a request ID whose dedup record is absent,
	// with no value (ExportChanges: pruned since the tracker started).
	KindResponseDeleted EntryKind = 4
)

// bucket returns the partition sub-bucket holding entries of kind k, nil
// for an unknown kind.
func (k EntryKind) bucket() []byte {
	switch k {
	case KindData, KindDataDeleted:
		return dataBucket
	case KindResponse, KindResponseDeleted:
		return responsesBucket
	}
	return nil
}

// deleted returns the kind that says an entry of kind k is absent.
func (k EntryKind) deleted() EntryKind {
	if k == KindData {
		return KindDataDeleted
	}
	return KindResponseDeleted
}

// isDeletion reports whether k says an entry is absent.
func (k EntryKind) isDeletion() bool { return k == KindDataDeleted || k == KindResponseDeleted }

// Entry is one record of a partition in a state transfer.
type Entry struct {
	// Kind says whether the entry is data or a dedup record.
	Kind EntryKind
	// Key is the data key or the request ID.
	Key []byte
	// Value is the data value or the stored dedup record.
	Value []byte
}

// exportEntryOverhead is what Export counts for an entry besides its key
// and value: a transport frames each with a kind and two lengths, and a
// page of many small entries must still fit the frame its budget allows.
const exportEntryOverhead = 16

// Export returns partition p's entries (data, then dedup records) that
// follow the cursor after (nil: from the start), up to maxBytes of keys,
// values and exportEntryOverhead per entry (at least one entry, however
// large), and the cursor of
// the next page; next is nil when the partition is exhausted. Export is
// stateless: each page is read in its own transaction, so the caller
// freezes the partition (a promise refuses its owner's writes) for a
// consistent copy. If the memtable holds batches of p, Export first has
// the committer flush it (a synced transaction), then reads the file.
//
// Every page is read in the transaction that checks the partition is at
// pos, and fails with ErrPosition if it is not: a Drop or an Install can
// commit between a caller's own check of the position and the read, and a
// page read after it would hand out an empty or different copy labelled
// with the old position.
func (s *Store) Export(p int, pos Position, after []byte, maxBytes int) (entries []Entry, next []byte, err error) {
	return s.export(p, func(pt *partition) error { return pt.checkAt(pos) }, after, maxBytes, true)
}

// export reads a page for Export and ExportLive, after check accepted the
// partition in the page's transaction; flush as startPage's.
func (s *Store) export(p int, check func(*partition) error, after []byte, maxBytes int, flush bool) (entries []Entry, next []byte, err error) {
	start, err := s.startPage(p, after, maxBytes, flush)
	if err != nil {
		return nil, nil, err
	}
	err = s.view(func(tx *bolt.Tx) error {
		pt, err := loadPartition(tx, p)
		if err != nil {
			return err
		}
		if err := check(pt); err != nil {
			return err
		}
		used := 0
		for _, kind := range []EntryKind{KindData, KindResponse} {
			b := pt.sub(kind.bucket())
			if kind < start.kind || b == nil {
				continue
			}
			c := b.Cursor()
			k, v := c.First()
			if kind == start.kind && start.key != "" {
				k, v = c.Seek([]byte(start.key))
				if string(k) == start.key {
					k, v = c.Next()
				}
			}
			for ; k != nil; k, v = c.Next() {
				size := len(k) + len(v) + exportEntryOverhead
				if len(entries) > 0 && used+size > maxBytes {
					last := entries[len(entries)-1]
					next = append([]byte{byte(last.Kind)}, last.Key...)
					return nil
				}
				entries = append(entries, Entry{Kind: kind, Key: bytes.Clone(k), Value: bytes.Clone(v)})
				used += size
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return entries, next, nil
}

// startPage checks the arguments of a page's read, flushes partition p's
// batches into the file if flush is set (pages read the file), and
// returns where the page starts.
func (s *Store) startPage(p int, after []byte, maxBytes int, flush bool) (trackedKey, error) {
	if err := checkPartition(p); err != nil {
		return trackedKey{}, err
	}
	if maxBytes <= 0 {
		return trackedKey{}, fmt.Errorf("%w: maxBytes %d", ErrInvalid, maxBytes)
	}
	start, err := parseCursor(after)
	if err != nil || !flush {
		return start, err
	}
	return start, s.flushPartition(p)
}

// parseCursor decodes a page's cursor (nil: the start of the partition):
// the kind and key of the last entry of the page before.
func parseCursor(after []byte) (trackedKey, error) {
	if after == nil {
		return trackedKey{kind: KindData}, nil
	}
	if len(after) < 2 || EntryKind(after[0]) != KindData && EntryKind(after[0]) != KindResponse {
		return trackedKey{}, fmt.Errorf("%w: export cursor %x", ErrInvalid, after)
	}
	return trackedKey{kind: EntryKind(after[0]), key: string(after[1:])}, nil
}

// Keep is Copy.Install for a replica that already holds the copy: it
// raises p's promise to e (if lower) in the transaction that checks p is
// at pos, and fails with ErrPosition if it is not. It is fenced like Copy.Install: a
// replica that promised a ballot above e refuses (epoch.ErrStale), the
// proposal at e can no longer use it. The caller's earlier read of the
// position is not enough: a Drop (or an Install) can commit between that
// read and the promise, and a proposal would then count this replica as
// holding a copy it no longer has. Once the promise is raised, a Drop for
// a claim below e keeps the copy.
func (s *Store) Keep(ctx context.Context, p int, e epoch.Epoch, pos Position) error {
	if err := checkPartition(p); err != nil {
		return err
	}
	return s.do(ctx, p, withPartition(p, func(tx *bolt.Tx, pt *partition) (outcome, abort error) {
		if err := pt.checkAt(pos); err != nil {
			return err, nil
		}
		if err := fence(pt.meta.Promised, e); err != nil {
			return err, nil
		}
		if pt.meta.Promised >= e {
			return nil, nil
		}
		pt.meta.Promised = e
		return nil, pt.saveMeta(tx)
	}))
}

// Readmit records, before a replica that lost its data is given a copy
// again by a proposal whose base claim is at epoch base, that it takes no
// part in choosing the successor of base or of any older claim
// (Meta.Amnesia becomes base+1 unless it is higher). It is committed on its
// own, before the copy: the copy raises the promise, after which the
// replica no longer looks blank.
func (s *Store) Readmit(ctx context.Context, p int, base epoch.Epoch) error {
	if err := checkPartition(p); err != nil {
		return err
	}
	return s.do(ctx, p, withPartition(p, func(tx *bolt.Tx, pt *partition) (outcome, abort error) {
		if pt.meta.Amnesia > base {
			return nil, nil
		}
		pt.meta.Amnesia = base + 1
		return nil, pt.saveMeta(tx)
	}))
}

// Drop deletes p's data and dedup records once this node is no longer one
// of the replicas of the claim at epoch e. It keeps the meta (promise,
// claims) and the audit, so the chain of claims can still be followed, but
// sets the position to zero: a replica without the data must not report a
// position that a new owner could pick as the most advanced copy. Drop is
// not fenced, but it keeps everything if a ballot above e was promised: a
// newer proposal reached this replica, and its copy may serve that one.
func (s *Store) Drop(ctx context.Context, p int, e epoch.Epoch) error {
	if err := checkPartition(p); err != nil {
		return err
	}
	return s.do(ctx, p, withPartition(p, func(tx *bolt.Tx, pt *partition) (outcome, abort error) {
		if pt.bucket == nil || pt.meta.Promised > e {
			return nil, nil
		}
		pt.meta.Position = Position{}
		if err := pt.saveMeta(tx); err != nil {
			return nil, err
		}
		s.noteChange(change{p: p, untracked: true})
		return nil, clearData(pt)
	}))
}

// fenced returns the committer step of a state-transfer mutation at e: if
// the fence lets e through, it raises the promise, lets change modify the
// partition (meta included), and saves the meta.
func fenced(p int, e epoch.Epoch, change func(tx *bolt.Tx, pt *partition) error) applyFunc {
	return withPartition(p, func(tx *bolt.Tx, pt *partition) (outcome, abort error) {
		if err := fence(pt.meta.Promised, e); err != nil {
			return err, nil
		}
		pt.meta.Promised = max(pt.meta.Promised, e)
		if err := pt.ensure(tx); err != nil {
			return nil, err
		}
		if err := change(tx, pt); err != nil {
			return nil, err
		}
		return nil, pt.saveMeta(tx)
	})
}

// checkAt returns ErrPosition unless the partition is at pos: a copy read
// or kept in this transaction is the copy a caller expects there.
func (pt *partition) checkAt(pos Position) error {
	if pt.meta.Position != pos {
		return fmt.Errorf("%w: partition %d is at %v, not %v", ErrPosition, pt.num, pt.meta.Position, pos)
	}
	return nil
}

// clearData deletes the partition's data and dedup records.
func clearData(pt *partition) error {
	if err := pt.deleteSub(dataBucket); err != nil {
		return err
	}
	return pt.deleteSub(responsesBucket)
}

// checkEntry rejects an entry Copy.Add could not store or Response could not
// read back.
func checkEntry(en Entry) error {
	if en.Kind.bucket() == nil {
		return fmt.Errorf("%w: entry kind %d", ErrInvalid, en.Kind)
	}
	if err := checkKey(en.Key); err != nil {
		return err
	}
	if en.Kind.isDeletion() && len(en.Value) > 0 {
		return fmt.Errorf("%w: deletion of %x with a value", ErrInvalid, en.Key)
	}
	if en.Kind == KindResponse && len(en.Value) < responseHeader {
		return fmt.Errorf("%w: dedup record of %d bytes", ErrInvalid, len(en.Value))
	}
	return checkValue(len(en.Value))
}

// flushPartition has the committer flush the memtable if it holds batches
// of partition p, and waits for it.
func (s *Store) flushPartition(p int) error {
	if s.closing.Load() {
		return ErrClosed
	}
	s.memMu.RLock()
	pending := s.mem.has(p) || s.imm != nil && s.imm.mem.has(p)
	s.memMu.RUnlock()
	if !pending {
		return nil
	}
	return s.enqueue(&op{flush: true, partition: noPartition}).Wait(context.Background())
}
