package main

// ledger counts the increments acknowledged to one client, by key index.
// Each client has its own; merge combines them after the cell.
type ledger map[uint64]uint64

// ack records one acknowledged increment of key index i.
func (l ledger) ack(i uint64) { l[i]++ }

// merge adds other's counts to l.
func (l ledger) merge(other ledger) {
	for i, n := range other {
		l[i] += n
	}
}

// audit compares the acknowledged increments with the stored counters.
// final[j] is the stored counter of idx[j]. lost is the sum, over keys, of
// acknowledged increments missing from the stored counter. extra is the
// sum of stored increments never acknowledged: calls that failed or timed
// out on the client side after the write happened, which are not losses.
func (l ledger) audit(idx []uint64, final []uint64) (lost, extra uint64) {
	for j, i := range idx {
		acked, got := l[i], final[j]
		switch {
		case acked > got:
			lost += acked - got
		case got > acked:
			extra += got - acked
		}
	}
	return lost, extra
}

// indexes returns the key indexes l has counts for.
func (l ledger) indexes() []uint64 {
	out := make([]uint64, 0, len(l))
	for i := range l {
		out = append(out, i)
	}
	return out
}
