package owner

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
)

// toPaused is a Transport whose protocol messages to node paused wait
// until their ctx ends, as to a paused process (SIGSTOP, a VM frozen) or
// one cut off without a reset.
type toPaused struct {
	Transport
	paused string
}

func (t toPaused) hang(ctx context.Context, to string) error {
	if to != t.paused {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (t toPaused) Prepare(ctx context.Context, to string, req Prepare) (PromiseReply, error) {
	if err := t.hang(ctx, to); err != nil {
		return PromiseReply{}, err
	}
	return t.Transport.Prepare(ctx, to, req)
}

func (t toPaused) Accept(ctx context.Context, to string, req Accept) (AcceptReply, error) {
	if err := t.hang(ctx, to); err != nil {
		return AcceptReply{}, err
	}
	return t.Transport.Accept(ctx, to, req)
}

func (t toPaused) Sync(ctx context.Context, to string, req Sync) (SyncReply, error) {
	if err := t.hang(ctx, to); err != nil {
		return SyncReply{}, err
	}
	return t.Transport.Sync(ctx, to, req)
}

func (t toPaused) PreCopy(ctx context.Context, to string, req PreCopy) (SyncReply, error) {
	if err := t.hang(ctx, to); err != nil {
		return SyncReply{}, err
	}
	return t.Transport.PreCopy(ctx, to, req)
}

func (t toPaused) Choose(ctx context.Context, to string, req Choose) (ChooseReply, error) {
	if err := t.hang(ctx, to); err != nil {
		return ChooseReply{}, err
	}
	return t.Transport.Choose(ctx, to, req)
}

func (t toPaused) Replicate(ctx context.Context, to string, req Replicate) ([]error, error) {
	if err := t.hang(ctx, to); err != nil {
		return nil, err
	}
	return t.Transport.Replicate(ctx, to, req)
}

// pausedRequestTimeout is the RequestTimeout of the tests below: a message
// to the paused node waits that long, longer than any test may take, so
// an attempt that waited for one would fail the test by its deadline.
const pausedRequestTimeout = time.Hour

// acquireWithin runs o's acquisition of p from base with replica set want
// and fails the test unless it succeeds before the test's deadline.
func acquireWithin(t *testing.T, o *Owner, p int, base store.Claim, want []string) {
	t.Helper()
	done := make(chan bool, 1)
	go func() {
		ok, _ := o.acquire(p, base, &ring.Table{}, want)
		done <- ok
	}()
	select {
	case ok := <-done:
		require.True(t, ok)
	case <-time.After(30 * time.Second):
		t.Fatal("the acquisition waited for the paused node")
	}
	c, serving := o.Serving(p)
	require.True(t, serving)
	require.Equal(t, want, c.Replicas)
}

// A node taking a partition over from a paused owner serves it once the
// two other replicas chose and recorded its claim: it does not wait for
// the paused owner's answers to the Prepare, the Accept and the Choose it
// was sent, nor tell it the claim is final before it serves.
func TestTakeoverFromAPausedOwnerDoesNotWaitForIt(t *testing.T) {
	const p = 1
	m := &mesh{}
	_, sa := m.add(t, "a")
	b, sb := m.addWith(t, "b", func(c *Config) {
		c.RequestTimeout = pausedRequestTimeout
		c.DrainTimeout = time.Millisecond // the wait for the owner's promise first
		c.Transport = toPaused{Transport: c.Transport, paused: "a"}
	})
	c, sc := m.add(t, "c")
	m.add(t, "d")
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "b", "c"}}, sa, sb, sc)
	b.claims.Merge(p, k)
	c.claims.Merge(p, k)

	acquireWithin(t, b, p, k, []string{"b", "c", "d"})
}

// An owner's resync (it acquires its own claim again to catch a replica
// up) drains its partition; with one replica paused, it serves again once
// the other replica and itself chose and recorded the new claim, without
// waiting for the paused replica's answers, nor for its copy, which would
// make no progress, beyond DrainTimeout. The paused replica missed a
// batch, so the resync first asks it to pre-copy the partition: that too
// is not waited for beyond DrainTimeout.
func TestResyncWithAPausedReplicaDoesNotWaitForIt(t *testing.T) {
	const p = 1
	m := &mesh{}
	b, sb := m.addWith(t, "b", func(c *Config) {
		c.RequestTimeout = pausedRequestTimeout
		c.DrainTimeout = 10 * time.Millisecond
		c.Transport = toPaused{Transport: c.Transport, paused: "c"}
	})
	_, sa := m.add(t, "a")
	_, sc := m.add(t, "c")
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "b", Replicas: []string{"b", "a", "c"}}, sb, sa, sc)
	require.NoError(t, b.startServing(p, k))
	b.parts[p].markLagging(k.Epoch, false, "c")

	acquireWithin(t, b, p, k, []string{"b", "a", "c"})
}
