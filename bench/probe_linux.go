package main

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"
)

func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// probeDirect times n 4 KiB O_DIRECT|O_DSYNC writes into a preallocated
// file, one system call each, as the library's log writes where the file
// system allows it. It returns errUnsupported where it does not.
func probeDirect(dir string, n int) (time.Duration, error) {
	const block = 4096
	f, err := preallocated(filepath.Join(dir, "direct-probe"), n*block, syscall.O_DIRECT|syscall.O_DSYNC)
	if errors.Is(err, syscall.EINVAL) {
		return 0, errUnsupported
	}
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	mem := make([]byte, 2*block)
	skip := -int(uintptr(unsafe.Pointer(&mem[0]))) & (block - 1)
	buf := probeBytes(mem[skip : skip+block])
	samples := make([]time.Duration, n)
	for i := range samples {
		t := time.Now()
		if _, err := f.WriteAt(buf, int64(i*block)); err != nil {
			return 0, err
		}
		samples[i] = time.Since(t)
	}
	return median(samples), nil
}
