package wire

import "errors"

var (
	// ErrFrameTooLarge is returned by ReadFrame when a frame's length prefix
	// exceeds the reader's maximum, and by WriteFrame when a frame cannot be
	// described by a 4-byte length.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrShortFrame is returned by ReadFrame when a frame's length prefix is
	// smaller than the frame header.
	ErrShortFrame = errors.New("wire: frame shorter than its header")
	// ErrMalformed is returned (wrapped) by Decoder.Err and Decoder.Finish
	// when a body is truncated, a varint overflows, a length runs past the
	// remaining bytes, a bool is neither 0 nor 1, or bytes are left over.
	ErrMalformed = errors.New("wire: malformed body")
)
