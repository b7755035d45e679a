package store

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A tracker records the keys and request IDs of one partition that change
// from the moment Track starts it, so that a copy read page by page while
// the partition is being written (a pre-copy: ExportLive) can be completed
// later by sending only what changed (ExportChanges) instead of the whole
// partition again. Track, and the publication of every change (the fast
// path applying a batch to the memtable, a slow operation committing and
// publishing its transaction), hold memMu, and a change is recorded in
// the same hold: a change published before Track is in the file for every
// page read after it (the first page's read flushes the memtable into
// the file), and one published after it is recorded. A prune's deletions
// are not changes here (see PruneResponses).
type tracker struct {
	p int
	// changed holds the entries changed since Track; nil once broken or
	// sealed.
	changed map[trackedKey]struct{}
	// bytes counts the keys in changed (or sorted), with
	// trackedKeyOverhead each.
	bytes int
	// broken says the tracker can no longer tell what changed: the
	// partition's data was replaced (an Install or a Drop), the store's
	// trackers reached maxTrackedBytes, or something changed after it was
	// sealed.
	broken bool
	// sealed is set once ExportChanges first read the tracker: from then
	// on the partition must not change (its promise refuses writes), and
	// changed moves to unsorted, which sort turns, once and outside memMu
	// (a large set takes a while), into sorted: what changed, in order.
	// unsorted and sorted are not touched under memMu after the seal.
	sealed   bool
	unsorted map[trackedKey]struct{}
	sort     sync.Once
	sorted   []trackedKey
	// flushed is set once a page was read after Track: that page's read
	// flushed the changes published before Track into the file, which is
	// all a later page needs (the later ones are recorded).
	flushed bool
	// used is when the tracker was last read, for TrackerIdle.
	used time.Time
}

// trackedKey is an entry of a partition that changed.
type trackedKey struct {
	kind EntryKind
	key  string
}

// Bounds of trackers: a tracker costs memory for each key changed, and a
// little time on every write of its partition.
const (
	// maxTrackedBytes bounds the key bytes (with trackedKeyOverhead each)
	// the store's trackers record together: a tracker whose next key
	// would pass it gives up (its partition changed too much, or too many
	// copies are under way, for its changes to be worth keeping).
	maxTrackedBytes = 64 << 20
	// trackedKeyOverhead is what a recorded key costs besides its bytes.
	trackedKeyOverhead = 64
	// maxTrackers is how many trackers a store keeps; starting one more
	// drops the least recently read.
	maxTrackers = 256

	// maxKeptChanges is the capacity of Store.changes kept from one slow
	// transaction to the next.
	maxKeptChanges = 4096
)

// TrackerIdle is how long a tracker is kept without being read: its
// reader gave up (a pre-copy whose proposal went elsewhere), or waited
// that long for its Sync.
const TrackerIdle = 10 * time.Minute

// change is a slow operation's change of a partition, recorded by the
// committer while the operation's transaction runs and applied to the
// trackers once it is published (noteChanges).
type change struct {
	p int
	// untracked says the partition changed in a way not recorded key by
	// key (its data replaced or deleted): its trackers give up.
	untracked bool
	kind      EntryKind
	key       []byte
}

// Track starts recording which entries of partition p change, and returns
// the tracker's ID for ExportLive and ExportChanges. The tracker lives
// until ExportChanges read its last page, until it was not read for
// TrackerIdle, or until maxTrackers newer ones replaced it. IDs are not
// reused by the store's next Open: a reader holding the ID of a tracker
// lost in a restart is refused, never given another tracker's changes.
func (s *Store) Track(p int) (uint64, error) {
	if err := checkPartition(p); err != nil {
		return 0, err
	}
	if s.closing.Load() {
		return 0, ErrClosed
	}
	now := time.Now()
	s.memMu.Lock()
	defer s.memMu.Unlock()
	var oldest *tracker
	var oldestID uint64
	n := 0
	for _, ts := range s.trackers {
		for id, t := range ts {
			if now.Sub(t.used) > TrackerIdle {
				s.untrackLocked(t.p, id)
				continue
			}
			n++
			if oldest == nil || t.used.Before(oldest.used) {
				oldest, oldestID = t, id
			}
		}
	}
	if n >= maxTrackers {
		s.untrackLocked(oldest.p, oldestID)
	}
	s.trackerSeq++
	id := s.trackerSeq
	if s.trackers[p] == nil {
		s.trackers[p] = make(map[uint64]*tracker)
	}
	s.trackers[p][id] = &tracker{p: p, changed: make(map[trackedKey]struct{}), used: now}
	return id, nil
}

