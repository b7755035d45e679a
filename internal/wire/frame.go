package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

const (
	// HeaderSize is the number of bytes after the length prefix that precede
	// the body: the request id, the type and the flags. A frame's size, as
	// compared with a reader's maximum, is HeaderSize plus the body length.
	HeaderSize = 8 + 1 + 1
	// FlagResponse marks a frame as the answer to the request with the same id.
	FlagResponse uint8 = 1 << 0
	// FlagError marks a response whose body is an error text, not a result.
	FlagError uint8 = 1 << 1
	// FlagCancel marks a frame, with no body, that tells the server its
	// caller gave up on the request with the same id; the caller discards
	// any answer that still comes.
	FlagCancel uint8 = 1 << 2
)

// lengthSize is the size of the big-endian length prefix.
const lengthSize = 4

// firstChunk is the most ReadFrame allocates for a frame before its bytes
// arrive; the buffer then doubles as they do.
const firstChunk = 64 << 10

// Frame is one message on a stream.
type Frame struct {
	// ID pairs a response with its request.
	ID uint64
	// Type says how to decode Body; its meaning belongs to the caller.
	Type uint8
	// Flags holds FlagResponse, FlagError or FlagCancel.
	Flags uint8
	// Body is the encoded message.
	Body []byte
}

// WriteFrame appends f to w. It does not flush, so that a writer can batch
// many frames into one system call. It returns ErrFrameTooLarge if the frame
// does not fit a 4-byte length.
func WriteFrame(w *bufio.Writer, f Frame) error {
	if uint64(len(f.Body)) > math.MaxUint32-HeaderSize {
		return fmt.Errorf("%w: body of %d bytes", ErrFrameTooLarge, len(f.Body))
	}
	var hdr [lengthSize + HeaderSize]byte
	binary.BigEndian.PutUint32(hdr[0:4], uint32(HeaderSize+len(f.Body)))
	binary.BigEndian.PutUint64(hdr[4:12], f.ID)
	hdr[12] = f.Type
	hdr[13] = f.Flags
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(f.Body)
	return err
}

// ReadFrame reads one frame from r. A frame whose size (HeaderSize plus the
// body length) exceeds maxSize fails with ErrFrameTooLarge before its buffer is
// allocated; one smaller than HeaderSize fails with ErrShortFrame. The buffer
// grows with the bytes that arrive, from firstChunk, so a peer that claims a
// large frame and sends little makes it allocate little. Errors of r are
// passed through: io.EOF means the stream ended cleanly between frames,
// io.ErrUnexpectedEOF that it ended inside one. The returned body is freshly
// allocated and owned by the caller.
func ReadFrame(r *bufio.Reader, maxSize int) (Frame, error) {
	prefix, err := r.Peek(lengthSize)
	if err != nil {
		if len(prefix) > 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	size := uint64(binary.BigEndian.Uint32(prefix))
	if _, err := r.Discard(lengthSize); err != nil {
		return Frame{}, err
	}
	if size < HeaderSize {
		return Frame{}, fmt.Errorf("%w: length %d", ErrShortFrame, size)
	}
	if maxSize < 0 || size > uint64(maxSize) {
		return Frame{}, fmt.Errorf("%w: length %d exceeds max %d", ErrFrameTooLarge, size, maxSize)
	}
	buf := make([]byte, min(size, firstChunk))
	for read := 0; ; {
		n, err := io.ReadFull(r, buf[read:])
		if read += n; err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, err
		}
		if uint64(read) == size {
			break
		}
		buf = append(buf, make([]byte, min(size, 2*uint64(read))-uint64(read))...)
	}
	return Frame{
		ID:    binary.BigEndian.Uint64(buf[0:8]),
		Type:  buf[8],
		Flags: buf[9],
		Body:  buf[HeaderSize:],
	}, nil
}
