package store

import (
	"context"
	"errors"
	"fmt"
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

// Store is a node's local bbolt file. Its methods are safe for concurrent
// use. See the package comment for the goroutine that owns its writes.
type Store struct {
	db   *bolt.DB
	path string
	log  *slog.Logger
	// now stamps dedup records and audit records; read only by the
	// committer. Tests replace it before the first operation.
	now func() time.Time

	// txs counts the read-write transactions the committer has run.
	txs atomic.Uint64

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

	closeOnce sync.Once
	closeErr  error
}

// Open opens (or creates) the data file in cfg.Dir and starts the committer.
// It returns an error wrapping ErrLocked, naming the file, when another
// process or handle holds the file for longer than cfg.OpenTimeout.
func Open(cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create data directory: %w", err)
	}
	path := filepath.Join(cfg.Dir, fileName)
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
		_, err := tx.CreateBucketIfNotExists(clusterBucket)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: initialize %s: %w", path, err)
	}
	s := &Store{
		db:     db,
		path:   path,
		log:    cfg.Logger,
		now:    time.Now,
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	go s.run()
	s.log.Info("store: opened", "path", path, "nosync", cfg.NoSync)
	return s, nil
}

// Close stops the committer, waits for the group it is committing, fails
// every operation still queued (and every later one) with ErrClosed, and
// closes the file. It is idempotent: later calls return the first call's
// result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		<-s.exited
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("store: close %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// view runs fn in a read transaction, reporting a closed file as ErrClosed.
func (s *Store) view(fn func(tx *bolt.Tx) error) error {
	err := s.db.View(fn)
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// do queues apply for the committer and waits for its outcome; ctx only
// stops the waiting.
func (s *Store) do(ctx context.Context, apply applyFunc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.enqueue(apply).Wait(ctx)
}
