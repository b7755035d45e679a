package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

func encodeFrames(t testing.TB, frames ...Frame) []byte {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	for _, f := range frames {
		require.NoError(t, WriteFrame(w, f))
	}
	require.NoError(t, w.Flush())
	return buf.Bytes()
}

func reader(b []byte) *bufio.Reader {
	return bufio.NewReader(bytes.NewReader(b))
}

func TestFramesRoundTripInOrder(t *testing.T) {
	frames := []Frame{
		{ID: 1, Type: 3, Body: []byte("hello")},
		{ID: 1<<64 - 1, Type: 255, Flags: FlagResponse | FlagError, Body: []byte("boom")},
		{ID: 0, Type: 0, Flags: FlagResponse, Body: []byte{}},
	}
	r := reader(encodeFrames(t, frames...))
	for _, want := range frames {
		got, err := ReadFrame(r, 1024)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := ReadFrame(r, 1024)
	require.ErrorIs(t, err, io.EOF)
}

func TestFrameLayoutIsBigEndianLengthIDTypeFlags(t *testing.T) {
	got := encodeFrames(t, Frame{ID: 0x0102030405060708, Type: 9, Flags: FlagError, Body: []byte{0xaa}})
	want := []byte{0, 0, 0, 11, 1, 2, 3, 4, 5, 6, 7, 8, 9, FlagError, 0xaa}
	require.Equal(t, want, got)
}

func TestFrameAtMaxIsAcceptedAndOneMoreIsTooLarge(t *testing.T) {
	body := make([]byte, 20)
	data := encodeFrames(t, Frame{ID: 1, Body: body})

	_, err := ReadFrame(reader(data), HeaderSize+len(body))
	require.NoError(t, err)

	_, err = ReadFrame(reader(data), HeaderSize+len(body)-1)
	require.ErrorIs(t, err, ErrFrameTooLarge)
}

func TestOversizedLengthIsRejectedBeforeAllocating(t *testing.T) {
	data := []byte{0xff, 0xff, 0xff, 0xff}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(reader(data), 1<<20)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "ReadFrame allocated for a frame it refused")
}

// A frame that claims the largest size allowed but whose stream ends soon
// after costs memory for what arrived, not for what it claimed.
func TestClaimedSizeIsNotAllocatedBeforeItsBytesArrive(t *testing.T) {
	const claimed = 64 << 20
	data := binary.BigEndian.AppendUint32(nil, claimed)
	data = append(data, make([]byte, HeaderSize+100)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(reader(data), claimed)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "ReadFrame allocated for bytes that never came")
}

// Frames around and well past the first chunk's size read back whole.
func TestFramesLargerThanTheFirstChunkRoundTrip(t *testing.T) {
	for _, n := range []int{firstChunk - HeaderSize - 1, firstChunk - HeaderSize, firstChunk - HeaderSize + 1, 5*firstChunk + 3} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(i * 7)
		}
		got, err := ReadFrame(reader(encodeFrames(t, Frame{ID: 9, Body: body})), HeaderSize+n)
		require.NoError(t, err)
		require.Equal(t, body, got.Body, "body of %d bytes", n)
		require.Equal(t, uint64(9), got.ID)
	}
}

func TestLengthBelowHeaderIsShortFrame(t *testing.T) {
	data := binary.BigEndian.AppendUint32(nil, HeaderSize-1)
	data = append(data, make([]byte, HeaderSize)...)
	_, err := ReadFrame(reader(data), 1024)
	require.ErrorIs(t, err, ErrShortFrame)
}

func TestStreamEndingInsideAFrameIsUnexpectedEOF(t *testing.T) {
	data := encodeFrames(t, Frame{ID: 7, Body: []byte("payload")})
	for _, n := range []int{1, 3, 4, 5, len(data) - 1} {
		_, err := ReadFrame(reader(data[:n]), 1024)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF, "truncated to %d bytes", n)
	}
	_, err := ReadFrame(reader(nil), 1024)
	require.ErrorIs(t, err, io.EOF)
}

func TestReaderErrorsArePassedThrough(t *testing.T) {
	boom := errors.New("boom")
	_, err := ReadFrame(bufio.NewReader(iotest.ErrReader(boom)), 1024)
	require.ErrorIs(t, err, boom)

	data := encodeFrames(t, Frame{ID: 7, Body: []byte("payload")})
	r := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(data[:6]), iotest.ErrReader(boom)), 16)
	_, err = ReadFrame(r, 1024)
	require.ErrorIs(t, err, boom)
}
