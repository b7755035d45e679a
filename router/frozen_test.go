package router

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestForwardedCallToAnOwnerThatFrozeGoesToTheNextOwner freezes a key's
// owner after a call opened the entry node's connection to it: every link
// with it goes silent, and its connections stay open, as a stopped process
// leaves them. A call forwarded to it must be retried at the partition's
// next owner once gossip declares it dead, not wait for its context (a
// generous one, so that a hang fails the test instead of hanging it).
func TestForwardedCallToAnOwnerThatFrozeGoesToTheNextOwner(t *testing.T) {
	c := newFaultyCluster(t, 3, 0, func(n *Node) { n.Handle("incr", counter) })
	entry := c.node("n0")
	key := keyOwnedBy(entry, "n1")
	_, err := entry.Call(context.Background(), key, "incr", nil)
	require.NoError(t, err)

	frozen := c.nets["n1"]
	for name, fn := range c.nets {
		if name != "n1" {
			fn.Silence(frozen.IP())
			frozen.Silence(fn.IP())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body, err := entry.Call(ctx, key, "incr", nil)
	require.NoError(t, err, "the call waited for the frozen owner")
	require.Equal(t, uint64(2), binary.BigEndian.Uint64(body), "the first increment is kept, the second applied once")
	claim, _ := entry.Owner(entry.Partition(key))
	require.NotEqual(t, "n1", claim.Owner)
}
