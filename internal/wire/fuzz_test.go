package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzReadFrame feeds arbitrary bytes to ReadFrame with a small maximum. It
// must never panic, never return a frame larger than the maximum, fail only
// with the documented errors, and every frame it accepts must re-encode to
// exactly the bytes it consumed. The extra arguments form a frame that must
// round-trip through WriteFrame and ReadFrame.
func FuzzReadFrame(f *testing.F) {
	const maxSize = 64
	f.Add([]byte{0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 1, 3, 0}, uint64(1), uint8(2), uint8(FlagResponse), []byte("body"))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint64(0), uint8(0), uint8(0), []byte{})
	f.Add([]byte{0, 0, 0, 3, 1, 2, 3}, uint64(1<<63), uint8(255), uint8(0xff), make([]byte, maxSize))
	f.Add([]byte{0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 9, 1, 1, 'o'}, uint64(9), uint8(1), uint8(1), []byte("ok"))
	f.Fuzz(func(t *testing.T, data []byte, id uint64, typ, flags uint8, body []byte) {
		var reencoded bytes.Buffer
		w := bufio.NewWriter(&reencoded)
		r := bufio.NewReader(bytes.NewReader(data))
		for {
			fr, err := ReadFrame(r, maxSize)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) &&
					!errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrShortFrame) {
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
			require.LessOrEqual(t, HeaderSize+cap(fr.Body), maxSize)
			require.NoError(t, WriteFrame(w, fr))
		}
		require.NoError(t, w.Flush())
		require.True(t, bytes.HasPrefix(data, reencoded.Bytes()), "accepted frames do not re-encode to their input")

		want := Frame{ID: id, Type: typ, Flags: flags, Body: body}
		var buf bytes.Buffer
		w = bufio.NewWriter(&buf)
		require.NoError(t, WriteFrame(w, want))
		require.NoError(t, w.Flush())
		require.Equal(t, HeaderSize+len(body), int(binary.BigEndian.Uint32(buf.Bytes())))
		got, err := ReadFrame(bufio.NewReader(&buf), maxSize)
		if HeaderSize+len(body) > maxSize {
			require.ErrorIs(t, err, ErrFrameTooLarge)
			return
		}
		require.NoError(t, err)
		require.Equal(t, want.ID, got.ID)
		require.Equal(t, want.Type, got.Type)
		require.Equal(t, want.Flags, got.Flags)
		require.True(t, bytes.Equal(want.Body, got.Body))
	})
}

// FuzzDecoder decodes arbitrary bytes with an arbitrary sequence of reads and
// checks that it never panics, that reads after an error return zero values,
// and that no value is longer than the input. It then encodes values drawn
// from the same bytes with the same sequence and requires them to decode back
// unchanged and completely.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{3, 'a', 'b', 'c', 1, 0x80, 0x01}, []byte{2, 3, 0, 4})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, []byte{0, 1, 1})
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x10}, []byte{1})
	f.Fuzz(func(t *testing.T, data, ops []byte) {
		d := NewDecoder(data)
		for _, op := range ops {
			failed := d.Err() != nil
			switch op % 5 {
			case 0:
				v := d.Uvarint()
				require.True(t, !failed || v == 0)
			case 1:
				v := d.Bytes()
				require.LessOrEqual(t, len(v), len(data))
				require.True(t, !failed || v == nil)
			case 2:
				v := d.String()
				require.LessOrEqual(t, len(v), len(data))
				require.True(t, !failed || v == "")
			case 3:
				v := d.Bool()
				require.True(t, !failed || !v)
			case 4:
				v := d.Uint8()
				require.True(t, !failed || v == 0)
			}
			if failed {
				require.ErrorIs(t, d.Err(), ErrMalformed)
			}
		}
		if err := d.Finish(); err != nil {
			require.ErrorIs(t, err, ErrMalformed)
		}

		src := data
		next := func(n int) []byte {
			n = min(n, len(src))
			b := src[:n]
			src = src[n:]
			return b
		}
		var e Encoder
		var want []any
		for _, op := range ops {
			switch op % 5 {
			case 0:
				var word [8]byte
				copy(word[:], next(8))
				v := binary.LittleEndian.Uint64(word[:])
				e.Uvarint(v)
				want = append(want, v)
			case 1:
				v := next(int(op) / 5)
				e.Bytes(v)
				want = append(want, v)
			case 2:
				v := string(next(int(op) / 5))
				e.String(v)
				want = append(want, v)
			case 3:
				v := op&0x80 != 0
				e.Bool(v)
				want = append(want, v)
			case 4:
				v := op / 5
				e.Uint8(v)
				want = append(want, v)
			}
		}
		d = NewDecoder(e.Out())
		for i, op := range ops {
			switch op % 5 {
			case 0:
				require.Equal(t, want[i], d.Uvarint())
			case 1:
				require.True(t, bytes.Equal(want[i].([]byte), d.Bytes()))
			case 2:
				require.Equal(t, want[i], d.String())
			case 3:
				require.Equal(t, want[i], d.Bool())
			case 4:
				require.Equal(t, want[i], d.Uint8())
			}
		}
		require.NoError(t, d.Finish())
	})
}
