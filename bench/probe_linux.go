package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"
)

func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// probeDirect times n 4 KiB O_DIRECT|O_DSYNC writes into a preallocated
// file, one system call each, as the library's log writes where the file
// system allows it, by each of writers goroutines to its own file. It
// returns errUnsupported where the file system refuses them.
func probeDirect(dir string, n, writers int) (time.Duration, error) {
	const block = 4096
	mem := make([]byte, 2*block)
	skip := -int(uintptr(unsafe.Pointer(&mem[0]))) & (block - 1)
	buf := probeBytes(mem[skip : skip+block])
	writes := make([]func(i int) error, writers)
	for w := range writes {
		f, err := preallocated(filepath.Join(dir, fmt.Sprintf("direct-probe-%d", w)), n*block, syscall.O_DIRECT|syscall.O_DSYNC)
		if errors.Is(err, syscall.EINVAL) {
			return 0, errUnsupported
		}
		if err != nil {
			return 0, err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		writes[w] = func(i int) error {
			_, err := f.WriteAt(buf, int64(i*block))
			return err
		}
	}
	return timeWrites(n, writes)
}
