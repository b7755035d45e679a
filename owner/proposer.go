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
	// Syncing: promises from a majority; the proposal's owner and a majority
	// of its replicas are copying the most advanced promiser's data.
	Syncing
	// Accepting: Accept sent to the base claim's replicas.
	Accepting
	// Announcing: the value is chosen; Choose sent to the base claim's
	// replicas. The claim becomes final, and anyone may act on it, once a
	// majority of them recorded it: a later proposer starting from the base
	// asks a majority of them, so it learns the claim instead of choosing
	// another successor of the same base.
	Announcing
	// Done: the attempt ended; see Outcome.
	Done
)

// Outcome is how an attempt ended.
type Outcome struct {
	// Chosen is set when the attempt's value was chosen and made final.
	Chosen *store.Claim
	// Newer is set when a replica knows a chosen claim newer than the base;
	// NewerFinal says whether that claim is known to be final (otherwise it
	// must be made final, see NewAnnouncer, before anyone acts on it).
	Newer      *store.Claim
	NewerFinal bool
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
	// To is the receiving node's name.
	To string
	// Prepare is set for phase 1.
	Prepare *Prepare
	// Accept is set for phase 2.
	Accept *Accept
	// Sync is set for a data copy.
	Sync *Sync
	// Choose is set to record or announce a chosen claim.
	Choose *Choose
}

// Proposer is one attempt of node self to have a successor of base chosen
// and made final. It is a pure state machine: Start and the On methods
// return the messages to send, and Outcome reports the end. It is not safe
// for concurrent use.
type Proposer struct {
	p      int
	base   store.Claim
	ballot epoch.Epoch
	// own is the value proposed when no replica reports an accepted one.
	own   store.Claim
	phase Phase
	// prefer is the Syncs' source among equals (PreferSource).
	prefer string

	// value is the proposal being synced, accepted and announced.
	value    store.Claim
	promises map[string]store.Meta
	synced   map[string]bool
	accepts  map[string]bool
	recorded map[string]bool
	// blocked holds the base replicas that know a chosen claim newer than
	// the base that is not known to be final: they refuse this attempt.
	blocked map[string]store.Claim
	outcome Outcome
}

// NewProposer starts an attempt by self to succeed base as owner of
// partition p, with a ballot above base's epoch and every epoch in seen,
// proposing replicas (self first) as the new replica set. base must be a
// final claim.
func NewProposer(p int, self string, base store.Claim, seen epoch.Epoch, replicas []string) *Proposer {
	ballot := max(seen, base.Epoch) + 1
	a := newProposer(p, base, Preparing)
	a.ballot = ballot
	a.own = a.successor(ballot, self, replicas)
	return a
}

// NewAnnouncer returns an attempt that only makes the chosen claim c final
// (the Announcing phase), for a node that learned c from a replica that
// merely recorded it.
func NewAnnouncer(p int, c store.Claim) *Proposer {
	a := newProposer(p, store.Claim{Epoch: c.Base, Replicas: c.BaseReplicas}, Announcing)
	a.ballot, a.value = c.Epoch, c
	return a
}

func newProposer(p int, base store.Claim, phase Phase) *Proposer {
	return &Proposer{
		p:        p,
		base:     base,
		phase:    phase,
		promises: map[string]store.Meta{},
		synced:   map[string]bool{},
		accepts:  map[string]bool{},
		recorded: map[string]bool{},
		blocked:  map[string]store.Claim{},
	}
}

// successor builds the claim that would succeed the base at ballot.
func (a *Proposer) successor(ballot epoch.Epoch, owner string, replicas []string) store.Claim {
	return store.Claim{
		Epoch:        ballot,
		Base:         a.base.Epoch,
		Owner:        owner,
		Replicas:     slices.Clone(replicas),
		BaseReplicas: slices.Clone(a.base.Replicas),
	}
}

// PreferSource makes the Syncs copy from node name if it is among the
// promisers with the highest position: the replicas pre-copied from it,
// and it alone can send them what changed since (see PreCopy).
func (a *Proposer) PreferSource(name string) { a.prefer = name }

// Ballot is the attempt's ballot: the epoch of the claim it would create.
func (a *Proposer) Ballot() epoch.Epoch { return a.ballot }

// Phase reports where the attempt stands.
func (a *Proposer) Phase() Phase { return a.phase }

