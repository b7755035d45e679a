package main

import "testing"

func TestAuditCountsAcknowledgedIncrementsMissingFromTheStore(t *testing.T) {
	l := ledger{}
	for range 5 {
		l.ack(1)
	}
	l.ack(2)
	l.ack(3)
	other := ledger{}
	other.ack(1)
	l.merge(other) // key 1: 6 acknowledged
	idx := []uint64{1, 2, 3}
	// Key 1 lost 2 (a stale write overwrote them), key 2 is exact, key 3
	// has 2 increments whose clients gave up after the write.
	lost, extra := l.audit(idx, []uint64{4, 1, 3})
	if lost != 2 || extra != 2 {
		t.Fatalf("audit = lost %d, unacknowledged %d; want 2, 2", lost, extra)
	}
}

func TestAuditOfAnExactStoreFindsNothing(t *testing.T) {
	l := ledger{}
	l.ack(7)
	l.ack(7)
	if lost, extra := l.audit([]uint64{7}, []uint64{2}); lost != 0 || extra != 0 {
		t.Fatalf("audit = %d, %d; want 0, 0", lost, extra)
	}
}

func TestAuditDoesNotLetUnacknowledgedWritesHideLosses(t *testing.T) {
	l := ledger{}
	l.ack(1)
	l.ack(1)
	// Key 1 lost one, key 2 has one extra: the totals agree, the keys do
	// not.
	if lost, _ := l.audit([]uint64{1, 2}, []uint64{1, 1}); lost != 1 {
		t.Fatalf("lost = %d, want 1", lost)
	}
}
