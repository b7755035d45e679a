// Package testhook holds switches that tests flip to prove that a safety
// mechanism matters: a test that still passes with the mechanism switched
// off proves nothing.
//
//	func TestWithoutFencingStaleWriteIsApplied(t *testing.T) {
//		testhook.DisableFencing(t)
//		// ... a stale write now succeeds
//	}
//
// Production code only reads the switches; only tests set them.
package testhook

import (
	"sync/atomic"
	"testing"
)

// fencingDisabled is read by the store on every fenced operation.
var fencingDisabled atomic.Bool

// DisableFencing switches the store's epoch check off until the test ends
// (t.Cleanup restores it). Tests using it must not run in parallel. It
// exists so tests can prove that they fail without fencing.
func DisableFencing(t testing.TB) {
	t.Helper()
	fencingDisabled.Store(true)
	t.Cleanup(func() { fencingDisabled.Store(false) })
}

// FencingDisabled reports whether a test has switched the epoch check off.
func FencingDisabled() bool { return fencingDisabled.Load() }
