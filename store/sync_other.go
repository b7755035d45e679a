//go:build !linux

package store

import "os"

// fdatasync flushes f to stable storage; where fdatasync(2) is not
// available it is a full fsync.
func fdatasync(f *os.File) error {
	return f.Sync()
}
