package store

import (
	"fmt"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/internal/wire"
)

// walVersion is the first byte of a WAL record's payload.
const walVersion = 1

// walBatch is one accepted data batch as the WAL records it: everything
// needed to apply it again without deciding anything.
type walBatch struct {
	partition int
	epoch     epoch.Epoch
	// lsn is the partition's position LSN after the batch (the position is
	// (epoch, lsn)).
	lsn    uint64
	writes []KV
	// requestID is empty when the batch stores no dedup record.
	requestID []byte
	// record is the dedup record, encodeResponse(stored at, response); nil
	// without a request ID.
	record []byte
}

// walGroup is one WAL record: the batches a group commit accepted, in
// order, under the group's sequence number.
type walGroup struct {
	// seq numbers the records: one more than the previous record's, across
	// flushes and restarts.
	seq     uint64
	batches []walBatch
}

// appendRecord appends g's log record to dst, framed: the header (length
// and checksum of the payload), then g's payload (encodeGroup).
func appendRecord(dst []byte, g walGroup) []byte {
	start := len(dst)
	e := wire.NewEncoder(append(dst, make([]byte, walHeader)...))
	encodeGroup(e, g)
	rec := e.Out()
	sealFrame(rec[start:])
	return rec
}

// encodeGroup appends g's record payload to e:
//
//	version u8, seq, count, then per batch:
//	    partition, epoch, lsn, writes count,
//	    per write: key, has value (bool), [value],
//	    request ID, [dedup record if the request ID is not empty]
//
// numbers as uvarints, byte strings length-prefixed.
func encodeGroup(e *wire.Encoder, g walGroup) {
	e.Uint8(walVersion)
	e.Uvarint(g.seq)
	e.Uvarint(uint64(len(g.batches)))
	for _, b := range g.batches {
		e.Uvarint(uint64(b.partition))
		e.Uvarint(uint64(b.epoch))
		e.Uvarint(b.lsn)
		EncodeWrites(e, b.writes)
		e.Bytes(b.requestID)
		if len(b.requestID) > 0 {
			e.Bytes(b.record)
		}
	}
}

// decodeGroup is the inverse of encodeGroup. It returns an ErrCorrupt for
// anything encodeGroup cannot have produced.
func decodeGroup(p []byte) (walGroup, error) {
	d := wire.NewDecoder(p)
	if v := d.Uint8(); d.Err() == nil && v != walVersion {
		return walGroup{}, fmt.Errorf("%w: wal record version %d", ErrCorrupt, v)
	}
	g := walGroup{seq: d.Uvarint()}
	n := d.Uvarint()
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		b := walBatch{
			partition: int(d.Uvarint()),
			epoch:     epoch.Epoch(d.Uvarint()),
			lsn:       d.Uvarint(),
		}
		b.writes = DecodeWrites(d)
		b.requestID = d.Bytes()
		if len(b.requestID) > 0 {
			b.record = d.Bytes()
		}
		g.batches = append(g.batches, b)
	}
	if err := d.Finish(); err != nil {
		return walGroup{}, fmt.Errorf("%w: wal record: %w", ErrCorrupt, err)
	}
	for _, b := range g.batches {
		if err := checkWALBatch(b); err != nil {
			return walGroup{}, err
		}
	}
	return g, nil
}

// checkWALBatch rejects a decoded batch that replay could not apply (bbolt
// would refuse it and fail the whole replay).
func checkWALBatch(b walBatch) error {
	if b.partition < 0 {
		return fmt.Errorf("%w: wal record: partition %d", ErrCorrupt, b.partition)
	}
	for _, w := range b.writes {
		if checkKey(w.Key) != nil || checkValue(len(w.Value)) != nil {
			return fmt.Errorf("%w: wal record: bad write in partition %d", ErrCorrupt, b.partition)
		}
	}
	if len(b.requestID) > 0 && (checkKey(b.requestID) != nil || len(b.record) < responseHeader || checkValue(len(b.record)) != nil) {
		return fmt.Errorf("%w: wal record: bad dedup record in partition %d", ErrCorrupt, b.partition)
	}
	return nil
}

// EncodeWrites appends ws in the encoding the WAL and the replication
// messages share: a count, then per write its key, whether it has a value
// (a deletion has none) and the value.
func EncodeWrites(e *wire.Encoder, ws []KV) {
	e.Uvarint(uint64(len(ws)))
	for _, w := range ws {
		e.Bytes(w.Key)
		e.Bool(w.Value != nil)
		if w.Value != nil {
			e.Bytes(w.Value)
		}
	}
}

// DecodeWrites reads writes encoded by EncodeWrites; an empty value
// decodes as an empty, non-nil slice (a value, not a deletion).
func DecodeWrites(d *wire.Decoder) []KV {
	var ws []KV
	n := d.Uvarint()
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		w := KV{Key: d.Bytes()}
		if d.Bool() {
			if w.Value = d.Bytes(); w.Value == nil {
				w.Value = []byte{}
			}
		}
		ws = append(ws, w)
	}
	return ws
}
