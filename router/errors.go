package router

import (
	"errors"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/owner"
)

// The errors a Call returns, matched with errors.Is.
var (
	// ErrUnavailable is returned by Call when no node served the key's
	// partition before ctx ended (its owner is down, or ownership is
	// moving), or within half of Config.DedupRetention. The call may have
	// run. The error also wraps ctx's error, if it ended; its message names the
	// last refusal, which it does not wrap (a replica's stale-epoch
	// refusal does not mean that nothing was written, see ErrStaleEpoch).
	ErrUnavailable = errors.New("router: partition unavailable")
	// ErrUnknownMethod is returned by Call when the owner has no handler
	// for the method. Nothing ran.
	ErrUnknownMethod = errors.New("router: unknown method")
	// ErrPayloadTooLarge is returned by Call, before anything is sent, when
	// the payload exceeds Config.MaxPayload, or when the key, the method
	// and the payload together exceed a message between nodes.
	ErrPayloadTooLarge = errors.New("router: payload too large")
	// ErrResultTooLarge is returned by Call when the handler's response and
	// the value it wrote total more than Config.MaxPayload: the call ran
	// and wrote nothing. Without the bound, a result too large for a
	// message between nodes could be committed on the owner and then never
	// reach its replicas or its caller.
	ErrResultTooLarge = errors.New("router: handler result too large")
	// ErrOverloaded is returned by Call, without a retry, when the owner
	// already held Config.MaxPendingCalls calls: this attempt did not run,
	// and the caller decides whether and when to try again. Like
	// ErrUnavailable it does not prove that nothing was written: an
	// earlier attempt of the same Call (cut off with its connection, or
	// refused by a replica) may have committed, or may still; a retry with
	// the same request ID returns its response once the owner admits it.
	ErrOverloaded = errors.New("router: owner overloaded")
	// ErrRequestIDReused is returned by Call, without a retry, when its
	// request ID (see RequestID) named an earlier call on the same key
	// with another method or payload, which committed and whose record is
	// still kept (see Config.DedupRetention): this call did not run.
	ErrRequestIDReused = errors.New("router: request ID reused for another call")
	// ErrRequestIDTooLarge is returned by Call, before anything is sent,
	// for a request ID (see RequestID) longer than MaxRequestIDSize.
	ErrRequestIDTooLarge = errors.New("router: request ID too large")
	// ErrCallCycle is returned by Call, before anything is sent, when its
	// ctx is, or derives from, the ctx of a handler still running for the
	// same key on this node, or of a handler nested in one (run by a Call
	// on this node from such a handler, with its ctx): the call would wait
	// behind the handler that waits for it. A goroutine that a handler
	// starts, to call the handler's own key without waiting for it, must
	// therefore not use a ctx derived from the handler's while the handler
	// runs. A cycle through another node is not detected (ctx values do
	// not travel): its calls wait until their deadline.
	ErrCallCycle = errors.New("router: a handler called a key whose handler waits for it")
	// ErrEmptyKey is returned by Call for an empty key.
	ErrEmptyKey = errors.New("router: empty key")
	// ErrKeyTooLarge is returned by Call, before anything is sent, for a
	// key longer than store.MaxKeySize.
	ErrKeyTooLarge = errors.New("router: key too large")
	// ErrClosed is returned after Close or Leave, or once the node stopped
	// because its store failed (the error then also matches
	// store.ErrFailed), by the methods that return an error (Start, Leave,
	// Call, Audit), and by Call before Start. The accessors (Members,
	// Owner, Serving, GossipAddr) return what the node last knew.
	ErrClosed = errors.New("router: node closed")
	// ErrHandler is wrapped by Call's error when the handler returned an
	// error: the call ran and wrote nothing. The message is the handler's,
	// cut after its first 4 KiB.
	ErrHandler = errors.New("router: handler failed")
	// ErrNotOwner is the refusal of a node that does not serve the key.
	// Call retries such refusals itself until ctx ends, and then returns
	// ErrUnavailable, so Call's errors never match it.
	ErrNotOwner = owner.ErrNotOwner
	// ErrStaleEpoch is matched, with replication factor 1, when a write was
	// fenced: the partition moved to a newer epoch while the call ran, and
	// nothing was written. Call returns it without retrying, because the
	// handler already ran once. With replicas, a refusal by one replica does
	// not prove that no other one applied the write, so Call retries it like
	// an unavailable owner, with the same request ID: the new owner answers
	// with the stored response if the write survived, or runs the call.
	ErrStaleEpoch = epoch.ErrStale
)
