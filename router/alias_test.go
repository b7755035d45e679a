package router

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCallersResultSharesNoBufferWithTheWriteOnItsWayToABackup: a handler
// may answer with the value it put (State.Get after Put) or with its key,
// and its caller may then change the result. A backup that answers slowly
// is sent the owner's batches after the caller got its answer (the owner
// needed only the other backup's copy); what it stores must be the
// handler's write, under the call's key.
func TestCallersResultSharesNoBufferWithTheWriteOnItsWayToABackup(t *testing.T) {
	c := newFaultyCluster(t, 3, 3, func(n *Node) {
		n.Handle("put-value", func(_ context.Context, req *Request) ([]byte, error) {
			req.State.Put(req.Payload)
			v, _ := req.State.Get()
			return v, nil
		})
		n.Handle("put-key", func(_ context.Context, req *Request) ([]byte, error) {
			req.State.Put(req.Payload)
			return req.Key, nil
		})
	})
	owner, slow := c.nodes[0], c.nodes[2]
	var keys [][]byte
	for i := 0; len(keys) < 40; i++ {
		k := fmt.Appendf(nil, "alias-%d", i)
		if cl, _ := owner.Owner(owner.Partition(k)); cl.Owner == owner.Name() {
			require.Contains(t, cl.Replicas, slow.Name())
			keys = append(keys, k)
		}
	}
	c.nets[slow.Name()].SetDelay(20 * time.Millisecond) // its answers to the owner lag
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := bytes.Repeat([]byte("v"), 64)
	for i, k := range keys {
		method := []string{"put-value", "put-key"}[i%2]
		out, err := owner.Call(ctx, k, method, want)
		require.NoError(t, err)
		for i := range out {
			out[i] = 'X' // the caller reuses its result
		}
	}
	for _, k := range keys {
		// Without the copy, a key the handler answered with is stored
		// under the caller's bytes, and never appears.
		waitFor(t, 30*time.Second, func() error {
			if _, ok, err := slow.store.Get(slow.Partition(k), k); err != nil || !ok {
				return fmt.Errorf("the slow backup does not hold %s (%v)", k, err)
			}
			return nil
		})
		v, _, err := slow.store.Get(slow.Partition(k), k)
		require.NoError(t, err)
		require.Equal(t, string(want), string(v), "key %s on the slow backup", k)
	}
}
