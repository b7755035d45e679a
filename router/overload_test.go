package router

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An owner that holds Config.MaxPendingCalls calls refuses the next one
// at once, whether it entered there or was forwarded, without running its
// handler; once its calls are answered it takes new ones.
func TestCallsBeyondMaxPendingCallsFailAtOnceAndRunNothing(t *testing.T) {
	h := newHoldingCounter()
	c := newReplicatedCluster(t, 2, 1, func(n *Node) {
		n.cfg.MaxPendingCalls = 2
		n.Handle("inc", h.handle)
	})
	t.Cleanup(h.release) // before the cluster closes, should the test fail first
	owner, other := c.nodes[1], c.nodes[0]
	key := keyOwnedBy(owner, owner.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	held := make(chan error, 2)
	call := func(payload string) {
		_, err := owner.Call(ctx, key, "inc", []byte(payload))
		held <- err
	}
	go call("hold")
	<-h.started
	go call("queued")
	waitQueued(t, owner, key, 1)

	for _, entry := range []*Node{owner, other} {
		refuse, cancelRefuse := context.WithTimeout(ctx, 10*time.Second)
		_, err := entry.Call(refuse, key, "inc", []byte("refused"))
		cancelRefuse()
		require.ErrorIs(t, err, ErrOverloaded, "entering at %s", entry.Name())
	}
	// A call for a partition the node does not serve (its sender's view
	// is stale) is sent on to the owner, not refused.
	r := owner.execute(ctx, callRequest{ID: newRequestID(time.Now()), Key: keyOwnedBy(owner, other.Name()), Method: "inc", Payload: []byte("elsewhere")})
	require.Equal(t, statusNotOwner, r.Status, "%s", r.Body)

	h.release()
	require.NoError(t, <-held)
	require.NoError(t, <-held)
	v, err := other.Call(ctx, key, "inc", []byte("after"))
	require.NoError(t, err)
	require.Equal(t, uint64(3), binary.BigEndian.Uint64(v))
	require.Equal(t, []string{"hold", "queued", "after"}, h.runs(), "handlers run")
	waitFor(t, 10*time.Second, func() error {
		if n := owner.exec.pending.Load(); n != 0 {
			return fmt.Errorf("%d calls still counted as pending", n)
		}
		return nil
	})
}
