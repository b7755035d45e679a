package main

import "testing"

// requireAudit fails the test unless got is want.
func requireAudit(t *testing.T, want, got audit) {
	t.Helper()
	if got != want {
		t.Fatalf("audit = %+v, want %+v", got, want)
	}
}

func TestAuditCountsAcknowledgedIncrementsMissingFromTheStore(t *testing.T) {
	l := ledger{}
	for range 5 {
		l.ack(1)
	}
	l.ack(2)
	l.ack(3)
	l.fail(3)
	l.fail(3)
	other := ledger{}
	other.ack(1)
	l.merge(other) // key 1: 6 acknowledged
	// Key 1 lost 2 (a stale write overwrote them), key 2 is exact, key 3
	// has 2 increments whose clients gave up after the write.
	requireAudit(t, audit{lost: 2, unacked: 2, uncertainKeys: 1}, l.audit([]uint64{1, 2, 3}, []uint64{4, 1, 3}))
}

func TestAuditOfAnExactStoreFindsNothing(t *testing.T) {
	l := ledger{}
	l.ack(7)
	l.ack(7)
	requireAudit(t, audit{}, l.audit([]uint64{7}, []uint64{2}))
}

func TestAuditDoesNotLetUnacknowledgedWritesHideLosses(t *testing.T) {
	l := ledger{}
	l.ack(1)
	l.ack(1)
	l.fail(2)
	// Key 1 lost one, key 2 has one unacknowledged: the totals agree, the
	// keys do not.
	requireAudit(t, audit{lost: 1, unacked: 1, uncertainKeys: 1}, l.audit([]uint64{1, 2}, []uint64{1, 1}))
}

// An increment applied twice (a call run again after its write was
// acknowledged, say) is stored beyond every increment made: it is counted
// as duplicated, not taken for a client's unknown outcome.
func TestAuditCountsIncrementsAppliedTwice(t *testing.T) {
	l := ledger{}
	l.ack(1)
	l.ack(1)
	l.ack(2)
	l.fail(2)
	requireAudit(t, audit{unacked: 1, duplicated: 2, uncertainKeys: 1}, l.audit([]uint64{1, 2}, []uint64{3, 3}))
}
