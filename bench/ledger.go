package main

// ledger counts, by key index, the increments one client made: those
// acknowledged, and those whose outcome it does not know (they failed or
// timed out, and may have been stored). Each client has its own; merge
// combines them after the cell.
type ledger map[uint64]attempts

// attempts are the increments of one key.
type attempts struct{ acked, unknown uint64 }

// ack records one acknowledged increment of key index i.
func (l ledger) ack(i uint64) {
	a := l[i]
	a.acked++
	l[i] = a
}

// fail records one increment of key index i whose outcome is unknown.
func (l ledger) fail(i uint64) {
	a := l[i]
	a.unknown++
	l[i] = a
}

// merge adds other's counts to l.
func (l ledger) merge(other ledger) {
	for i, o := range other {
		a := l[i]
		a.acked += o.acked
		a.unknown += o.unknown
		l[i] = a
	}
}

// audit is what the stored counters show against the increments made.
type audit struct {
	// lost is the sum, over keys, of acknowledged increments missing from
	// the stored counter.
	lost uint64
	// unacked is the sum of stored increments beyond the acknowledged ones
	// that increments of unknown outcome account for: not losses.
	unacked uint64
	// duplicated is the sum of stored increments beyond every increment
	// made: an increment applied twice.
	duplicated uint64
	// uncertainKeys counts the keys with increments of unknown outcome:
	// on them one that was stored can hide one acknowledged and lost.
	uncertainKeys uint64
}

// audit compares the increments made with the stored counters: final[j]
// is the stored counter of idx[j].
func (l ledger) audit(idx []uint64, final []uint64) audit {
	var r audit
	for j, i := range idx {
		a, got := l[i], final[j]
		if a.unknown > 0 {
			r.uncertainKeys++
		}
		switch {
		case a.acked > got:
			r.lost += a.acked - got
		case got > a.acked+a.unknown:
			r.unacked += a.unknown
			r.duplicated += got - a.acked - a.unknown
		default:
			r.unacked += got - a.acked
		}
	}
	return r
}

// indexes returns the key indexes l has counts for.
func (l ledger) indexes() []uint64 {
	out := make([]uint64, 0, len(l))
	for i := range l {
		out = append(out, i)
	}
	return out
}
