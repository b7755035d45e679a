//go:build nofencing

package testhook

// A build with the nofencing tag switches the store's epoch check off for
// the whole process: the robustness harness builds its control nodes this
// way and must then find violations. Never ship such a build.
func init() { fencingDisabled.Store(true) }
