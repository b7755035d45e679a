package rpc

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCallNodeRefusesAnotherNodeAtTheAddress calls node "b" at an address
// where node "server" answers (b's address, reused): the handshake must be
// refused and the handler never run. A call to the right name, and a call
// that names none, go through.
func TestCallNodeRefusesAnotherNodeAtTheAddress(t *testing.T) {
	requireNoLeaks(t)
	ran := make(chan struct{}, 3)
	srv := startServer(t, nil, func(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
		ran <- struct{}{}
		return echo(ctx, typ, body)
	})
	c := newClient(t, ClientConfig{})
	addr := srv.Addr().String()

	_, err := c.CallNode(context.Background(), "b", addr, 1, nil)
	require.ErrorIs(t, err, ErrRefused)
	require.ErrorContains(t, err, `it is node "server", not "b"`)
	require.Empty(t, ran, "nothing may run on the wrong node")

	_, err = c.CallNode(context.Background(), "server", addr, 1, nil)
	require.NoError(t, err)
	_, err = c.Call(context.Background(), addr, 1, nil)
	require.NoError(t, err)
}
