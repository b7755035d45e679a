package router

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An owner that holds Config.MaxPendingCalls calls refuses the next one
// at once, whether it entered there or was forwarded, without running its
// handler; once its calls are answered it takes new ones.
func TestCallsBeyondMaxPendingCallsFailAtOnceAndRunNothing(t *testing.T) {
	started, proceed := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var ran []string
	c := newReplicatedCluster(t, 2, 1, func(n *Node) {
		n.cfg.MaxPendingCalls = 2
		n.Handle("inc", func(ctx context.Context, req *Request) ([]byte, error) {
			mu.Lock()
			ran = append(ran, string(req.Payload))
			mu.Unlock()
			if string(req.Payload) == "running" {
				close(started)
				select {
				case <-proceed:
				case <-ctx.Done(): // the test failed and closes the node
					return nil, ctx.Err()
				}
			}
			return counter(ctx, req)
		})
	})
	letGo := sync.OnceFunc(func() { close(proceed) })
	t.Cleanup(letGo) // before the cluster closes, should the test fail first
	owner, other := c.nodes[1], c.nodes[0]
	key := keyOwnedBy(owner, owner.Name())
	pe := owner.exec.parts[owner.Partition(key)]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	held := make(chan error, 2)
	call := func(payload string) {
		_, err := owner.Call(ctx, key, "inc", []byte(payload))
		held <- err
	}
	go call("running")
	<-started
	go call("queued")
	waitFor(t, 10*time.Second, func() error {
		pe.mu.Lock()
		defer pe.mu.Unlock()
		if len(pe.queues[string(key)]) == 1 {
			return nil
		}
		return errors.New("the second call is not queued behind the first")
	})

	for _, entry := range []*Node{owner, other} {
		_, err := entry.Call(ctx, key, "inc", []byte("refused"))
		require.ErrorIs(t, err, ErrOverloaded, "entering at %s", entry.Name())
	}

	letGo()
	require.NoError(t, <-held)
	require.NoError(t, <-held)
	v, err := other.Call(ctx, key, "inc", []byte("after"))
	require.NoError(t, err)
	require.Equal(t, uint64(3), binary.BigEndian.Uint64(v))
	mu.Lock()
	require.Equal(t, []string{"running", "queued", "after"}, ran, "handlers run")
	mu.Unlock()
	waitFor(t, 10*time.Second, func() error {
		if n := owner.exec.pending.Load(); n != 0 {
			return fmt.Errorf("%d calls still counted as pending", n)
		}
		return nil
	})
}
