// Package store is a node's local, durable state: one bbolt file holding,
// for every partition the node has ever been a replica of, the partition's
// data, its dedup records (stored responses by request ID), an audit of its
// chosen claims, and its meta (the promised epoch, the chosen and accepted
// claims, the position of the last applied write).
//
// Every mutation that could let a deposed owner change data is fenced: it
// names (partition, epoch) and is refused with a *epoch.StaleError
// (errors.Is(err, epoch.ErrStale)) when the partition has promised a higher
// epoch. The refused operation writes nothing.
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
// it and waits for it. The committer owns every write to the file: callers
// append operations to a queue and wake it; it takes everything queued (up
// to maxGroup operations), applies the whole group in one bbolt read-write
// transaction in submission order, and releases each caller with its own
// outcome once the transaction is durable. One fsync thus covers many
// callers, and a lone caller never waits for a timer (bbolt's DB.Batch adds
// 10 ms; it is not used). Reads (Get, Meta, Export, ...) run in bbolt read
// transactions on the caller's goroutine and see only committed state.
//
// # Failure
//
// If a transaction fails (disk full, I/O error, the MaxSize cap), every
// operation in it fails and the store is poisoned: every later mutation
// returns ErrFailed. Reopening the file is the way back; bbolt rolls back
// the failed transaction, so the reopened file holds only what was
// acknowledged.
package store
