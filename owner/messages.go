package owner

import (
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// Prepare is Paxos phase 1: the sender asks a replica of Base to promise
// Ballot for partition P. Base is a final claim: the replica records it as
// chosen before answering, so a replica never forgets, by accepting for a
// newer base, that an older base already has a successor.
type Prepare struct {
	// P is the partition.
	P int
	// Ballot is the epoch the sender proposes; a replica promises it only
	// if it is above its promise.
	Ballot epoch.Epoch
	// Base is the final claim the sender wants to succeed.
	Base store.Claim
}

// PromiseReply answers a Prepare. OK reports whether the promise was made;
// Meta is the replica's protocol state after handling the Prepare (its
// promise, the newest claim it knows to be chosen, the successor proposal it
// accepted and the position of its data).
type PromiseReply struct {
	// OK reports whether the replica promised the ballot.
	OK bool
	// Meta is the replica's state after the Prepare.
	Meta store.Meta
}

// Accept is Paxos phase 2: the sender asks a replica of Base to accept
// Value, whose Epoch is the ballot.
type Accept struct {
	// P is the partition.
	P int
	// Base is the final claim that Value succeeds.
	Base store.Claim
	// Value is the proposed successor; Value.Epoch is the ballot.
	Value store.Claim
}

// AcceptReply answers an Accept.
type AcceptReply struct {
	// OK reports whether the replica accepted the value.
	OK bool
	// Meta is the replica's state after the Accept.
	Meta store.Meta
}

// Sync asks a member of a proposal's replica set to bring partition P's data
// up to Pos by copying it from Source, writing under Ballot. Base is the
// epoch of the proposal's base claim: a replica that knows a newer chosen
// claim, or holds data written after Base, refuses, so that a proposer
// working from an old base never rolls back a newer owner's data.
type Sync struct {
	// P is the partition.
	P int
	// Ballot is the proposal's ballot; the copy is installed under it.
	Ballot epoch.Epoch
	// Base is the proposal's base claim, which is final. The target records
	// it before anything else, as a Prepare or an Accept would: a replica
	// that lost its data directory is readmitted by a sync (the copy raises
	// its promise), and without the base it would not know that a successor
	// of any older claim was chosen, nor refuse the proposers working from
	// one.
	Base store.Claim
	// Source is the node to copy from: the promiser with the highest
	// position.
	Source string
	// Pos is the position of Source's data that the copy must have.
	Pos store.Position
	// Wait is how long the target may hold its answer while the copy is
	// being fetched; then it answers that the copy is not done yet, and the
	// proposer asks again (with the same Sync, which finds the copy in
	// progress). So a copy takes as long as its pages take, each bounded by
	// the target's RequestTimeout, and a target that stops answering is
	// noticed within one request's timeout. Zero: until the copy ends.
	Wait time.Duration
}

// PreCopy asks a node that the proposer will make a replica of partition
// P, and that holds no copy of it, to copy it from Source, the owner of
// the claim being replaced, while Source still serves it. The proposer
// waits for the pre-copy before its Prepare drains Source; the node's Sync
// then fetches only the entries that changed since (see FetchRequest), so
// the partition is unserved for the time it takes to send those rather
// than the whole partition. A pre-copy is only a head start: if it failed,
// or Source can no longer tell what changed, the Sync copies the whole
// partition as it would have.
type PreCopy struct {
	// P is the partition.
	P int
	// Source is the node to copy from.
	Source string
	// Wait is as Sync's: how long the node may hold its answer while the
	// copy is being fetched (zero: until it ends).
	Wait time.Duration
}

// FetchRequest asks a node for one page of a partition's data.
type FetchRequest struct {
	// P is the partition.
	P int
	// Live asks for the data as it is now, while it may still be written
	// (a pre-copy): Ballot and Pos are not checked. A first page (After
	// nil) with Tracker zero starts a tracker of what changes from then
	// on, returned in the Page.
	Live bool
	// Ballot and Pos, unless Live, are the proposal's ballot and the
	// position it expects the data at: the node refuses once it promised
	// a higher ballot, or when its data is elsewhere.
	Ballot epoch.Epoch
	Pos    store.Position
	// Tracker names the node's tracker started by a pre-copy: live, the
	// pre-copy's next page; otherwise, the entries that changed since it
	// started, as they are at Pos (store.ExportChanges). Zero, not live:
	// the whole partition.
	Tracker uint64
	// After is the cursor of the page before (nil: the first page).
	After []byte
}

// Page answers a FetchRequest.
type Page struct {
	// Entries are the page's entries.
	Entries []store.Entry
	// Next is the cursor of the next page, nil after the last one.
	Next []byte
	// Tracker is the tracker a live first page started.
	Tracker uint64
}

// SyncReply answers a Sync.
type SyncReply struct {
	// Done reports that the target holds the copy at the Sync's position;
	// false means the copy is still being fetched: ask again.
	Done bool
}

// Handoff asks a node to acquire partition P now, because its owner is
// leaving, with replica set Replicas (the node first): the set the ring
// will have once the leaving node is gone. Without it, the node would not
// head the ring's replica set yet and would propose itself alone.
type Handoff struct {
	// P is the partition.
	P int
	// Replicas is the replica set to propose.
	Replicas []string
}

// Choose tells a replica that Claim was chosen for partition P. With Final
// unset it only asks the replica to record it (a base replica, while the
// claim is being made final); with Final set the claim is final and the
// receiver may act on it.
type Choose struct {
	// P is the partition.
	P int
	// Claim is the chosen claim.
	Claim store.Claim
	// Final reports that Claim is known to be final.
	Final bool
}

// ChooseReply answers a Choose. Recorded reports whether this replica's
// record counts toward making the claim final (store.Meta.RecordCounts).
// Meta is the replica's state after the Choose.
type ChooseReply struct {
	// Recorded reports whether the record counts toward making the claim
	// final.
	Recorded bool
	// Meta is the replica's state after the Choose.
	Meta store.Meta
}
