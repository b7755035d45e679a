//go:build !linux

package proc

import "syscall"

// dieWithParent does nothing where the kernel has no parent-death signal:
// a server outlives a Go program that dies without stopping it.
func dieWithParent(*syscall.SysProcAttr) {}
