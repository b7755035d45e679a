package owner

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/singlewriter/singlewriter/store"
)

// The wire encodings of the protocol messages, for transports. Each Decode
// function rejects truncated or trailing bytes with wire.ErrMalformed.

// Encode returns m's wire encoding.
func (m Prepare) Encode() []byte {
	var e wire.Encoder
	e.Uvarint(uint64(m.P))
	e.Uvarint(uint64(m.Ballot))
	EncodeClaim(&e, m.Base)
	return e.Out()
}

// DecodePrepare decodes a Prepare.
func DecodePrepare(b []byte) (Prepare, error) {
	d := wire.NewDecoder(b)
	m := Prepare{P: DecodePartition(d), Ballot: epoch.Epoch(d.Uvarint()), Base: DecodeClaim(d)}
	return m, finish(d, "prepare")
}

// Encode returns m's wire encoding.
func (m PromiseReply) Encode() []byte {
	var e wire.Encoder
	e.Bool(m.OK)
	encodeMeta(&e, m.Meta)
	return e.Out()
}

// DecodePromiseReply decodes a PromiseReply.
func DecodePromiseReply(b []byte) (PromiseReply, error) {
	d := wire.NewDecoder(b)
	m := PromiseReply{OK: d.Bool(), Meta: decodeMeta(d)}
	return m, finish(d, "promise")
}

// Encode returns m's wire encoding.
func (m Accept) Encode() []byte {
	var e wire.Encoder
	e.Uvarint(uint64(m.P))
	EncodeClaim(&e, m.Base)
	EncodeClaim(&e, m.Value)
	return e.Out()
}

// DecodeAccept decodes an Accept.
func DecodeAccept(b []byte) (Accept, error) {
	d := wire.NewDecoder(b)
	m := Accept{P: DecodePartition(d), Base: DecodeClaim(d), Value: DecodeClaim(d)}
	return m, finish(d, "accept")
}

// Encode returns m's wire encoding.
func (m AcceptReply) Encode() []byte {
	var e wire.Encoder
	e.Bool(m.OK)
	encodeMeta(&e, m.Meta)
	return e.Out()
}

// DecodeAcceptReply decodes an AcceptReply.
func DecodeAcceptReply(b []byte) (AcceptReply, error) {
	d := wire.NewDecoder(b)
	m := AcceptReply{OK: d.Bool(), Meta: decodeMeta(d)}
	return m, finish(d, "accepted")
}

// Encode returns m's wire encoding.
func (m Sync) Encode() []byte {
	var e wire.Encoder
	e.Uvarint(uint64(m.P))
	e.Uvarint(uint64(m.Ballot))
	EncodeClaim(&e, m.Base)
	e.String(m.Source)
	EncodePosition(&e, m.Pos)
	e.Uvarint(uint64(max(m.Wait, 0)))
	return e.Out()
}

// DecodeSync decodes a Sync.
func DecodeSync(b []byte) (Sync, error) {
	d := wire.NewDecoder(b)
	m := Sync{P: DecodePartition(d), Ballot: epoch.Epoch(d.Uvarint()), Base: DecodeClaim(d), Source: d.String(), Pos: DecodePosition(d),
		Wait: time.Duration(min(d.Uvarint(), math.MaxInt64))}
	return m, finish(d, "sync")
}

// Encode returns m's wire encoding.
func (m PreCopy) Encode() []byte {
	var e wire.Encoder
	e.Uvarint(uint64(m.P))
	e.String(m.Source)
	e.Uvarint(uint64(max(m.Wait, 0)))
	return e.Out()
}

// DecodePreCopy decodes a PreCopy.
func DecodePreCopy(b []byte) (PreCopy, error) {
	d := wire.NewDecoder(b)
	m := PreCopy{P: DecodePartition(d), Source: d.String(), Wait: time.Duration(min(d.Uvarint(), math.MaxInt64))}
	return m, finish(d, "pre-copy")
}

