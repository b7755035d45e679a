// Package wire is the binary codec spoken between nodes: length-prefixed
// frames on a stream, and hand-written helpers to encode message bodies.
//
// A frame on the stream is a 4-byte big-endian length of the rest, then an
// 8-byte big-endian request id, a 1-byte message type, a 1-byte flags field
// (FlagResponse, FlagError, FlagCancel) and the body:
//
//	var e wire.Encoder
//	e.String("orders/42")
//	e.Uvarint(7)
//	_ = wire.WriteFrame(bw, wire.Frame{ID: 1, Type: 3, Body: e.Out()})
//	_ = bw.Flush()
//
//	f, err := wire.ReadFrame(br, 1<<20)
//	d := wire.NewDecoder(f.Body)
//	key, n := d.String(), d.Uvarint()
//	if err := d.Finish(); err != nil {
//		// malformed body: drop the peer
//	}
//
// Nothing here trusts its input: a length is checked against what is allowed
// and what remains before anything of that size is allocated.
package wire
