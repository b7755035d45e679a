package wire

import (
	"encoding"
	"encoding/binary"
	"fmt"
)

// Decoder reads values written by an Encoder. Its error is sticky: the first
// truncation, overflow or bad value records ErrMalformed, and from then on
// every read returns the zero value, so a caller decodes a whole message and
// checks Finish once.
type Decoder struct {
	// buf holds the bytes not yet read.
	buf []byte
	// err is the first failure; Invariant: once set, buf is nil.
	err error
}

// NewDecoder returns a Decoder reading b. It does not copy b; values returned
// by Bytes are copies, so b may be reused once decoding is done.
func NewDecoder(b []byte) *Decoder {
	return &Decoder{buf: b}
}

// fail records the first error and stops further reads.
func (d *Decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
	d.buf = nil
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	switch {
	case n == 0:
		d.fail("truncated varint")
		return 0
	case n < 0:
		d.fail("varint overflows 64 bits")
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// take reads a uvarint length and returns that many bytes, without copying.
// A length beyond the remaining bytes fails before anything is allocated.
func (d *Decoder) take(what string) []byte {
	n := d.Uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)) {
		d.fail("%s of length %d exceeds the %d remaining bytes", what, n, len(d.buf))
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

// Bytes reads a length-prefixed byte string and returns a copy of it; an
// empty one is returned as nil.
func (d *Decoder) Bytes() []byte {
	b := d.take("bytes")
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// String reads a length-prefixed string.
func (d *Decoder) String() string {
	return string(d.take("string"))
}

// Strings reads a uvarint count and that many strings; none is nil.
func (d *Decoder) Strings() []string {
	var ss []string
	n := d.Uvarint()
	for i := uint64(0); i < n && d.err == nil; i++ {
		ss = append(ss, d.String())
	}
	return ss
}

// Bool reads one byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.buf) > 0 && d.buf[0] > 1 {
		d.fail("bool byte %d", d.buf[0])
		return false
	}
	return d.Uint8() == 1
}

// Uint8 reads one byte.
func (d *Decoder) Uint8() uint8 {
	if d.err != nil {
		return 0
	}
	if len(d.buf) == 0 {
		d.fail("truncated byte")
		return 0
	}
	v := d.buf[0]
	d.buf = d.buf[1:]
	return v
}

// Err returns the first decoding error, wrapping ErrMalformed, or nil.
func (d *Decoder) Err() error {
	return d.err
}

// Finish returns Err, or an error wrapping ErrMalformed if bytes remain
// unread: a message must be consumed exactly.
func (d *Decoder) Finish() error {
	if d.err == nil && len(d.buf) > 0 {
		d.fail("%d bytes left over", len(d.buf))
	}
	return d.err
}

// Binary reads a length-prefixed byte string written by Encoder.Binary and
// decodes it into v; a decoding error becomes the Decoder's error.
func (d *Decoder) Binary(v encoding.BinaryUnmarshaler) {
	b := d.take("binary value")
	if d.err != nil {
		return
	}
	if err := v.UnmarshalBinary(b); err != nil {
		d.fail("%T: %v", v, err)
	}
}