// untrackLocked drops tracker id of partition p. Caller holds memMu.
func (s *Store) untrackLocked(p int, id uint64) {
	if t := s.trackers[p][id]; t != nil {
		s.breakOff(t)
		delete(s.trackers[p], id)
		if len(s.trackers[p]) == 0 {
			delete(s.trackers, p)
		}
	}
}

// markChanged records that entry (kind, key) of partition p changed.
// Caller holds memMu.
func (s *Store) markChanged(p int, kind EntryKind, key []byte) {
	ts := s.trackers[p]
	if len(ts) == 0 {
		return
	}
	k := trackedKey{kind, string(key)}
	for _, t := range ts {
		if t.broken {
			continue
		}
		if _, ok := t.changed[k]; ok {
			continue
		}
		size := len(key) + trackedKeyOverhead
		if t.sealed || s.trackedBytes+size > maxTrackedBytes {
			s.breakOff(t)
			continue
		}
		t.changed[k] = struct{}{}
		t.bytes += size
		s.trackedBytes += size
	}
}

// markUntracked breaks partition p's trackers (see change.untracked).
// Caller holds memMu.
func (s *Store) markUntracked(p int) {
	for _, t := range s.trackers[p] {
		s.breakOff(t)
	}
}

// markBatch records the entries a data batch of partition p changed.
// Caller holds memMu.
func (s *Store) markBatch(p int, writes []KV, requestID []byte) {
	if len(s.trackers[p]) == 0 {
		return
	}
	for _, w := range writes {
		s.markChanged(p, KindData, w.Key)
	}
	if len(requestID) > 0 {
		s.markChanged(p, KindResponse, requestID)
	}
}

// breakOff marks t broken and frees what it recorded. Caller holds memMu.
func (s *Store) breakOff(t *tracker) {
	s.trackedBytes -= t.bytes
	t.broken, t.changed, t.bytes = true, nil, 0
}

// noteChange records, on the committer, a slow operation's change for
// noteChanges. Whether or not a tracker is live: one started before the
// operation's transaction is published must see it.
func (s *Store) noteChange(c change) { s.changes = append(s.changes, c) }

// noteChanges applies the changes the committer noted for the transaction
// being published, and forgets them. Caller holds memMu.
func (s *Store) noteChanges() {
	for _, c := range s.changes {
		if c.untracked {
			s.markUntracked(c.p)
		} else {
			s.markChanged(c.p, c.kind, c.key)
		}
	}
	clear(s.changes) // drops the keys
	s.changes = s.changes[:0]
	if cap(s.changes) > maxKeptChanges {
		s.changes = nil
	}
}

// liveTracker returns tracker id if it tracks partition p and is not
// broken, and marks it used.
func (s *Store) liveTracker(p int, id uint64) (*tracker, error) {
	t := s.trackers[p][id]
	switch {
	case t == nil:
		return nil, fmt.Errorf("%w: no tracker %d of partition %d here", ErrUntracked, id, p)
	case t.broken:
		return nil, fmt.Errorf("%w: tracker %d of partition %d gave up (the partition was replaced, or changed too much)", ErrUntracked, id, p)
	}
	t.used = time.Now()
	return t, nil
}

