// Package simnet is a deterministic simulated network for tests that run
// many nodes in one goroutine.
//
// Messages sent with Send wait in flight until the test's scheduler calls
// Step, which picks one of them at random (so delivery order is random:
// reordering and delay both come from that choice) and decides its fate:
// delivered, dropped, or delivered with a copy left in flight (a
// duplicate). Cut, Isolate and Crash make the network drop messages across
// a link or to and from a node. Every choice is drawn from the seeded
// *rand.Rand given to New, so a run replays exactly from its seed:
//
//	rng := rand.New(rand.NewPCG(seed, 0))
//	net := simnet.New(rng, simnet.Faults{Drop: 0.05, Duplicate: 0.02})
//	net.Send("a", "b", ping{})
//	for net.Len() > 0 {
//		m, fate := net.Step()
//		if fate != simnet.Dropped {
//			deliver(m)
//		}
//	}
//
// A Net is not safe for concurrent use.
package simnet

import (
	"fmt"
	"math/rand/v2"
)

// Message is one message in flight.
type Message struct {
	// Seq numbers messages in the order they were sent, from 1; a
	// duplicate keeps the Seq of its original.
	Seq uint64
	// From is the sending node.
	From string
	// To is the receiving node.
	To string
	// Payload is the message itself, opaque to the network.
	Payload any
}

// String formats the message for traces.
func (m Message) String() string {
	return fmt.Sprintf("#%d %s->%s %v", m.Seq, m.From, m.To, m.Payload)
}

// Fate is what Step did with the message it picked.
type Fate int

const (
	// Delivered: the message is handed to the caller and leaves the network.
	Delivered Fate = iota
	// Duplicated: the message is handed to the caller and a copy stays in
	// flight, to be picked again later.
	Duplicated
	// Dropped: the message is lost (random drop, a cut link or a crashed
	// node); the caller must not deliver it.
	Dropped
)

// String names the fate for traces.
func (f Fate) String() string {
	switch f {
	case Delivered:
		return "deliver"
	case Duplicated:
		return "duplicate"
	case Dropped:
		return "drop"
	}
	return fmt.Sprintf("Fate(%d)", int(f))
}

// Faults are the probabilities of Step's random faults, each in [0, 1].
type Faults struct {
	// Drop is the probability that a picked message is lost.
	Drop float64
	// Duplicate is the probability that a delivered message stays in
	// flight as well.
	Duplicate float64
}

type link struct{ a, b string }

// Net is the simulated network.
type Net struct {
	rng    *rand.Rand
	faults Faults
	seq    uint64
	// inflight is unordered: Step picks by index and swaps with the last.
	inflight []Message
	// cut holds cut links in both directions; isolated and crashed hold
	// nodes. Maps are only looked up, never iterated, so runs stay
	// deterministic.
	cut      map[link]bool
	isolated map[string]bool
	crashed  map[string]bool
}

// New returns an empty network drawing every choice from rng.
func New(rng *rand.Rand, f Faults) *Net {
	return &Net{
		rng:      rng,
		faults:   f,
		cut:      map[link]bool{},
		isolated: map[string]bool{},
		crashed:  map[string]bool{},
	}
}

// SetFaults replaces the fault probabilities (zero Faults: a reliable
// network that still reorders).
func (n *Net) SetFaults(f Faults) { n.faults = f }

// Send puts a message in flight. A message that cannot arrive (its link is
// cut or an end crashed) still enters the network and is dropped when
// picked, as a real network would lose it. It returns the message's Seq.
func (n *Net) Send(from, to string, payload any) uint64 {
	n.seq++
	n.inflight = append(n.inflight, Message{Seq: n.seq, From: from, To: to, Payload: payload})
	return n.seq
}

// Len returns the number of messages in flight.
func (n *Net) Len() int { return len(n.inflight) }

// InFlight returns a copy of the messages in flight, in no meaningful
// (but deterministic) order.
func (n *Net) InFlight() []Message { return append([]Message(nil), n.inflight...) }

// Step picks a random message in flight and decides its fate; ok is false
// when nothing is in flight. A message whose link is cut or whose sender or
// receiver crashed is always dropped.
func (n *Net) Step() (m Message, fate Fate, ok bool) {
	if len(n.inflight) == 0 {
		return Message{}, Dropped, false
	}
	i := n.rng.IntN(len(n.inflight))
	m = n.inflight[i]
	switch {
	case !n.Reachable(m.From, m.To):
		n.remove(i)
		return m, Dropped, true
	case n.faults.Drop > 0 && n.rng.Float64() < n.faults.Drop:
		n.remove(i)
		return m, Dropped, true
	case n.faults.Duplicate > 0 && n.rng.Float64() < n.faults.Duplicate:
		return m, Duplicated, true
	}
	n.remove(i)
	return m, Delivered, true
}

func (n *Net) remove(i int) {
	last := len(n.inflight) - 1
	n.inflight[i] = n.inflight[last]
	n.inflight[last] = Message{}
	n.inflight = n.inflight[:last]
}

// Reachable reports whether a message from one node to another can arrive
// now. A node always reaches itself unless it crashed.
func (n *Net) Reachable(from, to string) bool {
	if n.crashed[from] || n.crashed[to] {
		return false
	}
	if from == to {
		return true
	}
	return !n.isolated[from] && !n.isolated[to] && !n.cut[link{from, to}]
}

// Cut drops every message between a and b, both ways, until Heal.
func (n *Net) Cut(a, b string) {
	n.cut[link{a, b}] = true
	n.cut[link{b, a}] = true
}

// Isolate cuts node from every other node until Heal.
func (n *Net) Isolate(node string) { n.isolated[node] = true }

// Heal restores every cut link and isolated node. Crashed nodes stay down.
func (n *Net) Heal() {
	clear(n.cut)
	clear(n.isolated)
}

// Crash drops every message in flight to or from node, and every later one,
// until Restart.
func (n *Net) Crash(node string) {
	n.crashed[node] = true
	kept := n.inflight[:0]
	for _, m := range n.inflight {
		if m.From != node && m.To != node {
			kept = append(kept, m)
		}
	}
	clear(n.inflight[len(kept):])
	n.inflight = kept
}

// Restart lets node send and receive again.
func (n *Net) Restart(node string) { delete(n.crashed, node) }

// Crashed reports whether node is down.
func (n *Net) Crashed(node string) bool { return n.crashed[node] }
