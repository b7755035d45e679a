package epoch

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteBelowPromiseIsStale(t *testing.T) {
	err := CheckWrite(5, 4)
	require.ErrorIs(t, err, ErrStale)
	var se *StaleError
	require.True(t, errors.As(err, &se))
	require.Equal(t, Epoch(4), se.Got)
	require.Equal(t, Epoch(5), se.Promised)
}

func TestWriteAtOrAbovePromiseIsAllowed(t *testing.T) {
	require.NoError(t, CheckWrite(5, 5))
	require.NoError(t, CheckWrite(5, 6))
}

func TestPromiseMustBeStrictlyHigher(t *testing.T) {
	require.ErrorIs(t, CheckPromise(5, 5), ErrStale)
	require.ErrorIs(t, CheckPromise(5, 4), ErrStale)
	require.NoError(t, CheckPromise(5, 6))
}

// FuzzPromiseAndWrite replays random sequences of promises and writes and
// checks the fence: no write below the highest promise is ever allowed, and
// the promise never decreases.
func FuzzPromiseAndWrite(f *testing.F) {
	f.Add([]byte{1, 5, 0, 3, 1, 2, 0, 7})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var promised Epoch
		for i := 0; i+1 < len(ops); i += 2 {
			e := Epoch(ops[i+1])
			if ops[i]%2 == 0 {
				if CheckWrite(promised, e) == nil && e < promised {
					t.Fatalf("write at %d allowed below promise %d", e, promised)
				}
				continue
			}
			before := promised
			if CheckPromise(promised, e) == nil {
				promised = e
			}
			if promised < before {
				t.Fatalf("promise went down from %d to %d", before, promised)
			}
		}
	})
}
