package main

import (
	"context"
	"encoding/binary"
	"errors"
	"time"
)

// valueSize is the size of every stored value: an 8-byte big-endian
// counter followed by padding.
const valueSize = 256

// errNotAcknowledged is returned by a Client's Incr when the write was
// refused or its outcome is unknown: the increment is not counted.
var errNotAcknowledged = errors.New("bench: increment not acknowledged")

// System is one row of the comparison: a running service that keeps
// per-key counters.
type System interface {
	// Client returns a new client, the state one benchmark client keeps
	// (a connection, a lock session).
	Client(ctx context.Context) (Client, error)
	// Values returns the stored counter of each key (0 if absent).
	Values(ctx context.Context, keys [][]byte) ([]uint64, error)
	// Close stops the system and everything it started.
	Close() error
}

// Client runs increments on behalf of one benchmark client. A Client is
// used by one goroutine at a time.
type Client interface {
	// Incr reads key's counter, adds one and writes it back under the
	// system's mutual exclusion, durably. A nil error means acknowledged.
	// A positive pause makes the client (or the handler) stop for that
	// long inside the critical section, between the read and the write.
	Incr(ctx context.Context, key []byte, pause time.Duration) error
	// Close releases the client's resources.
	Close() error
}

// forwarder is implemented by clients that enter a cluster at one of its
// nodes: Forwarded reports whether the last Incr entered at a node other
// than its key's owner.
type forwarder interface {
	Forwarded() bool
}

// preparer is implemented by systems that must create a workload's rows
// before they can be locked (a row lock needs a row).
type preparer interface {
	Prepare(ctx context.Context, keys [][]byte) error
}

// encodeValue returns the stored form of counter n.
func encodeValue(n uint64) []byte {
	v := make([]byte, valueSize)
	binary.BigEndian.PutUint64(v, n)
	return v
}

// decodeValue returns the counter of a stored value; absent or short
// values count as 0.
func decodeValue(v []byte) uint64 {
	if len(v) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
