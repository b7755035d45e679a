package router

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPayloadWithinMaxPayloadReachesRemoteOwner calls, through a node that
// does not own the key, with a payload that Config.MaxPayload allows but
// that exceeds the RPC client's default 16 MiB frame: the node's client
// must use the limit its server does, not refuse the call (and retry the
// refusal until the context ends).
func TestPayloadWithinMaxPayloadReachesRemoteOwner(t *testing.T) {
	const maxPayload = 20 << 20
	c := newTestCluster(t, 2, func(n *Node) {
		n.cfg.MaxPayload = maxPayload
		n.Handle("size", func(_ context.Context, req *Request) ([]byte, error) {
			return strconv.AppendInt(nil, int64(len(req.Payload)), 10), nil
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	entry := c.nodes[0]
	key := keyOwnedBy(entry, "n1")

	const size = 17 << 20
	resp, err := entry.Call(ctx, key, "size", make([]byte, size))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(size), string(resp))
}

// TestCallTooLargeForAFrameFailsAtOnce calls a remote owner with a payload
// at MaxPayload and a long method name: together they exceed the frame
// between nodes. The call can never be delivered, so it must fail at once
// with an error saying so, not be retried until its context ends (before
// the client and the server shared a frame limit, each retry also dropped
// the connection, failing every other call in flight to that node).
func TestCallTooLargeForAFrameFailsAtOnce(t *testing.T) {
	c := newTestCluster(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	entry := c.nodes[0]
	key := keyOwnedBy(entry, "n1")

	_, err := entry.Call(ctx, key, strings.Repeat("m", 128<<10), make([]byte, entry.cfg.MaxPayload))
	require.Error(t, err)
	require.ErrorIs(t, err, ErrPayloadTooLarge, "an undeliverable call is not a partition being unavailable")
	require.NoError(t, ctx.Err(), "the call must not wait for its context to end")
}
