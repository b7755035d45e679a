package simnet

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func newNet(seed uint64, f Faults) *Net { return New(rand.New(rand.NewPCG(seed, 0)), f) }

// drain steps until nothing is in flight and returns the payloads handed
// to the caller, in order, and how many were dropped.
func drain(n *Net) (got []any, dropped int) {
	for {
		m, fate, ok := n.Step()
		if !ok {
			return got, dropped
		}
		if fate == Dropped {
			dropped++
			continue
		}
		got = append(got, m.Payload)
	}
}

func TestReliableNetDeliversEveryMessageOnce(t *testing.T) {
	n := newNet(1, Faults{})
	for i := range 100 {
		n.Send("a", "b", i)
	}
	got, dropped := drain(n)
	if dropped != 0 || len(got) != 100 {
		t.Fatalf("got %d messages, %d dropped; want 100, 0", len(got), dropped)
	}
	ints := make([]int, len(got))
	for i, g := range got {
		ints[i] = g.(int)
	}
	if slices.IsSorted(ints) {
		t.Fatalf("100 messages arrived in send order: the net does not reorder")
	}
	slices.Sort(ints)
	for i, v := range ints {
		if v != i {
			t.Fatalf("message %d missing or repeated: %v", i, ints)
		}
	}
}

func TestSameSeedSameSchedule(t *testing.T) {
	run := func() string {
		n := newNet(42, Faults{Drop: 0.2, Duplicate: 0.2})
		for i := range 50 {
			n.Send("a", fmt.Sprint("n", i%3), i)
		}
		var trace string
		for {
			m, fate, ok := n.Step()
			if !ok {
				return trace
			}
			trace += fmt.Sprintf("%v %v;", m, fate)
		}
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("two runs of one seed differ:\n%s\n%s", a, b)
	}
}

func TestFaultsDropAndDuplicate(t *testing.T) {
	n := newNet(7, Faults{Drop: 0.3, Duplicate: 0.3})
	for i := range 1000 {
		n.Send("a", "b", i)
	}
	got, dropped := drain(n)
	seen := map[int]int{}
	for _, g := range got {
		seen[g.(int)]++
	}
	dups := 0
	for _, c := range seen {
		dups += c - 1
	}
	if dropped == 0 || dups == 0 {
		t.Fatalf("dropped %d, duplicated %d: want both > 0", dropped, dups)
	}
}

func TestCutAndIsolateDropUntilHeal(t *testing.T) {
	n := newNet(3, Faults{})
	n.Cut("a", "b")
	n.Send("a", "b", 1)
	n.Send("b", "a", 2)
	n.Send("a", "c", 3)
	n.Send("a", "a", 4)
	got, dropped := drain(n)
	slices.SortFunc(got, func(x, y any) int { return x.(int) - y.(int) })
	if dropped != 2 || !slices.Equal(got, []any{3, 4}) {
		t.Fatalf("across a cut: got %v, %d dropped; want [3 4], 2", got, dropped)
	}

	n.Isolate("c")
	n.Send("a", "c", 5)
	n.Send("c", "b", 6)
	n.Send("c", "c", 7)
	if got, dropped = drain(n); dropped != 2 || !slices.Equal(got, []any{7}) {
		t.Fatalf("to an isolated node: got %v, %d dropped; want [7], 2", got, dropped)
	}

	// A message sent before the cut is lost if the cut is still there when
	// it is picked.
	n.Heal()
	n.Send("a", "b", 8)
	n.Cut("a", "b")
	if got, dropped = drain(n); dropped != 1 || len(got) != 0 {
		t.Fatalf("cut while in flight: got %v, %d dropped; want none, 1", got, dropped)
	}

	n.Heal()
	n.Send("a", "b", 9)
	n.Send("c", "a", 10)
	if got, dropped = drain(n); dropped != 0 || len(got) != 2 {
		t.Fatalf("after Heal: got %v, %d dropped; want 2 messages, none dropped", got, dropped)
	}
}

func TestCrashDropsInFlightAndLaterMessages(t *testing.T) {
	n := newNet(5, Faults{})
	n.Send("a", "b", 1)
	n.Send("b", "c", 2)
	n.Send("c", "a", 3)
	n.Crash("b")
	if n.Len() != 1 {
		t.Fatalf("after crash of b, %d in flight; want 1", n.Len())
	}
	n.Send("c", "b", 4)
	n.Send("b", "b", 5)
	got, _ := drain(n)
	if !slices.Equal(got, []any{3}) {
		t.Fatalf("got %v; want [3]", got)
	}
	n.Heal() // does not restart
	if !n.Crashed("b") {
		t.Fatalf("Heal restarted a crashed node")
	}
	n.Restart("b")
	n.Send("c", "b", 6)
	if got, _ = drain(n); !slices.Equal(got, []any{6}) {
		t.Fatalf("after restart: got %v; want [6]", got)
	}
}
