// Package store is a node's local, durable state: one bbolt file holding,
// for every partition the node has ever been a replica of, the partition's
// data, its dedup records (stored responses by request ID), an audit of its
// chosen claims, and its meta (the promised epoch, the chosen and accepted
// claims, the position of the last applied write).
//
// Every mutation that could let a deposed owner change data is fenced: it
// names (partition, epoch) and is refused with a *epoch.StaleError
// (errors.Is(err, epoch.ErrStale)) when the partition has promised a higher
// epoch (a data batch: or knows a newer claim to be chosen, Meta.Fence). The
// refused operation writes nothing.
//
// The smallest use:
//
//	s, err := store.Open(store.Config{Dir: dir})
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	if _, err := s.Promise(ctx, 0, 1); err != nil { // partition 0, epoch 1
//		return err
//	}
//	err = s.Commit(ctx, &store.Batch{Partition: 0, Epoch: 1,
//		Writes: []store.KV{{Key: []byte("k"), Value: []byte("v")}}})
//	v, ok, err := s.Get(0, []byte("k"))
//
// # Goroutines
//
// Open starts one goroutine, the committer (committer.go), and Close stops
// it and waits for it. The committer owns every write to the files, the
// memtable and the in-memory metas: callers append operations to a queue
// and wake it; it takes everything queued (up to maxGroup operations) and
// commits the whole group in submission order, releasing each caller with
// its own outcome once the group is durable. One sync thus covers many
// callers, and a lone caller never waits for a timer (bbolt's DB.Batch adds
// 10 ms; it is not used). The committer reads its queue (wake), its flush
// timer, the background flush's outcome and the stop channel. It starts at
// most one background flush goroutine at a time (flush.go: startFlush),
// which writes a frozen memtable into the file and sends its outcome; the
// committer waits for it before any synchronous flush, slow operation or
// exit.
//
// # The write-ahead log
//
// A bbolt commit costs two fdatasyncs and a page write per dirtied page, and
// a group of batches over many partitions dirties several pages per
// partition. So data batches (Submit, Commit) go through a write-ahead log
// in front of the file, Dir/wal-0 and Dir/wal-1, as etcd's WAL fronts its
// bbolt backend:
//
//   - fast path (fastpath.go), for a group of data batches only: the
//     committer decides each batch's fence against the in-memory metas
//     (every partition's Meta, loaded at Open), logs the accepted batches
//     as one record ([length][crc32c][payload], wal.go), makes it durable
//     (one O_DIRECT|O_DSYNC write where the file system allows it, on
//     Linux through AIO so that the committer waits without holding a
//     processor, aio_linux.go; else a write and an fdatasync), applies
//     them to an in-memory memtable
//     (memtable.go) and the metas, and only then releases the waiters;
//   - flush (flush.go): the memtable goes into the file in one synced
//     transaction, writing each touched partition's meta once and the
//     sequence of the last WAL record applied. When the WAL or the
//     memtable outgrow Config.FlushBytes, or Config.FlushInterval after the
//     first unflushed batch, the committer freezes the memtable, switches
//     to a fresh one and to the other WAL file, and a background goroutine
//     writes the frozen one (commits go on meanwhile; reads look in the
//     memtable, the frozen one, then the file); on Export of a partition
//     with unflushed batches (and on the first ExportLive page after
//     Track, and each ExportChanges page), before a slow operation and at
//     Close the committer waits for that flush and flushes synchronously;
//   - slow path (committer.go): every other operation (Promise, Accept,
//     Choose, Copy.Install, Drop, SetClusterID, PruneResponses, and any group
//     mixing them with batches) is one synced bbolt transaction that first
//     flushes the memtable, so it applies after every batch before it;
//   - copies (copy.go): a partition copy received page by page is staged,
//     a page per transaction of its own outside the committer, in a bucket
//     nothing reads; Copy.Install moves it into the partition on the slow
//     path; Open deletes what a crash left staged;
//   - trackers (track.go): Track records, in memory, which keys and
//     request IDs of a partition change from then on, as each change is
//     published, so that a copy read while the partition is written
//     (ExportLive) is completed by the changed entries alone
//     (ExportChanges);
//   - recovery (recover.go): Open replays, in one synced transaction, the
//     WAL records the file lacks, stopping at the first torn one (a record
//     is acknowledged only once durable, so a torn one never was), at the
//     zero header every write lays after its record, or at a record of
//     another round (the log file is reused, each time in a new round: a
//     random number in every record, which no client sees, and the key of
//     the tag that ends it, so that no frame of an earlier round, no frame
//     planted in a value, and no record's start spliced with older bytes
//     by a write cut inside it, is replayed).
//
// Reads (Get, Response) look in the memtable first, then in a bbolt read
// transaction; Meta and Partitions read the in-memory metas; Export and
// Audit read the file. All of them see every acknowledged write. A slow
// transaction commits, and its metas and emptied memtable are published,
// under one lock that every read of the memtable or the metas takes
// (committer.go: updatePublished): no read sees an Install or a Drop half
// done. A file read may see a slow transaction while its sync is still
// running, before its caller is answered; only a power loss in that
// moment makes that a read of something not durable.
//
// # Failure
//
// If a transaction, a WAL write or sync, or a flush fails (disk full, I/O
// error, the MaxSize cap), every operation of the group fails and the store
// is poisoned: every later mutation returns ErrFailed. Reopening the
// directory is the way back; replay restores the acknowledged batches from
// the WAL, so the reopened store holds what was acknowledged. bbolt rolls
// back a transaction that failed before its commit; one whose final sync
// failed may survive the reopen, although its operations reported
// ErrFailed. So may a WAL record whose write or sync failed: the store
// then tries to end the log before it, but if that write fails too, a
// record that reached the disk is replayed. A failed operation's outcome
// is unknown, not "nothing written".
package store
