package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// fileName is the data file's name inside Config.Dir.
const fileName = "singlewriter.db"

// Store is a node's local bbolt file fronted by a write-ahead log. Its
// methods are safe for concurrent use. See the package comment for the
// goroutine that owns its writes.
type Store struct {
	db   *bolt.DB
	path string
	log  *slog.Logger
	// now stamps dedup records and audit records; read only by the
	// committer. Tests replace it before the first operation.
	now func() time.Time

	// wals are the write-ahead log's two files; owned by the committer
	// (Close closes them once the committer has exited). wals[active] takes
	// new records; the other holds imm's records while imm is flushed, and
	// otherwise only records the data file holds.
	wals   [2]*wal
	active int
	// flushHook (tests only) runs at the start of each background flush;
	// tests set it before the first operation.
	flushHook func()
	// flushDone receives the outcome of the background flush of imm; nil
	// when no flush runs. Owned by the committer.
	flushDone chan error
	// walSeq is the sequence of the last record appended to the WAL (or
	// applied to the file, if later). Owned by the committer.
	walSeq uint64
	// record is the committer's buffer for the WAL record it writes,
	// reused from one group to the next while under maxKeptRecord.
	record []byte
	// tags computes the records' tags. Owned by the committer.
	tags tagger
	// fastPath is false when data batches must go through bbolt
	// transactions (Config.MaxSize is set).
	fastPath bool
	// maxRecord bounds the estimated size of a group logged in one WAL
	// record (see loggable): half of what replay takes for a frame.
	maxRecord int
	// flushInterval (0: never), flushBytes and noFlush are the flush
	// triggers, fixed at Open.
	flushInterval time.Duration
	flushBytes    int
	noFlush       bool

	// txs counts the groups the committer has committed (one WAL record or
	// one bbolt transaction each).
	txs atomic.Uint64
	// flushes counts the flush transactions (not the slow operations'
	// transactions that flush on the way), each once its outcome is
	// recorded: a reader that sees the count sees the flush's effects.
	flushes atomic.Uint64

	// memMu guards mem, metas, fileIDs and fileGen. The committer is the
	// only writer of mem and metas (and reads them without the lock);
	// readers take the read lock.
	memMu sync.RWMutex
	// mem holds the batches acknowledged through the WAL and not yet
	// flushed. It is replaced, not cleared, by a flush.
	// Invariant: mem is emptied only after the transaction that flushed it
	// is durable, so a reader that misses in mem and then opens a read
	// transaction finds in the file every acknowledged write mem lacks.
	mem *memtable
	// imm is the memtable a background flush is writing into the file, nil
	// if none. Readers look in mem, then imm, then the file.
	// Invariant: imm is dropped only after its flush is durable.
	imm *frozen
	// metas is every partition's meta: the one in the file with every WAL
	// record not yet flushed applied on top.
	// Invariant: metas has an entry for exactly the partitions that have a
	// meta (in the file or in mem); it reflects every acknowledged
	// operation and nothing that is not durable (it is updated after the
	// WAL sync or the transaction's commit, before the waiters are
	// released); the fast path decides fences against it, and a slow
	// operation's transaction finds the same metas in the file because it
	// flushes mem first.
	metas map[int]metaEntry
	// fileIDs bounds the request IDs of the dedup records in the data
	// file: partition p's file bucket holds no ID above fileIDs[p] (no
	// entry: not known). Response skips the file for a larger ID, which a
	// time-ordered ID (the router's) almost always is. fileGen counts the
	// file's changes: a bound read from the file is kept only if the file
	// did not change meanwhile. Both are updated after each transaction
	// that changed the file commits (see fileChanged).
	fileIDs map[int][]byte
	fileGen uint64
	// trackers are the live trackers by partition and ID (see Track);
	// trackerSeq numbers them, from a random start; trackedBytes counts
	// what they recorded. Guarded by memMu.
	trackers     map[int]map[uint64]*tracker
	trackerSeq   uint64
	trackedBytes int
	// changes are the changes of the slow operations of the transaction
	// the committer is running, for the trackers (noteChange). Owned by
	// the committer.
	changes []change
	// closing is set when Close starts; reads check it first, because mem
	// and metas outlive the file.
	closing atomic.Bool
	// copies numbers the copies NewCopy starts.
	copies atomic.Uint64

	// wake (capacity 1) tells the committer that the queue is not empty.
	wake chan struct{}
	// stop is closed by Close to stop the committer.
	stop chan struct{}
	// exited is closed by the committer when it returns.
	exited chan struct{}

	// mu guards queue and closed.
	mu sync.Mutex
	// queue holds submitted operations in submission order.
	queue []*op
	// closed is set by Close; no operation is queued after it.
	closed bool

	// failure is ErrFailed wrapping the first failed transaction's error, nil
	// while healthy. Owned by the committer goroutine.
	failure error
	// poisoned points to failure once it is set, for writers that do not
	// go through the committer (Copy), and for Err.
	poisoned atomic.Pointer[error]
	// failed is closed when failure is set.
	failed chan struct{}

	closeOnce sync.Once
	// closeErr is Close's result; the committer sets it to its last
	// flush's error before it exits.
	closeErr error
}