// Encode returns m's wire encoding.
func (m FetchRequest) Encode() []byte {
	var e wire.Encoder
	e.Uvarint(uint64(m.P))
	e.Bool(m.Live)
	e.Uvarint(uint64(m.Ballot))
	EncodePosition(&e, m.Pos)
	e.Uvarint(m.Tracker)
	e.Bytes(m.After)
	return e.Out()
}

// DecodeFetchRequest decodes a FetchRequest.
func DecodeFetchRequest(b []byte) (FetchRequest, error) {
	d := wire.NewDecoder(b)
	m := FetchRequest{P: DecodePartition(d), Live: d.Bool(), Ballot: epoch.Epoch(d.Uvarint()), Pos: DecodePosition(d), Tracker: d.Uvarint(), After: d.Bytes()}
	return m, finish(d, "fetch")
}

// Encode returns m's wire encoding.
func (m Page) Encode() []byte {
	var e wire.Encoder
	e.Bytes(m.Next)
	e.Uvarint(m.Tracker)
	e.Uvarint(uint64(len(m.Entries)))
	for _, en := range m.Entries {
		e.Uint8(uint8(en.Kind))
		e.Bytes(en.Key)
		e.Bytes(en.Value)
	}
	return e.Out()
}

// DecodePage decodes a Page.
func DecodePage(b []byte) (Page, error) {
	d := wire.NewDecoder(b)
	m := Page{Next: d.Bytes(), Tracker: d.Uvarint()}
	n := d.Uvarint()
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		m.Entries = append(m.Entries, store.Entry{Kind: store.EntryKind(d.Uint8()), Key: d.Bytes(), Value: d.Bytes()})
	}
	return m, finish(d, "page")
}

// Encode returns m's wire encoding.
func (m SyncReply) Encode() []byte {
	var e wire.Encoder
	e.Bool(m.Done)
	return e.Out()
}

// DecodeSyncReply decodes a SyncReply.
func DecodeSyncReply(b []byte) (SyncReply, error) {
	d := wire.NewDecoder(b)
	m := SyncReply{Done: d.Bool()}
	return m, finish(d, "synced")
}

// Encode returns m's wire encoding.
func (m Choose) Encode() []byte {
	var e wire.Encoder
	e.Uvarint(uint64(m.P))
	EncodeClaim(&e, m.Claim)
	e.Bool(m.Final)
	return e.Out()
}

// DecodeChoose decodes a Choose.
func DecodeChoose(b []byte) (Choose, error) {
	d := wire.NewDecoder(b)
	m := Choose{P: DecodePartition(d), Claim: DecodeClaim(d), Final: d.Bool()}
	return m, finish(d, "choose")
}

// Encode returns m's wire encoding.
func (m ChooseReply) Encode() []byte {
	var e wire.Encoder
	e.Bool(m.Recorded)
	encodeMeta(&e, m.Meta)
	return e.Out()
}

// DecodeChooseReply decodes a ChooseReply.
func DecodeChooseReply(b []byte) (ChooseReply, error) {
	d := wire.NewDecoder(b)
	m := ChooseReply{Recorded: d.Bool(), Meta: decodeMeta(d)}
	return m, finish(d, "chosen")
}

// Encode returns m's wire encoding.
func (m Replicate) Encode() []byte {
	var e wire.Encoder
	e.Uvarint(uint64(len(m.Batches)))
	for _, b := range m.Batches {
		e.Uvarint(uint64(b.Partition))
		e.Uvarint(uint64(b.Epoch))
		e.Bool(b.Prev != nil)
		if b.Prev != nil {
			EncodePosition(&e, *b.Prev)
		}
		store.EncodeWrites(&e, b.Writes)
		e.Bytes(b.RequestID)
		e.Bytes(b.Response)
	}
	return e.Out()
}

