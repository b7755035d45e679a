package owner

import (
	"slices"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/store"
)

// Phase is where a Proposer stands.
type Phase int

// The phases of an acquire attempt, in order.
const (
	// Preparing: Prepare sent to the base claim's replicas, collecting promises.
	Preparing Phase = iota
	// Syncing: promises from a majority; the proposal's replicas are copying
	// the most advanced promiser's data.
	Syncing
	// Accepting: Accept sent to the base claim's replicas.
	Accepting
	// Announcing: the value is chosen; Choose sent to the base claim's
	// replicas. The attempt ends once a majority recorded it, so that any
	// later proposer starting from the base learns the new claim.
	Announcing
	// Done: the attempt ended; see Outcome.
	Done
)

// Outcome is how an acquire attempt ended.
type Outcome struct {
	// Chosen is set when the attempt's value was chosen: the new claim.
	Chosen *store.Claim
	// Newer is set when a replica knows a chosen claim newer than the base:
	// start again from it.
	Newer *store.Claim
	// Rejected is the highest promise that refused the ballot, when the
	// attempt lost a race: retry above it after a backoff.
	Rejected epoch.Epoch
	// Failed reports an attempt that could not complete (a sync failed, or
	// too few answers arrived); retry after a backoff.
	Failed bool
}

// Message is an outgoing protocol message of a Proposer. Exactly one of the
// pointer fields is set.
type Message struct {
	To      string
	Prepare *Prepare
	Accept  *Accept
	Sync    *Sync
	Choose  *Choose
}

// Proposer is one attempt of node Self to have a successor of Base chosen.
// It is a pure state machine: Start and the On methods return the messages
// to send, and Outcome reports the end. It is not safe for concurrent use.
type Proposer struct {
	self   string
	base   store.Claim
	p      int
	ballot epoch.Epoch
	// own is the value proposed when no replica reports an accepted one.
	own   store.Claim
	phase Phase

	// value is the proposal being pushed through phase 2.
	value    store.Claim
	promises map[string]store.Meta
	synced   map[string]bool
	accepts  map[string]bool
	chosen   map[string]bool
	rejected epoch.Epoch
	outcome  Outcome
}

// NewProposer starts an attempt by self to succeed base as owner of
// partition p, with ballot above every epoch in seen, proposing replicas as
// the new replica set (self first).
func NewProposer(p int, self string, base store.Claim, seen epoch.Epoch, replicas []string) *Proposer {
	ballot := max(seen, base.Epoch) + 1
	return &Proposer{
		self:   self,
		base:   base,
		p:      p,
		ballot: ballot,
		own: store.Claim{
			Epoch:    ballot,
			Base:     base.Epoch,
			Owner:    self,
			Replicas: slices.Clone(replicas),
		},
		promises: map[string]store.Meta{},
		synced:   map[string]bool{},
		accepts:  map[string]bool{},
		chosen:   map[string]bool{},
	}
}

// Ballot is the attempt's ballot: the epoch of the claim it would create.
func (a *Proposer) Ballot() epoch.Epoch { return a.ballot }

// Phase reports where the attempt stands.
func (a *Proposer) Phase() Phase { return a.phase }

// Outcome reports how the attempt ended; valid once Phase is Done.
func (a *Proposer) Outcome() Outcome { return a.outcome }

// Start returns the Prepare messages to the base claim's replicas.
func (a *Proposer) Start() []Message {
	out := make([]Message, 0, len(a.base.Replicas))
	for _, r := range a.base.Replicas {
		out = append(out, Message{To: r, Prepare: &Prepare{P: a.p, Ballot: a.ballot, Base: a.base.Epoch}})
	}
	return out
}

// OnPromise handles a replica's answer to Prepare.
func (a *Proposer) OnPromise(from string, r PromiseReply) []Message {
	if a.phase != Preparing || !slices.Contains(a.base.Replicas, from) {
		return nil
	}
	if a.newer(r.Meta) {
		return nil
	}
	if !r.OK {
		a.reject(r.Meta.Promised)
		return nil
	}
	a.promises[from] = r.Meta
	if len(a.promises) < majority(len(a.base.Replicas)) {
		return nil
	}
	return a.startSync()
}

