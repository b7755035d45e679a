package store

import (
	"context"
	"fmt"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/internal/testhook"
	bolt "go.etcd.io/bbolt"
)

// KV is one write of a Batch.
type KV struct {
	// Key is the data key; it must not be empty.
	Key []byte
	// Value is the new value; nil deletes the key.
	Value []byte
}

// Batch is one atomic data write of a partition's owner: its writes and its
// dedup record commit together or not at all.
type Batch struct {
	// Partition is the partition written.
	Partition int
	// Epoch is the writer's epoch; the batch is refused if the partition's
	// fence (Meta.Fence: its promise, or a newer claim known to be chosen)
	// is higher.
	Epoch epoch.Epoch
	// Writes are applied in order.
	Writes []KV
	// RequestID, if not empty, stores Response as the request's dedup record
	// in the same transaction.
	RequestID []byte
	// Response is the stored response of RequestID.
	Response []byte
	// Prev, if set, is the position the partition must be at for the batch
	// to apply; otherwise it is refused with ErrPosition. A replica set's
	// owner sets it so that every replica applies the same batches in the
	// same order: a replica that missed one refuses the rest.
	Prev *Position
}

// Pending is the handle of a submitted batch (or of any queued mutation).
type Pending struct {
	done chan struct{}
	// err is written once, before done is closed.
	err error
}

// Done is closed when the operation's fate is decided: committed durably,
// refused, or failed.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Err returns the operation's outcome. It is valid only after Done is
// closed: nil means committed durably.
func (p *Pending) Err() error { return p.err }

// Wait waits for the outcome. If ctx ends first it returns ctx.Err(): ctx
// only stops the waiting, the operation's fate is unchanged (it may still
// commit).
func (p *Pending) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish records the outcome and releases the waiters.
func (p *Pending) finish(err error) {
	p.err = err
	close(p.done)
}

// Submit queues b for the committer and returns at once. The batch is
// applied only if its epoch passes the partition's fence (epoch.CheckWrite
// against Meta.Fence: the promise, or the newest claim known to be
// chosen); it then raises the promise to b.Epoch if lower and sets the
// position to (b.Epoch, LSN+1). A refused batch fails with a
// *epoch.StaleError and writes nothing. An empty batch (no writes, no
// request ID) is valid: it is an owner's start marker at a new epoch. The
// caller must not modify b until Done is closed. An invalid batch fails
// with ErrInvalid.
func (s *Store) Submit(b *Batch) *Pending {
	if err := b.Validate(); err != nil {
		p := &Pending{done: make(chan struct{})}
		p.finish(err)
		return p
	}
	return s.enqueue(&op{apply: s.applyBatch(b), batch: b, partition: b.Partition})
}

// Commit submits b and waits for its outcome; see Submit and Pending.Wait.
// If ctx ends first, b may still be committed, and read meanwhile: the
// caller must not modify b, or the buffers it holds, after such a return.
func (s *Store) Commit(ctx context.Context, b *Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Submit(b).Wait(ctx)
}

// MaxKeySize is the longest key, and request ID, a Batch may carry.
const MaxKeySize = bolt.MaxKeySize

// Validate returns the error, matching ErrInvalid, for which Submit would
// refuse b: a batch that bbolt would refuse fails alone instead of failing
// (and poisoning) a whole group.
func (b *Batch) Validate() error {
	if b == nil {
		return fmt.Errorf("%w: nil batch", ErrInvalid)
	}
	if err := checkPartition(b.Partition); err != nil {
		return err
	}
	for i, w := range b.Writes {
		if err := checkKey(w.Key); err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
		if err := checkValue(len(w.Value)); err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
	}
	if len(b.RequestID) == 0 {
		if b.Response != nil {
			return fmt.Errorf("%w: response without request ID", ErrInvalid)
		}
		return nil
	}
	if err := checkKey(b.RequestID); err != nil {
		return fmt.Errorf("request ID: %w", err)
	}
	return checkValue(responseHeader + len(b.Response))
}

// checkKey rejects a key bbolt cannot store.
func checkKey(k []byte) error {
	if len(k) == 0 {
		return fmt.Errorf("%w: empty key", ErrInvalid)
	}
	if len(k) > MaxKeySize {
		return fmt.Errorf("%w: key of %d bytes, max %d", ErrInvalid, len(k), MaxKeySize)
	}
	return nil
}

// checkValue rejects a value length bbolt cannot store.
func checkValue(n int) error {
	if int64(n) > bolt.MaxValueSize {
		return fmt.Errorf("%w: value of %d bytes, max %d", ErrInvalid, n, bolt.MaxValueSize)
	}
	return nil
}

// fence is the only place the store decides whether a fenced mutation at e
// may proceed; the rule itself is epoch.CheckWrite.
func fence(promised, e epoch.Epoch) error {
	if testhook.FencingDisabled() {
		return nil
	}
	return epoch.CheckWrite(promised, e)
}

// admit decides whether b applies on top of meta m: its epoch must pass the
// fence and, if it names one, m must be at its previous position. The
// position carries the epoch of the batch that wrote it, so its check is an
// epoch check too: a test build without fencing skips both.
// The epoch is checked against m.Fence, which counts a claim known to be
// chosen: its old owner's batch is refused as stale, not for its position,
// so that the owner learns it was replaced.
func admit(m Meta, b *Batch) error {
	if err := fence(m.Fence(), b.Epoch); err != nil {
		return err
	}
	if b.Prev != nil && m.Position != *b.Prev && !testhook.FencingDisabled() {
		return fmt.Errorf("%w: partition %d is at %v, the batch follows %v", ErrPosition, b.Partition, m.Position, *b.Prev)
	}
	return nil
}

// applyBatch returns the committer's step for b.
func (s *Store) applyBatch(b *Batch) applyFunc {
	return func(tx *bolt.Tx) (outcome, abort error) {
		pt, err := loadPartition(tx, b.Partition)
		if err != nil {
			return err, nil
		}
		if err := admit(pt.meta, b); err != nil {
			return err, nil
		}
		pt.meta.Promised = max(pt.meta.Promised, b.Epoch)
		pt.meta.Position = Position{Epoch: b.Epoch, LSN: pt.meta.Position.LSN + 1}
		if err := pt.saveMeta(tx); err != nil {
			return nil, err
		}
		if len(b.Writes) > 0 {
			data, err := pt.createSub(dataBucket)
			if err != nil {
				return nil, err
			}
			for _, w := range b.Writes {
				if w.Value == nil {
					err = data.Delete(w.Key)
				} else {
					err = data.Put(w.Key, w.Value)
				}
				if err != nil {
					return nil, err
				}
				s.noteChange(change{p: b.Partition, kind: KindData, key: w.Key})
			}
		}
		if len(b.RequestID) > 0 {
			responses, err := pt.createSub(responsesBucket)
			if err != nil {
				return nil, err
			}
			if err := responses.Put(b.RequestID, encodeResponse(s.now(), b.Response)); err != nil {
				return nil, err
			}
			s.noteChange(change{p: b.Partition, kind: KindResponse, key: b.RequestID})
		}
		return nil, nil
	}
}
