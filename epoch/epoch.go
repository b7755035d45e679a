// Package epoch defines the fencing token of a partition and the rule that
// enforces it.
//
// An Epoch is the ballot under which a partition's claim was chosen. Every
// replica of a partition remembers the highest epoch it has promised; it
// accepts a write or a proposal only at that epoch or above, and promises a
// new epoch only if it is strictly higher. Epochs of a partition therefore
// only grow, and a writer holding an older one is refused where the data
// lives:
//
//	promised := epoch.Epoch(7)
//	if err := epoch.CheckWrite(promised, 6); errors.Is(err, epoch.ErrStale) {
//		// the writer lost the partition: nothing is applied
//	}
//
// The package is pure: no I/O, no clock, no goroutines.
package epoch

import (
	"errors"
	"fmt"
)

// Epoch is a partition's fencing token. Zero is the root claim made at
// bootstrap; every later claim has a strictly higher epoch.
type Epoch uint64

// ErrStale is returned (wrapped in a *StaleError) when an epoch is below what
// a replica has promised: a write or accept below the promise, or a promise
// that is not strictly above it.
var ErrStale = errors.New("epoch: stale epoch")

// StaleError reports a refused epoch together with the promise that refused
// it, so the refused party can pick a higher ballot. It matches ErrStale
// with errors.Is.
type StaleError struct {
	// Got is the refused epoch.
	Got Epoch
	// Promised is the epoch the refused one had to reach: the replica's
	// promise at the time of the refusal or, for a data write, the epoch of
	// a newer claim the replica knows to be chosen (store.Meta.Fence).
	Promised Epoch
}

// Error implements error.
func (e *StaleError) Error() string {
	return fmt.Sprintf("epoch: stale epoch %d, promised %d", e.Got, e.Promised)
}

// Is makes errors.Is(err, ErrStale) true for a *StaleError.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// CheckWrite is the fence: a write or a Paxos accept at epoch e is allowed
// only if e >= promised. It returns a *StaleError otherwise.
func CheckWrite(promised, e Epoch) error {
	if e < promised {
		return &StaleError{Got: e, Promised: promised}
	}
	return nil
}

// CheckPromise is the promise rule: a replica may promise e only if
// e > promised. It returns a *StaleError otherwise.
func CheckPromise(promised, e Epoch) error {
	if e <= promised {
		return &StaleError{Got: e, Promised: promised}
	}
	return nil
}
