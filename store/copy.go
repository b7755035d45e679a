package store

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/singlewriter/singlewriter/epoch"
	bolt "go.etcd.io/bbolt"
)

// stagingBucket is the top-level bucket that holds the copies being
// received (see Copy), one sub-bucket each, laid out like a partition's
// data and responses sub-buckets. Nothing reads it; Open deletes it, so a
// copy a crash interrupted leaves nothing behind.
var stagingBucket = []byte("staging")

// Copy is a copy of a partition being received page by page, as Export
// produces them: Add stages each page where no read sees it, Install then
// makes the staged entries the partition's data and dedup records in one
// fenced transaction, and Discard drops what was staged. A receiver holds
// one page in memory at a time, however large the partition.
//
// A Copy is used by one goroutine. Several copies of one partition may be
// staged at once (proposals at different ballots); the fence decides which
// Install wins.
//
// Staged pages take space in the file before Install: when the disk is
// full, or the file at Config.MaxSize, Add fails cleanly, but a commit
// that needs new pages meanwhile fails and poisons the store, as the
// whole copy's Install would have before staging existed. Each Add is a
// synced transaction, although only Install's sync matters (Open deletes
// what is staged): bbolt syncs every transaction or none.
type Copy struct {
	s *Store
	p int
	// over is the position of the data the copy replaces (see NewCopy).
	over Position
	// name is the copy's sub-bucket in stagingBucket.
	name []byte
	// staged is set once Add wrote (or may have written) the sub-bucket.
	staged bool
	// done is set once Install or Discard succeeded: the sub-bucket is
	// gone.
	done bool
}

// NewCopy starts a copy of partition p that replaces its data at position
// over, the data the caller checked the copy may replace: Install refuses
// if the partition moved from over meanwhile (a batch applied while the
// copy was fetched may hold writes the copy lacks). Call Discard when the
// copy is abandoned, or after Install (it is then a no-op).
func (s *Store) NewCopy(p int, over Position) (*Copy, error) {
	if err := checkPartition(p); err != nil {
		return nil, err
	}
	return &Copy{s: s, p: p, over: over, name: binary.BigEndian.AppendUint64(nil, s.copies.Add(1))}, nil
}

// Add stages entries, in one transaction outside the committer: it waits
// for bbolt's writer lock but not for the calls' commits, and readers do
// not wait for it. A KindData entry with a nil Value stores an empty
// value; a later entry with the same key replaces an earlier one, and a
// KindDataDeleted or KindResponseDeleted entry deletes it.
func (c *Copy) Add(ctx context.Context, entries []Entry) error {
	if c.done {
		return c.used()
	}
	for i, en := range entries {
		if err := checkEntry(en); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.staged = true
	return c.s.update(func(tx *bolt.Tx) error {
		staging, err := tx.CreateBucketIfNotExists(stagingBucket)
		if err != nil {
			return err
		}
		staged, err := staging.CreateBucketIfNotExists(c.name)
		if err != nil {
			return err
		}
		for _, en := range entries {
			b, err := staged.CreateBucketIfNotExists(en.Kind.bucket())
			if err != nil {
				return err
			}
			if en.Kind.isDeletion() {
				if err := b.Delete(en.Key); err != nil {
					return err
				}
				continue
			}
			value := en.Value
			if value == nil {
				value = []byte{}
			}
			if err := b.Put(en.Key, value); err != nil {
				return err
			}
		}
		return nil
	})
}

// Install replaces partition p's data and dedup records with the staged
// entries and sets its position to pos, in one transaction fenced like a
// write at e (it raises the promise to e if lower). A replica is never
// left half-copied, and a reader never sees part of the copy: it has its
// old copy or the new one.
//
// Install also refuses, with an error matching epoch.ErrStale, when the
// partition holds data written at epoch e or later: the copy, made for the
// proposal at ballot e before it was chosen, is older than that data (a
// late or repeated copy must not roll back the writes of e's owner); and,
// with ErrPosition, when the partition is no longer at the position the
// copy was started over (NewCopy). The staged entries are then kept for
// Discard.
func (c *Copy) Install(ctx context.Context, e epoch.Epoch, pos Position) error {
	if c.done {
		return c.used()
	}
	install := fenced(c.p, e, func(tx *bolt.Tx, pt *partition) error {
		if err := clearData(pt); err != nil {
			return err
		}
		c.s.noteChange(change{p: c.p, untracked: true})
		pt.meta.Position = pos
		staging := tx.Bucket(stagingBucket)
		var staged *bolt.Bucket
		if staging != nil {
			staged = staging.Bucket(c.name)
		}
		if staged == nil {
			return nil // an empty copy
		}
		for _, sub := range [][]byte{dataBucket, responsesBucket} {
			if staged.Bucket(sub) != nil {
				if err := tx.MoveBucket(sub, staged, pt.bucket); err != nil {
					return err
				}
			}
		}
		return staging.DeleteBucket(c.name)
	})
	err := c.s.do(ctx, c.p, func(tx *bolt.Tx) (outcome, abort error) {
		pt, err := loadPartition(tx, c.p)
		if err != nil {
			return err, nil
		}
		if have := pt.meta.Position; have != (Position{}) && have.Epoch >= e {
			return fmt.Errorf("%w: partition %d holds data written at epoch %d, a copy for ballot %d is older", epoch.ErrStale, c.p, have.Epoch, e), nil
		}
		if err := pt.checkAt(c.over); err != nil {
			return fmt.Errorf("copy started over other data: %w", err), nil
		}
		return install(tx)
	})
	if err == nil {
		c.done = true
	}
	return err
}

// used is the error of an Add or Install after Install or Discard.
func (c *Copy) used() error {
	return fmt.Errorf("%w: copy of partition %d already installed or discarded", ErrInvalid, c.p)
}

// Discard deletes what was staged, unless Install moved it. It is a no-op
// after Install, after an earlier Discard, and before any Add.
func (c *Copy) Discard() error {
	if c.done || !c.staged {
		return nil
	}
	err := c.s.update(func(tx *bolt.Tx) error {
		if staging := tx.Bucket(stagingBucket); staging != nil && staging.Bucket(c.name) != nil {
			return staging.DeleteBucket(c.name)
		}
		return nil
	})
	if err == nil {
		c.done = true
	}
	return err
}

// deleteStaged deletes every staged copy: at Open, what is staged belongs
// to a receiver that no longer runs.
func deleteStaged(tx *bolt.Tx) error {
	if tx.Bucket(stagingBucket) == nil {
		return nil
	}
	return tx.DeleteBucket(stagingBucket)
}
