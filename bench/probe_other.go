//go:build !linux

package main

import (
	"os"
	"time"
)

// fdatasync is a full fsync where fdatasync(2) is not available.
func fdatasync(f *os.File) error { return f.Sync() }

// probeDirect returns errUnsupported: O_DIRECT is probed on Linux only.
func probeDirect(string, int, int) (time.Duration, error) { return 0, errUnsupported }
