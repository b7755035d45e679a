package wire

import (
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEncoderOutputDecodesToTheSameValues(t *testing.T) {
	var e Encoder
	e.Uvarint(0)
	e.Uvarint(math.MaxUint64)
	e.Bytes([]byte("raw"))
	e.Bytes(nil)
	e.String("héllo")
	e.String("")
	e.Bool(true)
	e.Bool(false)
	e.Uint8(200)

	d := NewDecoder(e.Out())
	require.Equal(t, uint64(0), d.Uvarint())
	require.Equal(t, uint64(math.MaxUint64), d.Uvarint())
	require.Equal(t, []byte("raw"), d.Bytes())
	require.Nil(t, d.Bytes())
	require.Equal(t, "héllo", d.String())
	require.Equal(t, "", d.String())
	require.True(t, d.Bool())
	require.False(t, d.Bool())
	require.Equal(t, uint8(200), d.Uint8())
	require.NoError(t, d.Finish())
}

func TestDecodedBytesAreCopies(t *testing.T) {
	var e Encoder
	e.Bytes([]byte("abc"))
	body := e.Out()
	got := NewDecoder(body).Bytes()
	body[1] = 'X'
	require.Equal(t, []byte("abc"), got)
}

func TestDecoderErrorIsStickyAndReadsReturnZero(t *testing.T) {
	var e Encoder
	e.Uint8(1)
	e.String("after")
	d := NewDecoder(e.Out()[:1])
	require.Equal(t, uint8(1), d.Uint8())
	require.Equal(t, "", d.String())
	require.ErrorIs(t, d.Err(), ErrMalformed)

	// Reads after the failure see zero values even though, on their own,
	// they might have succeeded.
	require.Equal(t, uint64(0), d.Uvarint())
	require.Nil(t, d.Bytes())
	require.False(t, d.Bool())
	require.Equal(t, uint8(0), d.Uint8())
	require.ErrorIs(t, d.Finish(), ErrMalformed)
}

func TestLengthBeyondRemainingFailsWithoutAllocating(t *testing.T) {
	var e Encoder
	e.Uvarint(1 << 40)
	e.Uint8(0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := NewDecoder(e.Out())
	got := d.Bytes()
	runtime.ReadMemStats(&after)
	require.Nil(t, got)
	require.ErrorIs(t, d.Err(), ErrMalformed)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "Bytes allocated for a length it refused")

	d = NewDecoder(e.Out())
	require.Equal(t, "", d.String())
	require.ErrorIs(t, d.Err(), ErrMalformed)
}

func TestVarintOverflowIsMalformed(t *testing.T) {
	d := NewDecoder([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	require.Equal(t, uint64(0), d.Uvarint())
	require.ErrorIs(t, d.Err(), ErrMalformed)
}

func TestTruncatedVarintIsMalformed(t *testing.T) {
	d := NewDecoder([]byte{0x80})
	require.Equal(t, uint64(0), d.Uvarint())
	require.ErrorIs(t, d.Err(), ErrMalformed)
}

func TestBoolOtherThanZeroOrOneIsMalformed(t *testing.T) {
	d := NewDecoder([]byte{2})
	require.False(t, d.Bool())
	require.ErrorIs(t, d.Err(), ErrMalformed)
}

func TestFinishRejectsLeftoverBytes(t *testing.T) {
	d := NewDecoder([]byte{1, 2})
	require.Equal(t, uint8(1), d.Uint8())
	require.NoError(t, d.Err())
	require.ErrorIs(t, d.Finish(), ErrMalformed)
}
