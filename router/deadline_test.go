package router

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/stretchr/testify/require"
)

// A forwarded call runs under its caller's deadline, as a call entering
// at the owner does: a handler that waits on something outside (a
// database, another service) learns that its caller gave up.
func TestForwardedCallRunsUnderTheCallersDeadline(t *testing.T) {
	started, ended := make(chan struct{}), make(chan error, 1)
	c := newReplicatedCluster(t, 2, 1, func(n *Node) {
		n.Handle("deadline", func(ctx context.Context, _ *Request) ([]byte, error) {
			d, ok := ctx.Deadline()
			if !ok {
				return nil, nil
			}
			return binary.BigEndian.AppendUint64(nil, uint64(d.UnixNano())), nil
		})
		n.Handle("wait", func(ctx context.Context, _ *Request) ([]byte, error) {
			close(started)
			<-ctx.Done() // the node's Close, should the deadline not come
			ended <- ctx.Err()
			return nil, ctx.Err()
		})
	})
	entry := c.nodes[0]
	key := keyOwnedBy(entry, c.nodes[1].Name())

	want := time.Now().Add(10 * time.Minute) // before Call gives up (half of DedupRetention)
	ctx, cancel := context.WithDeadline(context.Background(), want)
	defer cancel()
	b, err := entry.Call(ctx, key, "deadline", nil)
	require.NoError(t, err)
	require.Len(t, b, 8, "the owner ran the call without a deadline")
	got := time.Unix(0, int64(binary.BigEndian.Uint64(b)))
	// The owner's deadline is its receipt plus the time the caller had
	// left when it sent: no earlier than the caller's, later by the hop.
	require.WithinRange(t, got, want.Add(-time.Millisecond), want.Add(10*time.Second))

	// A caller without a deadline gives the owner half of DedupRetention,
	// past which Call gives up (a later start could miss a pruned record).
	giveUp := time.Now().Add(entry.cfg.DedupRetention / 2)
	b, err = entry.Call(context.Background(), key, "deadline", nil)
	require.NoError(t, err)
	require.Len(t, b, 8, "a caller without a deadline gave the owner none")
	got = time.Unix(0, int64(binary.BigEndian.Uint64(b)))
	require.WithinRange(t, got, giveUp.Add(-time.Millisecond), giveUp.Add(10*time.Second))

	// Long enough for the call to reach the owner's handler on a slow
	// machine: one that has not started by its deadline never does.
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = entry.Call(ctx, key, "wait", nil)
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// The owner's deadline is later than the caller's by the hop: its
	// handler may start after Call returned.
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached the owner's handler")
	}
	select {
	case err := <-ended:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("the owner's handler still runs 10 s after its caller's deadline")
	}
}

// A call whose caller gave up while it waited behind its key's earlier
// calls does not run: the caller has its answer (ErrUnavailable), and a
// backlog of abandoned calls would delay every call after it. Both for a
// call that entered at the owner (its context is the caller's) and for a
// forwarded one (the entry node sends the cancellation), with the
// caller's deadline still far off.
func TestQueuedCallWhoseCallerGaveUpDoesNotRun(t *testing.T) {
	for _, forwarded := range []bool{false, true} {
		t.Run(fmt.Sprintf("forwarded=%v", forwarded), func(t *testing.T) {
			h := newHoldingCounter()
			c := newReplicatedCluster(t, 2, 1, func(n *Node) { n.Handle("inc", h.handle) })
			t.Cleanup(h.release) // before the cluster closes, should the test fail first
			owner := c.nodes[1]
			entry := owner
			if forwarded {
				entry = c.nodes[0]
			}
			key := keyOwnedBy(owner, owner.Name())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			first := make(chan error, 1)
			go func() {
				_, err := owner.Call(ctx, key, "inc", []byte("hold"))
				first <- err
			}()
			<-h.started

			gaveUp := make(chan error, 1)
			abandoned, cancelAbandoned := context.WithCancel(ctx)
			defer cancelAbandoned()
			go func() {
				_, err := entry.Call(abandoned, key, "inc", []byte("abandoned"))
				gaveUp <- err
			}()
			queued := waitQueued(t, owner, key, 1)[0]
			cancelAbandoned()
			err := <-gaveUp
			require.ErrorIs(t, err, ErrUnavailable)
			require.ErrorIs(t, err, context.Canceled)
			select {
			case <-queued.ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the queued call's context did not end with its caller's")
			}

			h.release()
			require.NoError(t, <-first)
			v, err := owner.Call(ctx, key, "inc", []byte("last"))
			require.NoError(t, err)
			require.Equal(t, []string{"hold", "last"}, h.runs(), "handlers run")
			require.Equal(t, uint64(2), binary.BigEndian.Uint64(v))
		})
	}
}

// The budget travels with the call; a budget no Duration can hold is
// refused as malformed rather than run as already expired.
func TestCallBudgetSurvivesTheWireAndAnOverflowingOneIsRefused(t *testing.T) {
	req := callRequest{ID: []byte("id"), Key: []byte("k"), Method: "m", Payload: []byte("p"), Budget: 1500 * time.Millisecond}
	got, err := decodeCallRequest(req.encode())
	require.NoError(t, err)
	require.Equal(t, req, got)

	var e wire.Encoder
	e.Bytes(req.ID)
	e.Bytes(req.Key)
	e.String(req.Method)
	e.Bytes(req.Payload)
	e.Uvarint(1 << 63)
	_, err = decodeCallRequest(e.Out())
	require.ErrorIs(t, err, wire.ErrMalformed)
}