// OnSynced handles a replica's report that Sync completed (ok) or failed.
func (a *Proposer) OnSynced(from string, ok bool) []Message {
	if a.phase != Syncing || !slices.Contains(a.value.Replicas, from) {
		return nil
	}
	if !ok {
		a.finish(Outcome{Failed: true})
		return nil
	}
	a.synced[from] = true
	if len(a.synced) < majority(len(a.value.Replicas)) {
		return nil
	}
	a.phase = Accepting
	out := make([]Message, 0, len(a.base.Replicas))
	for _, r := range a.base.Replicas {
		out = append(out, Message{To: r, Accept: &Accept{P: a.p, Value: a.value}})
	}
	return out
}

// OnAccepted handles a replica's answer to Accept. Once a majority
// accepted, the value is chosen and the attempt announces it.
func (a *Proposer) OnAccepted(from string, r AcceptReply) []Message {
	if a.phase != Accepting || !slices.Contains(a.base.Replicas, from) {
		return nil
	}
	if a.newer(r.Meta) {
		return nil
	}
	if !r.OK {
		a.reject(r.Meta.Promised)
		return nil
	}
	a.accepts[from] = true
	if len(a.accepts) < majority(len(a.base.Replicas)) {
		return nil
	}
	a.phase = Announcing
	out := make([]Message, 0, len(a.base.Replicas))
	for _, r := range a.base.Replicas {
		out = append(out, Message{To: r, Choose: &Choose{P: a.p, Claim: a.value}})
	}
	return out
}

// OnChosen handles a replica's report that it recorded the chosen claim
// (ok) or could not be reached. A chosen value stays chosen whatever the
// announce does; a failed announce only delays serving it, and the next
// attempt from the same base re-proposes the same value.
func (a *Proposer) OnChosen(from string, ok bool) {
	if a.phase != Announcing || !ok || !slices.Contains(a.base.Replicas, from) {
		return
	}
	a.chosen[from] = true
	if len(a.chosen) >= majority(len(a.base.Replicas)) {
		c := a.value
		a.finish(Outcome{Chosen: &c})
	}
}

// startSync picks the value (the highest-ballot accepted successor of the
// base among the promises, else our own) and asks a majority of its replica
// set to copy the most advanced promiser's data. Paxos requires the first:
// a value that may already be chosen must be proposed again, never replaced.
func (a *Proposer) startSync() []Message {
	a.value = a.own
	var best store.Claim
	var source string
	var pos store.Position
	for _, from := range sortedKeys(a.promises) {
		m := a.promises[from]
		if acc := m.Accepted; acc.Owner != "" && acc.Base == a.base.Epoch && acc.Epoch > best.Epoch {
			best = acc
		}
		if source == "" || pos.Less(m.Position) {
			source, pos = from, m.Position
		}
	}
	if best.Owner != "" {
		a.value = store.Claim{Epoch: a.ballot, Base: a.base.Epoch, Owner: best.Owner, Replicas: slices.Clone(best.Replicas)}
	}
	a.phase = Syncing
	out := make([]Message, 0, len(a.value.Replicas))
	for _, r := range a.value.Replicas {
		out = append(out, Message{To: r, Sync: &Sync{P: a.p, Ballot: a.ballot, Source: source, Pos: pos}})
	}
	return out
}

// newer ends the attempt if m shows a chosen claim newer than the base.
func (a *Proposer) newer(m store.Meta) bool {
	if !m.HasChosen || m.Chosen.Epoch <= a.base.Epoch {
		return false
	}
	c := m.Chosen
	a.finish(Outcome{Newer: &c})
	return true
}

// reject ends the attempt once a refusal makes a majority impossible; a
// single refusal is enough to know a higher ballot is in play.
func (a *Proposer) reject(promised epoch.Epoch) {
	a.rejected = max(a.rejected, promised)
	a.finish(Outcome{Rejected: a.rejected})
}

func (a *Proposer) finish(o Outcome) {
	if a.phase == Done {
		return
	}
	a.phase = Done
	a.outcome = o
}

// majority is the smallest count that is more than half of n.
func majority(n int) int { return n/2 + 1 }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