// Outcome reports how the attempt ended; valid once Phase is Done.
func (a *Proposer) Outcome() Outcome { return a.outcome }

// Start returns the first messages: Prepare to the base claim's replicas,
// or Choose for an announcer.
func (a *Proposer) Start() []Message {
	if a.phase == Announcing {
		return a.announce()
	}
	return a.toBase(func() Message {
		return Message{Prepare: &Prepare{P: a.p, Ballot: a.ballot, Base: a.base}}
	})
}

// OnPromise handles a replica's answer to Prepare.
func (a *Proposer) OnPromise(from string, r PromiseReply) []Message {
	if a.phase != Preparing || !slices.Contains(a.base.Replicas, from) || a.newer(from, r.Meta) {
		return nil
	}
	if !r.OK {
		a.finish(Outcome{Rejected: r.Meta.Promised})
		return nil
	}
	a.promises[from] = r.Meta
	if len(a.promises) < majority(len(a.base.Replicas)) {
		return nil
	}
	if c, ok := a.chosenByPromisers(); ok {
		a.finish(Outcome{Newer: &c})
		return nil
	}
	return a.startSync()
}

// chosenByPromisers reports the successor of the base that every promiser
// accepted, if there is one. The promisers are a majority of the base's
// replicas, so it is chosen, and each of them would count a record of it
// (a replica whose accepted proposal is the claim counts its record,
// store.Meta.RecordCounts): the attempt makes it final (NewAnnouncer)
// instead of proposing its value again at its own ballot. That
// re-proposal, accepted by some replicas after others recorded the claim,
// could leave neither claim able to become final: the replicas that
// recorded the claim refuse the re-proposal, and those that accepted it no
// longer hold the claim as their accepted proposal. The partition would
// never be served again.
func (a *Proposer) chosenByPromisers() (store.Claim, bool) {
	var c store.Claim
	for _, from := range sortedKeys(a.promises) {
		acc := a.promises[from].Accepted
		ofBase := acc.Base == a.base.Epoch && slices.Equal(acc.BaseReplicas, a.base.Replicas)
		if acc.Owner == "" || !ofBase || c.Owner != "" && !c.Equal(acc) {
			return store.Claim{}, false
		}
		c = acc
	}
	return c, true
}

// OnSynced handles a replica's report that Sync completed (ok) or failed.
// Accepting starts once a majority of the proposal's replicas hold the
// data, the proposer among them when it proposes itself as owner: it
// serves from its own copy once the value is chosen.
//
// A value proposed again with another owner does not wait for that owner,
// which may be down: the value must be proposed again, since a majority may
// have accepted it, and if its owner had to hold the copy, a partition
// whose proposer went down after one replica of the base accepted its
// value would stay unserved until it came back (with three replicas, the
// two others are the only majority, and one of them reports the value).
// The owner may still serve the claim from its own copy when it learns it:
// only a node proposes itself, once it holds a copy with every write
// acknowledged under the base; no write is acknowledged under the base
// after a majority promised that ballot; and a later Sync installs only a
// newer copy.
func (a *Proposer) OnSynced(from string, ok bool) []Message {
	if a.phase != Syncing || !slices.Contains(a.value.Replicas, from) {
		return nil
	}
	ownValue := a.value.Owner == a.own.Owner
	if !ok {
		if ownValue && from == a.value.Owner {
			a.finish(Outcome{Failed: true})
		}
		return nil
	}
	a.synced[from] = true
	if ownValue && !a.synced[a.value.Owner] || len(a.synced) < majority(len(a.value.Replicas)) {
		return nil
	}
	a.phase = Accepting
	return a.toBase(func() Message {
		return Message{Accept: &Accept{P: a.p, Base: a.base, Value: a.value}}
	})
}

// OnAccepted handles a replica's answer to Accept. Once a majority
// accepted, the value is chosen and the attempt announces it.
func (a *Proposer) OnAccepted(from string, r AcceptReply) []Message {
	if a.phase != Accepting || !slices.Contains(a.base.Replicas, from) || a.newer(from, r.Meta) {
		return nil
	}
	if !r.OK {
		a.finish(Outcome{Rejected: r.Meta.Promised})
		return nil
	}
	a.accepts[from] = true
	if len(a.accepts) < majority(len(a.base.Replicas)) {
		return nil
	}
	a.phase = Announcing
	return a.announce()
}