// Open opens (or creates) the data file in cfg.Dir and starts the committer.
// It returns an error wrapping ErrLocked, naming the file, when another
// process or handle holds the file for longer than cfg.OpenTimeout.
func Open(cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(cfg.Dir, fileName)
	_, statErr := os.Stat(path)
	if err := makeDir(cfg.Dir, errors.Is(statErr, fs.ErrNotExist), cfg.NoSync); err != nil {
		return nil, fmt.Errorf("store: create data directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: cfg.OpenTimeout,
		NoSync:  cfg.NoSync,
		MaxSize: cfg.MaxSize,
		// The freelist is rebuilt by scanning at open instead of written at
		// every commit: fewer pages per commit, on the path of every call.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (waited %s)", ErrLocked, path, cfg.OpenTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(clusterBucket); err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(storeBucket); err != nil {
			return err
		}
		return deleteStaged(tx)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: initialize %s: %w", path, err)
	}
	s := &Store{
		db:            db,
		path:          path,
		log:           cfg.Logger,
		now:           time.Now,
		fastPath:      cfg.MaxSize == 0,
		maxRecord:     walMaxRecord / 2,
		flushInterval: cfg.FlushInterval,
		flushBytes:    cfg.FlushBytes,
		noFlush:       cfg.noFlush,
		mem:           newMemtable(),
		fileIDs:       make(map[int][]byte),
		trackers:      make(map[int]map[uint64]*tracker),
		trackerSeq:    firstTrackerID(),
		wake:          make(chan struct{}, 1),
		stop:          make(chan struct{}),
		exited:        make(chan struct{}),
		failed:        make(chan struct{}),
	}
	if s.noFlush {
		s.flushInterval = 0
	}
	replayed, err := s.replayWAL(cfg)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	go s.run()
	s.log.Info("store: opened", "path", path, "nosync", cfg.NoSync, "wal_replayed", replayed)
	return s, nil
}

// Err returns the failure that poisoned the store (it matches ErrFailed),
// or nil: once it is set, every later mutation fails until the directory
// is opened again.
func (s *Store) Err() error {
	if failure := s.poisoned.Load(); failure != nil {
		return *failure
	}
	return nil
}

// Failed returns a channel that is closed when the store fails (Err is
// then set). It stays open after Close.
func (s *Store) Failed() <-chan struct{} { return s.failed }

// Close stops the committer, waits for the group it is committing, fails
// every operation still queued (and every later one) with ErrClosed,
// flushes the memtable into the data file and empties the WAL (unless the
// store is poisoned: the WAL keeps the batches for the next Open), and
// closes the files. It
// is idempotent: later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		<-s.exited // the committer stored its flush's error in closeErr
		s.closeErr = errors.Join(s.closeErr, s.closeWALs())
		if err := s.db.Close(); err != nil {
			s.closeErr = errors.Join(s.closeErr, fmt.Errorf("store: close %s: %w", s.path, err))
		}
	})
	return s.closeErr
}

// do queues apply, which may change partition p's meta (noPartition: none),
// for the committer and waits for its outcome. ctx is checked before the
// op is queued, not after: apply writes results into its caller's
// variables, so the caller must not return (and read them) while the
// committer may still run it. The committer finishes every op, or fails it
// at Close, so the wait is bounded.
func (s *Store) do(ctx context.Context, p int, apply applyFunc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.enqueue(&op{apply: apply, partition: p}).Wait(context.Background())
}

// view runs fn in a read transaction, reporting a closed store as ErrClosed.
func (s *Store) view(fn func(tx *bolt.Tx) error) error {
	return s.inTx(s.db.View, fn)
}

// update runs fn in a read-write transaction of its own, outside the
// committer, reporting a closed store as ErrClosed and refusing, like the
// committer, to write to a poisoned one. Only for what no read and no meta
// depends on: staged copies (copy.go).
func (s *Store) update(fn func(tx *bolt.Tx) error) error {
	if err := s.Err(); err != nil {
		return err
	}
	return s.inTx(s.db.Update, fn)
}

// inTx runs fn in a transaction of kind run (View or Update), reporting a
// closed store as ErrClosed.
func (s *Store) inTx(run func(func(*bolt.Tx) error) error, fn func(tx *bolt.Tx) error) error {
	if s.closing.Load() {
		return ErrClosed
	}
	err := run(fn)
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// closeWALs closes the WAL files that are open.
func (s *Store) closeWALs() error {
	var errs []error
	for _, w := range s.wals {
		if w != nil {
			errs = append(errs, w.close())
		}
	}
	return errors.Join(errs...)
}