// DecodeReplicate decodes a Replicate.
func DecodeReplicate(b []byte) (Replicate, error) {
	d := wire.NewDecoder(b)
	var m Replicate
	for i, n := uint64(0), d.Uvarint(); i < n && d.Err() == nil; i++ {
		batch := store.Batch{Partition: DecodePartition(d), Epoch: epoch.Epoch(d.Uvarint())}
		if d.Bool() {
			prev := DecodePosition(d)
			batch.Prev = &prev
		}
		batch.Writes = store.DecodeWrites(d)
		batch.RequestID, batch.Response = d.Bytes(), d.Bytes()
		m.Batches = append(m.Batches, batch)
	}
	return m, finish(d, "replicate")
}

// EncodeOutcomes returns the wire encoding of a replica's outcomes of a
// Replicate (HandleReplicate's errors): per batch, applied, refused as
// stale (epoch.ErrStale) or refused otherwise, with the refusal's text.
func EncodeOutcomes(errs []error) []byte {
	var e wire.Encoder
	e.Uvarint(uint64(len(errs)))
	for _, err := range errs {
		switch {
		case err == nil:
			e.Uvarint(outcomeApplied)
			continue
		case errors.Is(err, epoch.ErrStale):
			e.Uvarint(outcomeStale)
		default:
			e.Uvarint(outcomeRefused)
		}
		e.String(err.Error())
	}
	return e.Out()
}

// The outcomes of one replicated batch on the wire.
const (
	outcomeApplied = iota
	outcomeStale
	outcomeRefused
)

// DecodeOutcomes decodes EncodeOutcomes' encoding of replica's answer: a
// stale refusal matches epoch.ErrStale again.
func DecodeOutcomes(b []byte, replica string) ([]error, error) {
	d := wire.NewDecoder(b)
	var errs []error
	for i, n := uint64(0), d.Uvarint(); i < n && d.Err() == nil; i++ {
		var err error
		switch kind := d.Uvarint(); kind {
		case outcomeApplied:
		case outcomeStale:
			err = fmt.Errorf("%w (replica %s: %s)", epoch.ErrStale, replica, d.String())
		case outcomeRefused:
			err = fmt.Errorf("owner: replica %s: %s", replica, d.String())
		default:
			return nil, fmt.Errorf("%w: replicated batch outcome %d", wire.ErrMalformed, kind)
		}
		errs = append(errs, err)
	}
	return errs, finish(d, "outcomes")
}

// Encode returns m's wire encoding.
func (m Handoff) Encode() []byte {
	var e wire.Encoder
	e.Uvarint(uint64(m.P))
	e.Strings(m.Replicas)
	return e.Out()
}

// DecodeHandoff decodes a Handoff.
func DecodeHandoff(b []byte) (Handoff, error) {
	d := wire.NewDecoder(b)
	m := Handoff{P: DecodePartition(d), Replicas: d.Strings()}
	return m, finish(d, "handoff")
}

func encodeMeta(e *wire.Encoder, m store.Meta) { e.Binary(m) }

func decodeMeta(d *wire.Decoder) store.Meta {
	var m store.Meta
	d.Binary(&m)
	return m
}

// EncodePosition appends p in the wire encoding.
func EncodePosition(e *wire.Encoder, p store.Position) {
	e.Uvarint(uint64(p.Epoch))
	e.Uvarint(p.LSN)
}

// DecodePosition reads a position written by EncodePosition.
func DecodePosition(d *wire.Decoder) store.Position {
	return store.Position{Epoch: epoch.Epoch(d.Uvarint()), LSN: d.Uvarint()}
}

// DecodePartition reads a partition number written as a uvarint; values
// beyond int range become -1, which every handler rejects as out of range.
func DecodePartition(d *wire.Decoder) int {
	v := d.Uvarint()
	if v > 1<<31 {
		return -1
	}
	return int(v)
}

func finish(d *wire.Decoder, what string) error {
	if err := d.Finish(); err != nil {
		return fmt.Errorf("owner: decode %s: %w", what, err)
	}
	return nil
}