// OnChosen handles a replica's answer to the announcing Choose. A chosen
// value stays chosen whatever the announce does; a failed announce only
// delays acting on it, and the next attempt from the same base re-proposes
// the same value.
func (a *Proposer) OnChosen(from string, r ChooseReply) {
	if a.phase != Announcing || !slices.Contains(a.base.Replicas, from) {
		return
	}
	if r.Meta.HasChosen && r.Meta.Chosen.Epoch > a.value.Epoch {
		c := r.Meta.Chosen
		a.finish(Outcome{Newer: &c, NewerFinal: r.Meta.Final})
		return
	}
	if !r.Recorded {
		return
	}
	a.recorded[from] = true
	if len(a.recorded) >= majority(len(a.base.Replicas)) {
		c := a.value
		a.finish(Outcome{Chosen: &c})
	}
}

// announce returns the Choose messages that record the value at the base
// claim's replicas.
func (a *Proposer) announce() []Message {
	return a.toBase(func() Message {
		return Message{Choose: &Choose{P: a.p, Claim: a.value}}
	})
}

// startSync picks the value (the highest-ballot accepted successor of the
// base among the promises, else our own) and asks its replicas to copy the
// most advanced promiser's data. Paxos requires the first: a value that may
// already be chosen must be proposed again, never replaced.
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
		if source == "" || pos.Less(m.Position) || m.Position == pos && from == a.prefer {
			source, pos = from, m.Position
		}
	}
	if best.Owner != "" {
		a.value = a.successor(a.ballot, best.Owner, best.Replicas)
	}
	a.phase = Syncing
	out := make([]Message, 0, len(a.value.Replicas))
	for _, r := range a.value.Replicas {
		out = append(out, Message{To: r, Sync: &Sync{P: a.p, Ballot: a.ballot, Base: a.base, Source: source, Pos: pos}})
	}
	return out
}

// toBase returns one message made by mk per replica of the base claim.
func (a *Proposer) toBase(mk func() Message) []Message {
	out := make([]Message, 0, len(a.base.Replicas))
	for _, r := range a.base.Replicas {
		m := mk()
		m.To = r
		out = append(out, m)
	}
	return out
}

// newer reports whether m, from replica from, shows a chosen claim newer
// than the base: the replica refuses the attempt. A final one ends the
// attempt. One not known to be final ends it only once such refusals leave
// too few replicas for a majority: while it is not final, it may never
// become final (a majority of the base's replicas accepted a newer
// successor before recording it), and a majority that does not know it
// must then be able to replace it. That is safe: had it become final, a majority of the
// base's replicas would have recorded it with a record that counts
// (store.Meta.RecordCounts), and each of them refuses this attempt.
func (a *Proposer) newer(from string, m store.Meta) bool {
	if !m.HasChosen || m.Chosen.Epoch <= a.base.Epoch {
		return false
	}
	c := m.Chosen
	if m.Final {
		a.finish(Outcome{Newer: &c, NewerFinal: true})
		return true
	}
	a.blocked[from] = c
	n := len(a.base.Replicas)
	if len(a.blocked) > n-majority(n) {
		a.finish(Outcome{Newer: a.newestBlocked()})
	}
	return true
}

// newestBlocked returns the newest of the chosen claims, not known to be
// final, that replicas refused the attempt for.
func (a *Proposer) newestBlocked() *store.Claim {
	var c store.Claim
	for _, k := range sortedKeys(a.blocked) {
		if b := a.blocked[k]; b.Epoch > c.Epoch || c.Owner == "" {
			c = b
		}
	}
	return &c
}

// GiveUp ends an attempt to which no answer can arrive any more (its
// messages failed or timed out). If a replica refused it for a chosen claim
// newer than the base, not known to be final, that claim is the outcome, to
// be made final (NewAnnouncer): that is safe, the claim was chosen, and the
// replicas that did not answer may never answer (one that lost its data
// refuses every attempt from this base, see Owner.HandlePrepare), so
// waiting for enough refusals could wait forever. Otherwise the attempt
// failed.
func (a *Proposer) GiveUp() {
	if len(a.blocked) > 0 {
		a.finish(Outcome{Newer: a.newestBlocked()})
		return
	}
	a.finish(Outcome{Failed: true})
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
