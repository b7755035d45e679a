//go:build !linux

package main

import "os"

// fdatasync is a full fsync where fdatasync(2) is not available.
func fdatasync(f *os.File) error { return f.Sync() }

// directWrites returns errUnsupported: O_DIRECT is probed on Linux only.
func directWrites(string, int, int) ([]func(i int) error, func(), error) {
	return nil, nil, errUnsupported
}