// ExportLive returns a page of partition p's entries as Export does, but
// with no position to check: the partition may be written meanwhile, so a
// copy made of such pages is completed by ExportChanges with tracker id
// (started by Track before the first page). It fails with ErrUntracked if
// the tracker gave up: the copy can no longer be completed.
func (s *Store) ExportLive(p int, id uint64, after []byte, maxBytes int) (entries []Entry, next []byte, err error) {
	s.memMu.Lock()
	t, err := s.liveTracker(p, id)
	flush := err == nil && !t.flushed
	s.memMu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	// Only the first page flushes the memtable (a synced transaction on
	// the committer, which holds every commit back): what the later ones
	// miss of it changed after Track, and is recorded.
	entries, next, err = s.export(p, func(*partition) error { return nil }, after, maxBytes, flush)
	if err == nil && flush {
		s.memMu.Lock()
		t.flushed = true
		s.memMu.Unlock()
	}
	return entries, next, err
}

// ExportChanges returns a page of the entries of partition p that changed
// since tracker id started, as they are at position pos (an entry deleted
// meanwhile comes as KindDataDeleted or KindResponseDeleted), up to
// maxBytes, and the cursor of the next page (nil after the last page, at
// which the tracker is dropped). With the pages of ExportLive read since
// the tracker started, they make the partition's copy at pos. The first
// call seals the tracker: the partition must no longer change (its
// promise refuses writes), and a change breaks it. It fails with
// ErrUntracked if the tracker gave up, and with ErrPosition if the
// partition is not at pos.
func (s *Store) ExportChanges(p int, id uint64, pos Position, after []byte, maxBytes int) (entries []Entry, next []byte, err error) {
	start, err := s.startPage(p, after, maxBytes, true)
	if err != nil {
		return nil, nil, err
	}
	s.memMu.Lock()
	t, err := s.liveTracker(p, id)
	if err == nil && !t.sealed {
		t.sealed, t.unsorted, t.changed = true, t.changed, nil
	}
	s.memMu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	t.sort.Do(func() {
		t.sorted, t.unsorted = slices.SortedFunc(maps.Keys(t.unsorted), compareTracked), nil
	})
	keys := t.sorted
	i, _ := slices.BinarySearchFunc(keys, start, compareTracked)
	if i < len(keys) && start.key != "" && keys[i] == start {
		i++
	}
	err = s.view(func(tx *bolt.Tx) error {
		pt, err := loadPartition(tx, p)
		if err != nil {
			return err
		}
		if err := pt.checkAt(pos); err != nil {
			return err
		}
		used := 0
		for ; i < len(keys); i++ {
			k := keys[i]
			en := Entry{Kind: k.kind, Key: []byte(k.key)}
			if b := pt.sub(k.kind.bucket()); b != nil {
				en.Value = bytes.Clone(b.Get(en.Key))
			}
			if en.Value == nil {
				en.Kind = k.kind.deleted()
			}
			size := len(en.Key) + len(en.Value) + exportEntryOverhead
			if len(entries) > 0 && used+size > maxBytes {
				next = append([]byte{byte(keys[i-1].kind)}, keys[i-1].key...)
				return nil
			}
			entries = append(entries, en)
			used += size
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// A change after the seal (a prune: writes move the position) breaks
	// the tracker; this page may predate it.
	s.memMu.Lock()
	defer s.memMu.Unlock()
	if _, err := s.liveTracker(p, id); err != nil {
		return nil, nil, err
	}
	if next == nil {
		s.untrackLocked(p, id)
	}
	return entries, next, nil
}

// compareTracked orders tracked entries as Export streams them: data, then
// dedup records, each by key.
func compareTracked(a, b trackedKey) int {
	return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.key, b.key))
}

// firstTrackerID returns a random number to start a store's tracker IDs
// from (see Track): 2^63 IDs from it, an ID of an earlier Open is not met
// again in practice.
func firstTrackerID() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return binary.BigEndian.Uint64(b[:]) >> 1
}
