package store

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data, and only the metadata needed to read it back,
// to stable storage.
func fdatasync(f *os.File) error {
	return syscall.Fdatasync(int(f.Fd()))
}

// openDirect opens the existing file path for writes that bypass the page
// cache and are durable when they return (O_DIRECT|O_DSYNC). It fails
// where the file system does not support O_DIRECT.
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT|syscall.O_DSYNC, 0)
}
