package main

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// directWrites prepares n 4 KiB O_DIRECT|O_DSYNC writes into a
// preallocated file, one system call each, as the library's log writes
// where the file system allows it, for each of writers goroutines to its
// own file. It returns errUnsupported where the file system refuses them.
func directWrites(dir string, n, writers int) ([]func(i int) error, func(), error) {
	const block = 4096
	mem := make([]byte, 2*block)
	skip := -int(uintptr(unsafe.Pointer(&mem[0]))) & (block - 1)
	buf := probeBytes(mem[skip : skip+block])
	writes, remove, err := preallocatedWrites(dir, "direct-probe", n*block, syscall.O_DIRECT|syscall.O_DSYNC, writers, func(f *os.File, i int) error {
		_, err := f.WriteAt(buf, int64(i*block))
		return err
	})
	if errors.Is(err, syscall.EINVAL) {
		return nil, nil, errUnsupported
	}
	return writes, remove, err
}
