//go:build !linux

package store

import (
	"errors"
	"os"
)

// fdatasync flushes f to stable storage; where fdatasync(2) is not
// available it is a full fsync.
func fdatasync(f *os.File) error {
	return f.Sync()
}

// openDirect fails: direct, synchronous writes are used on Linux only.
func openDirect(string) (*os.File, error) {
	return nil, errors.New("store: O_DIRECT is not used on this system")
}
