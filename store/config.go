package store

import (
	"fmt"
	"log/slog"
	"time"
)

// defaultOpenTimeout is how long Open waits for the file lock when
// Config.OpenTimeout is zero.
const defaultOpenTimeout = time.Second

// Config configures Open.
type Config struct {
	// Dir is the data directory, created (mode 0700) if missing. The data file
	// is Dir/singlewriter.db. Required.
	Dir string

	// OpenTimeout is how long Open waits for another process's (or another
	// handle's) lock on the file before returning ErrLocked. Zero means 1s.
	// It is never infinite: a second node started on the same directory must
	// fail, not hang.
	OpenTimeout time.Duration

	// NoSync skips fsync on commit. For tests and benchmarks only: a commit
	// acknowledged with NoSync can be lost, or the file corrupted, by a crash
	// of the machine, which breaks the "nothing acknowledged is lost"
	// guarantee. A process crash alone loses nothing.
	NoSync bool

	// MaxSize caps the data file, in bytes. A commit that would grow the file
	// past it fails like a full disk would, and poisons the store (see
	// ErrFailed). Zero means no cap.
	MaxSize int

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
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}
