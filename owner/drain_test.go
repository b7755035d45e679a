package owner

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
)

// prepareLog is a Transport that records when each Prepare it sends
// starts and when its answer is back.
type prepareLog struct {
	Transport
	mu     sync.Mutex
	events []string
}

func (l *prepareLog) Prepare(ctx context.Context, to string, req Prepare) (PromiseReply, error) {
	l.record("send " + to)
	defer l.record("answer " + to)
	return l.Transport.Prepare(ctx, to, req)
}

func (l *prepareLog) record(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

// With replicas, the base's backups promise at once: had they been asked
// with the owner, two of them would have chosen the next claim while the
// owner drained, and fenced its calls in flight, which then ran twice
// (once more on the new owner, after the retry). A proposer asks a live
// owner first, and the others once it answered.
func TestCallInFlightWhenItsOwnerDrainsCommitsBeforeTheBackupsPromise(t *testing.T) {
	const p = 1
	m := &mesh{}
	slowDrain := func(c *Config) { c.DrainTimeout = 20 * time.Second } // the call, not the timeout, ends it
	log := &prepareLog{}
	a, sa := m.addWith(t, "a", func(c *Config) {
		slowDrain(c)
		log.Transport = c.Transport
		c.Transport = log
	})
	b, sb := m.addWith(t, "b", slowDrain)
	_, sc := m.addWith(t, "c", slowDrain)
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "b", Replicas: []string{"b", "a", "c"}}, sb, sa, sc)
	require.NoError(t, b.startServing(p, k))
	lease, err := b.Lease(p) // a call in flight on b
	require.NoError(t, err)

	acquired := make(chan bool, 1)
	go func() {
		ok, _ := a.acquire(p, k, &ring.Table{}, []string{"a", "b", "c"})
		acquired <- ok
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) { // polling a condition
		if _, serving := b.Serving(p); !serving {
			break // b drains: it waits for the lease
		}
		require.True(t, time.Now().Before(deadline), "b never began to drain")
	}
	c := b.Submit(lease, &store.Batch{Partition: p, Writes: []store.KV{{Key: []byte("k"), Value: []byte("in flight")}}})
	<-c.Done()
	lease.Release()
	require.NoError(t, c.Err(), "the call in flight when its owner began to drain was fenced")
	require.True(t, <-acquired)

	log.mu.Lock()
	defer log.mu.Unlock()
	answered := slices.Index(log.events, "answer b")
	sent := slices.Index(log.events, "send c")
	require.True(t, answered >= 0 && sent > answered, fmt.Sprintf("c was asked before b answered: %v", log.events))
}

// A lease still held when a drain ends is revoked once this node promises
// a new claim, even when the Prepare whose drain stopped serving ended
// without a promise (its sender gave up) and a later one makes it: the
// handler must hear that the partition moved on.
func TestLeaseOutlivingADrainIsRevokedAtTheNextPromise(t *testing.T) {
	const p = 1
	b, sb := (&mesh{}).addWith(t, "b", func(c *Config) { c.ReplicationFactor = 1; c.DrainTimeout = 20 * time.Second })
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "b", Replicas: []string{"b"}}, sb)
	require.NoError(t, b.startServing(p, k))
	lease, err := b.Lease(p)
	require.NoError(t, err)
	defer lease.Release()

	givenUp, giveUp := context.WithCancel(context.Background())
	first := make(chan PromiseReply, 1)
	go func() {
		r, _ := b.HandlePrepare(givenUp, Prepare{P: p, Ballot: 2, Base: k})
		first <- r
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) { // polling a condition
		if _, serving := b.Serving(p); !serving {
			break // b drains: it waits for the lease
		}
		require.True(t, time.Now().Before(deadline), "b never began to drain")
	}
	giveUp()
	require.False(t, (<-first).OK)
	require.NoError(t, lease.Context().Err(), "nothing was promised: the lease stands")

	r, err := b.HandlePrepare(context.Background(), Prepare{P: p, Ballot: 3, Base: k})
	require.NoError(t, err)
	require.True(t, r.OK)
	select {
	case <-lease.Context().Done():
		require.ErrorIs(t, context.Cause(lease.Context()), ErrRevoked)
	default:
		t.Fatal("the lease of the stopped period was not revoked by the promise")
	}
}

// The leases of a stopped serving period are revoked only once a newer
// claim is promised, chosen or served here: learning again the claim they
// were taken under (a Prepare retried from the same base) leaves them be.
func TestStoppedLeasesAreRevokedOnlyByANewerClaim(t *testing.T) {
	pt := &partition{p: 1}
	require.True(t, pt.start(store.Claim{Epoch: 3, Owner: "a", Replicas: []string{"a"}}, store.Position{}, func() bool { return false }))
	lease, ok := pt.lease()
	require.True(t, ok)
	defer lease.Release()
	pt.stop()
	pt.stopBefore(3)
	pt.revokeStoppedBelow(3)
	require.NoError(t, lease.Context().Err(), "nothing newer than epoch 3")
	pt.stopBefore(4)
	require.ErrorIs(t, context.Cause(lease.Context()), ErrRevoked)
}
