package store

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/internal/wire"
)

// The first byte of a WAL record's payload, its version. Version 1, the
// format of earlier builds, is still read, for the first Open after an
// upgrade; it has no round and no tag.
const (
	walVersionNoRound = 1
	walVersion        = 2
)

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
	// round is the log file's round (see wal.round); 0 in a version 1
	// record.
	round uint64
	// seq numbers the records: one more than the previous record's, across
	// flushes and restarts.
	seq     uint64
	batches []walBatch
}

// appendRecord appends g's log record to dst, framed: the header (length
// and checksum of the payload), then g's payload:
//
//	version u8, round u64 (big-endian), then:
//	seq, count, then per batch:
//	    partition, epoch, lsn, writes count,
//	    per write: key, has value (bool), [value],
//	    request ID, [dedup record if the request ID is not empty]
//	then the tag (tagger) of everything before it
//
// numbers as uvarints, byte strings length-prefixed. The round has a fixed
// place, so that replay can compare it before decoding the rest.
func appendRecord(dst []byte, g walGroup, t *tagger) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, walHeader)...)
	dst = binary.BigEndian.AppendUint64(append(dst, walVersion), g.round)
	e := wire.NewEncoder(dst)
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
	rec := e.Out()
	rec = append(rec, t.tag(g.round, rec[start+walHeader:])...)
	sealFrame(rec[start:])
	return rec
}

// walTag is the length of a version 2 record's tag.
const walTag = 8

// tagger computes the tags of version 2 records: HMAC-SHA256 keyed with
// the record's round, cut to walTag bytes. The frame's CRC-32C is linear:
// a write cut inside its own record could leave the record's start
// followed by older bytes, which a client who knew the record's tail could
// have chosen so that the checksum still passes. The tag depends on the
// round, which no client sees. A tagger keeps the HMAC of the last round
// it used; one goroutine uses it at a time (the committer, or Open).
type tagger struct {
	round uint64
	mac   hash.Hash
	sum   []byte
}

// tag returns the tag of a record of round whose payload before the tag is
// p, valid until the next call.
func (t *tagger) tag(round uint64, p []byte) []byte {
	if t.mac == nil || t.round != round {
		t.round, t.mac = round, hmac.New(sha256.New, binary.BigEndian.AppendUint64(nil, round))
	} else {
		t.mac.Reset()
	}
	t.mac.Write(p)
	t.sum = t.mac.Sum(t.sum[:0])
	return t.sum[:walTag]
}

// recordRound splits a record's payload into its version, its round and
// the rest (without a version 2 record's tag). ok is false for a payload
// of neither version, or too short for version 2.
func recordRound(p []byte) (version byte, round uint64, rest []byte, ok bool) {
	switch {
	case len(p) > 0 && p[0] == walVersionNoRound:
		return p[0], 0, p[1:], true
	case len(p) >= 9+walTag && p[0] == walVersion:
		return p[0], binary.BigEndian.Uint64(p[1:]), p[9 : len(p)-walTag], true
	}
	return 0, 0, nil, false
}

// tagged reports whether a record's payload p, of version v and round
// (recordRound), passes its tag check. A version 1 record has no tag, and
// decodeGroup refuses a payload of neither version.
func (t *tagger) tagged(v byte, round uint64, p []byte) bool {
	if v != walVersion {
		return true
	}
	body := p[:len(p)-walTag]
	return hmac.Equal(t.tag(round, body), p[len(body):])
}

// decodeGroup is the inverse of appendRecord's payload, whose tag it does
// not check (see tagger.tagged). It returns an ErrCorrupt for anything
// appendRecord cannot have produced.
func decodeGroup(p []byte) (walGroup, error) {
	_, round, rest, ok := recordRound(p)
	if !ok {
		return walGroup{}, fmt.Errorf("%w: wal record of unknown version, or short", ErrCorrupt)
	}
	d := wire.NewDecoder(rest)
	g := walGroup{round: round, seq: d.Uvarint()}
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
