package router

import (
	"fmt"
	"time"

	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/singlewriter/singlewriter/owner"
	"github.com/singlewriter/singlewriter/store"
)

// Message types on the RPC connections between nodes.
const (
	msgCall uint8 = iota + 1
	msgPrepare
	msgAccept
	msgSync
	msgChoose
	msgFetch
	msgHandoff
	msgReplicate
	msgPreCopy
)

// status is the outcome of a call at the node that received it.
type status uint8

const (
	statusOK status = iota
	// statusNotOwner: the node does not serve the partition; Claim names
	// the newest claim it knows.
	statusNotOwner
	statusUnknownMethod
	statusHandlerError
	// statusStale: the call ran but a replica refused its commit for a newer
	// epoch (with one replica: nothing written; with more, another may
	// hold it, and the caller retries with the same request ID).
	statusStale
	// statusUnavailable: the node cannot serve now (closing, store failed).
	statusUnavailable
	// statusTooLarge: the handler's response and written value exceed
	// Config.MaxPayload; nothing was written.
	statusTooLarge
	// statusInvalid: the owner's store refuses the call's write as
	// invalid (store.Batch.Validate); nothing was written.
	statusInvalid
	// statusOverloaded: the node held Config.MaxPendingCalls calls; the
	// call did not run.
	statusOverloaded
	// statusReusedID: the call's request ID named an earlier call on the
	// same key with another method or payload, known durable; the call
	// did not run.
	statusReusedID
)

type callRequest struct {
	ID      []byte
	Key     []byte
	Method  string
	Payload []byte
	// Budget is the time the caller had left when the request was sent
	// (zero: its context has no deadline). The owner runs the call under
	// that much: a relative time, so that the nodes' clocks need not agree.
	Budget time.Duration
}

func (r callRequest) encode() []byte {
	var e wire.Encoder
	e.Bytes(r.ID)
	e.Bytes(r.Key)
	e.String(r.Method)
	e.Bytes(r.Payload)
	e.Uvarint(uint64(r.Budget))
	return e.Out()
}

func decodeCallRequest(b []byte) (callRequest, error) {
	d := wire.NewDecoder(b)
	r := callRequest{ID: d.Bytes(), Key: d.Bytes(), Method: d.String(), Payload: d.Bytes(), Budget: time.Duration(d.Uvarint())}
	if err := d.Finish(); err != nil {
		return r, fmt.Errorf("router: decode call: %w", err)
	}
	if r.Budget < 0 {
		return r, fmt.Errorf("router: decode call: %w: budget of %d ns", wire.ErrMalformed, uint64(r.Budget))
	}
	return r, nil
}

type callResponse struct {
	Status status
	// Body is the handler's response, or an error's text.
	Body  []byte
	Claim store.Claim
}

func (r callResponse) encode() []byte {
	var e wire.Encoder
	e.Uint8(uint8(r.Status))
	e.Bytes(r.Body)
	owner.EncodeClaim(&e, r.Claim)
	return e.Out()
}

func decodeCallResponse(b []byte) (callResponse, error) {
	d := wire.NewDecoder(b)
	r := callResponse{Status: status(d.Uint8()), Body: d.Bytes(), Claim: owner.DecodeClaim(d)}
	if err := d.Finish(); err != nil {
		return r, fmt.Errorf("router: decode call response: %w", err)
	}
	return r, nil
}
