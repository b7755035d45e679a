package store

// maxKeptRecord is the largest WAL record buffer the committer keeps for
// the next group (Store.record), and the largest block buffer a direct
// WAL keeps for its next write (wal.buf); a larger one is dropped after
// its write.
const maxKeptRecord = 1 << 20

// commitFast commits a group of data batches (and flush requests) with one
// WAL record, synced once:
//
//  1. decide each batch's fence against the in-memory metas, in submission
//     order, each accepted batch moving its partition's meta (in a copy)
//     for the batches after it;
//  2. log the accepted batches, with their resulting positions and dedup
//     records (timestamps included), as one record, and sync it;
//  3. apply them to the memtable and publish the new metas;
//  4. release the waiters; flush if a flush was requested.
//
// Refused batches are not logged and write nothing. Nothing is visible to
// readers before step 3, so a read never sees a batch that a crash could
// still lose.
func (s *Store) commitFast(group []*op) {
	outcomes := make([]error, len(group))
	moved := make(map[int]Meta) // metas as the group's accepted batches left them
	var accepted []walBatch
	flush := false
	for i, o := range group {
		if o.flush {
			flush = true
			continue
		}
		b := o.batch
		m, ok := moved[b.Partition]
		if !ok {
			var err error
			if m, _, err = s.lookupMeta(b.Partition); err != nil {
				outcomes[i] = err
				continue
			}
		}
		if err := admit(m, b); err != nil {
			outcomes[i] = err
			continue
		}
		m.Promised = max(m.Promised, b.Epoch)
		m.Position = Position{Epoch: b.Epoch, LSN: m.Position.LSN + 1}
		moved[b.Partition] = m
		wb := walBatch{partition: b.Partition, epoch: b.Epoch, lsn: m.Position.LSN, writes: b.Writes, requestID: b.RequestID}
		if len(b.RequestID) > 0 {
			wb.record = encodeResponse(s.now(), b.Response)
		}
		accepted = append(accepted, wb)
	}
	if len(accepted) > 0 {
		seq := s.walSeq + 1
		w := s.wals[s.active]
		s.record = appendRecord(s.record[:0], walGroup{round: w.round, seq: seq, batches: accepted}, &s.tags)
		// A group of one: nothing else was queued when it was taken.
		err := w.append(s.record, len(group) == 1)
		if cap(s.record) > maxKeptRecord {
			s.record = nil // a rare large group's memory is not kept
		}
		if err != nil {
			s.poison(err, "WAL write")
			for _, o := range group {
				o.finish(s.failure)
			}
			return
		}
		s.walSeq = seq
		s.memMu.Lock()
		for _, wb := range accepted {
			s.mem.apply(wb)
			s.markBatch(wb.partition, wb.writes, wb.requestID)
		}
		for p, m := range moved {
			s.metas[p] = metaEntry{meta: m}
		}
		s.memMu.Unlock()
	}
	for i, o := range group {
		if !o.flush {
			o.finish(outcomes[i])
		}
	}
	if flush {
		err := s.flush()
		for _, o := range group {
			if o.flush {
				o.finish(err)
			}
		}
	}
}
