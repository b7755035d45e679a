package owner

import (
	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// Prepare is Paxos phase 1: the sender asks a replica of Base to promise
// Ballot for partition P.
type Prepare struct {
	P      int
	Ballot epoch.Epoch
	// Base is the epoch of the claim whose successor is being chosen.
	Base epoch.Epoch
}

// PromiseReply answers a Prepare. OK reports whether the promise was made;
// Meta is the replica's protocol state after handling the Prepare (its
// promise, the newest claim it knows to be chosen, the successor proposal it
// accepted and the position of its data).
type PromiseReply struct {
	OK   bool
	Meta store.Meta
}

// Accept is Paxos phase 2: the sender asks a replica of the base claim to
// accept Value, whose Epoch is the ballot and whose Base is the base claim's
// epoch.
type Accept struct {
	P     int
	Value store.Claim
}

// AcceptReply answers an Accept.
type AcceptReply struct {
	OK   bool
	Meta store.Meta
}

// Sync asks a member of a proposal's replica set to bring partition P's data
// up to Pos by copying it from Source, writing under Ballot.
type Sync struct {
	P      int
	Ballot epoch.Epoch
	Source string
	Pos    store.Position
}

// Choose tells a replica that Claim was chosen as partition P's newest
// claim.
type Choose struct {
	P     int
	Claim store.Claim
}
