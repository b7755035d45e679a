package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// replayWAL brings the data file up to date with the WAL and loads the
// in-memory metas; Open calls it before starting the committer. It returns
// how many WAL records it replayed.
//
// The dangerous interleaving it exists for:
//
//  1. A group of batches is logged as WAL record 7 and synced; the
//     batches are applied to the memtable and acknowledged. The data file
//     knows nothing of them (its wal-applied is 6).
//  2. The process (or the machine) crashes before any flush.
//  3. Open finds the file at wal-applied 6 and the WAL holding records
//     ..., 6, 7, and possibly a torn record 8 whose sync never
//     returned (so it was never acknowledged).
//
// Replay applies 7 (records at or below 6 are already in the file: a flush
// records the last sequence it applied in the same transaction), stops at
// 8 (bad checksum or short), and commits 7 together with wal-applied 7 in
// one synced transaction, so a crash during replay leaves the file at 6 and
// the next Open replays 7 again: replay is idempotent. Only then are the
// WAL files cleared (a zero header at offset 0, synced), each for a new
// round; the stale frames left after the next round's frames are past its
// zero header, and of another round, which ends the log on the next
// replay (see wal). The records beyond wal-applied may be split over the
// two files
// (a crash during a background flush: the flushing file holds 5..7, the
// active one 8..9); they are merged by sequence.
//
// Records are applied unconditionally: each batch was accepted against the
// metas when it was logged, and those metas are exactly what the file plus
// the earlier records hold, because every slow operation (the only other
// writer of metas) flushes the memtable, and so moves wal-applied past
// every earlier record, in its own transaction.
func (s *Store) replayWAL(cfg Config) (int, error) {
	var data [2][]byte
	for i := range s.wals {
		w, b, err := openWAL(cfg.Dir, i, cfg.NoSync)
		if err != nil {
			s.closeWALs()
			return 0, err
		}
		s.wals[i], data[i] = w, b
	}
	var groups []walGroup
	err := s.db.View(func(tx *bolt.Tx) error {
		applied, err := walApplied(tx)
		if err != nil {
			return err
		}
		s.walSeq = applied
		var scanned [2][]walGroup
		for i := range data {
			if scanned[i], _, err = scanWAL(data[i], applied); err != nil {
				return fmt.Errorf("%s: %w", s.wals[i].path, err)
			}
		}
		groups, err = mergeWALs(applied, scanned[0], scanned[1])
		return err
	})
	if err == nil && len(groups) > 0 {
		err = s.db.Update(func(tx *bolt.Tx) error { return replayGroups(tx, groups) })
		s.walSeq = groups[len(groups)-1].seq
	}
	if err == nil {
		err = s.db.View(func(tx *bolt.Tx) (err error) {
			s.metas, err = loadMetas(tx)
			return err
		})
	}
	if err != nil {
		s.closeWALs()
		return 0, fmt.Errorf("store: recover %s from its WAL: %w", s.path, err)
	}
	if len(groups) > 0 {
		s.log.Info("store: replayed WAL", "records", len(groups), "through", s.walSeq)
	}
	for _, w := range s.wals {
		// The log must end at offset 0 durably: a first write of the next
		// round that a power cut tears must not leave an earlier build's
		// records (which have no round) there, beside a frame planted
		// after them. useDirect's zero block does it for a direct log.
		w.reset()
		err := w.useDirect()
		if err == nil && w.direct == nil {
			err = w.clear()
		}
		if err != nil {
			s.closeWALs()
			return 0, err
		}
	}
	return len(groups), nil
}

// replayGroups applies groups, in order, and records the last one's
// sequence as applied.
func replayGroups(tx *bolt.Tx, groups []walGroup) error {
	for _, g := range groups {
		for _, b := range g.batches {
			if err := replayBatch(tx, b); err != nil {
				return fmt.Errorf("wal record %d: %w", g.seq, err)
			}
		}
	}
	return putWALApplied(tx, groups[len(groups)-1].seq)
}

// replayBatch applies a logged batch to tx without deciding anything: it
// raises the promise to the batch's epoch if lower, sets the position the
// batch had when it was accepted, and writes its data and dedup record.
func replayBatch(tx *bolt.Tx, b walBatch) error {
	pt, err := loadPartition(tx, b.partition)
	if err != nil {
		return err
	}
	pt.meta.Promised = max(pt.meta.Promised, b.epoch)
	pt.meta.Position = Position{Epoch: b.epoch, LSN: b.lsn}
	if err := pt.saveMeta(tx); err != nil {
		return err
	}
	if len(b.writes) > 0 {
		data, err := pt.createSub(dataBucket)
		if err != nil {
			return err
		}
		for _, w := range b.writes {
			if w.Value == nil {
				err = data.Delete(w.Key)
			} else {
				err = data.Put(w.Key, w.Value)
			}
			if err != nil {
				return err
			}
		}
	}
	if len(b.requestID) > 0 {
		responses, err := pt.createSub(responsesBucket)
		if err != nil {
			return err
		}
		return responses.Put(b.requestID, b.record)
	}
	return nil
}
