package wire

import (
	"encoding"
	"encoding/binary"
	"fmt"
)

// Encoder appends values to a body. The zero value is ready to use; the
// matching Decoder reads the values back in the same order.
type Encoder struct {
	buf []byte
}

// NewEncoder returns an Encoder that appends to buf. A caller that encodes
// often can pass its last body truncated to zero length (out[:0]) and so
// reuse its memory.
func NewEncoder(buf []byte) *Encoder {
	return &Encoder{buf: buf}
}

// Uvarint appends v as an unsigned varint.
func (e *Encoder) Uvarint(v uint64) {
	e.buf = binary.AppendUvarint(e.buf, v)
}

// Bytes appends b as a uvarint length followed by the data.
func (e *Encoder) Bytes(b []byte) {
	e.Uvarint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

// String appends s as a uvarint length followed by its bytes.
func (e *Encoder) String(s string) {
	e.Uvarint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

// Strings appends ss as a uvarint count followed by each string.
func (e *Encoder) Strings(ss []string) {
	e.Uvarint(uint64(len(ss)))
	for _, s := range ss {
		e.String(s)
	}
}

// Bool appends b as one byte, 1 for true and 0 for false.
func (e *Encoder) Bool(b bool) {
	var v uint8
	if b {
		v = 1
	}
	e.Uint8(v)
}

// Uint8 appends v as one byte.
func (e *Encoder) Uint8(v uint8) {
	e.buf = append(e.buf, v)
}

// Out returns the encoded body. The Encoder keeps appending to the same
// backing array, so the result must not be modified while the Encoder is
// still in use.
func (e *Encoder) Out() []byte {
	return e.buf
}

// Binary appends v's binary encoding as a length-prefixed byte string. It
// is for types whose MarshalBinary cannot fail; an error is a bug and
// panics.
func (e *Encoder) Binary(v encoding.BinaryMarshaler) {
	b, err := v.MarshalBinary()
	if err != nil {
		panic(fmt.Sprintf("wire: MarshalBinary of %T: %v", v, err))
	}
	e.Bytes(b)
}
