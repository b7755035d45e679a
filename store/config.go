package store

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults of the Config fields whose zero value means "the default".
const (
	// defaultOpenTimeout is how long Open waits for the file lock.
	defaultOpenTimeout = time.Second
	// defaultFlushInterval bounds how long acknowledged batches stay only in
	// the WAL and the memtable.
	defaultFlushInterval = 500 * time.Millisecond
	// defaultFlushBytes is the WAL and memtable size that triggers a flush.
	defaultFlushBytes = 8 << 20
)

// Config configures Open.
type Config struct {
	// Dir is the data directory, created (mode 0700) if missing. The data file
	// is Dir/singlewriter.db; the write-ahead log in front of it is the two
	// files Dir/wal-0 and Dir/wal-1 (reused in turn, each of about
	// FlushBytes, zero-filled as they grow).
	// Both belong to the store: copy or move them together. Required.
	Dir string

	// OpenTimeout is how long Open waits for another process's (or another
	// handle's) lock on the file before returning ErrLocked. Zero means 1s.
	// It is never infinite: a second node started on the same directory must
	// fail, not hang.
	OpenTimeout time.Duration

	// NoSync skips fsync: the WAL's sync (and its O_DIRECT writes), the
	// data file's sync, and the syncs of the directories Open creates. For
	// tests and benchmarks only: a commit acknowledged with NoSync
	// can be lost, or the file corrupted, by a crash of the machine, which
	// breaks the "nothing acknowledged is lost" guarantee. A process crash
	// alone loses nothing.
	NoSync bool

	// MaxSize caps the data file, in bytes. A commit that would grow the file
	// past it fails like a full disk would, and poisons the store (see
	// ErrFailed). Zero means no cap. A cap turns the WAL off for data
	// batches (each group is a bbolt transaction, as for slow operations):
	// the WAL would acknowledge a batch before the file has to hold it, and
	// the cap would then fail a later flush instead of the batch itself.
	MaxSize int

	// FlushInterval is how long acknowledged data batches may stay only in
	// the WAL (and the in-memory memtable) before the committer flushes them
	// into the data file. Zero means 500ms. Longer means fewer, larger flush
	// transactions (each dirtying every touched partition's pages once)
	// and a longer WAL to replay after a crash; shorter means more flushes
	// competing with commits for the committer and the disk.
	FlushInterval time.Duration

	// FlushBytes is the WAL (or memtable) size, in bytes, that triggers a
	// flush; 50,000 keys in the memtable trigger one too. Zero means 8 MiB.
	// It bounds the memory the memtable holds, the WAL file's size and the
	// replay work at Open: while a flush runs they may grow to 4 times it,
	// then commits wait for that flush.
	FlushBytes int

	// noFlush (tests only) disables the timer and size flushes and the flush
	// at Close, so that a test can close the store with acknowledged batches
	// only in the WAL, as a crash would leave it. Slow operations and Export
	// still flush: they must.
	noFlush bool

	// Logger receives the store's rare events (open, a failed transaction).
	// Nil means discard.
	Logger *slog.Logger
}

// withDefaults returns cfg with zero fields filled in, or an ErrInvalid
// naming the bad field.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Dir == "" {
		return cfg, fmt.Errorf("%w: Config.Dir is empty", ErrInvalid)
	}
	if cfg.OpenTimeout < 0 {
		return cfg, fmt.Errorf("%w: Config.OpenTimeout %s is negative", ErrInvalid, cfg.OpenTimeout)
	}
	if cfg.OpenTimeout == 0 {
		cfg.OpenTimeout = defaultOpenTimeout
	}
	if cfg.MaxSize < 0 {
		return cfg, fmt.Errorf("%w: Config.MaxSize %d is negative", ErrInvalid, cfg.MaxSize)
	}
	if cfg.FlushInterval < 0 {
		return cfg, fmt.Errorf("%w: Config.FlushInterval %s is negative", ErrInvalid, cfg.FlushInterval)
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = defaultFlushInterval
	}
	if cfg.FlushBytes < 0 {
		return cfg, fmt.Errorf("%w: Config.FlushBytes %d is negative", ErrInvalid, cfg.FlushBytes)
	}
	if cfg.FlushBytes == 0 {
		cfg.FlushBytes = defaultFlushBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}
