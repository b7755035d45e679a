package rpc

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDropNodeFailsTheCallsInFlightToThatNodeOnly holds two calls in their
// handlers, one to node "server" and one to an address with no node named,
// drops node "server", and checks that only its call fails, with the cause,
// and that the next call to it dials again.
func TestDropNodeFailsTheCallsInFlightToThatNodeOnly(t *testing.T) {
	requireNoLeaks(t)
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	hold := func(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
		if typ == 1 {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return echo(ctx, typ, body)
	}
	dropped, other := startServer(t, nil, hold), startServer(t, nil, hold)
	c := newClient(t, ClientConfig{})

	toDropped := make(chan error, 1)
	go func() {
		_, err := c.CallNode(context.Background(), "server", dropped.Addr().String(), 1, nil)
		toDropped <- err
	}()
	toOther := goCall(context.Background(), c, other.Addr().String(), 1)
	<-arrived
	<-arrived

	gone := errors.New("gone from the cluster")
	c.DropNode("server", gone)
	err := waitResult(t, toDropped)
	require.ErrorIs(t, err, ErrConnClosed)
	require.ErrorIs(t, err, gone)
	select {
	case err := <-toOther:
		t.Fatalf("the call to the other address ended: %v", err)
	default:
	}

	close(release)
	require.NoError(t, waitResult(t, toOther))
	resp, err := c.CallNode(context.Background(), "server", dropped.Addr().String(), 2, []byte("again"))
	require.NoError(t, err)
	require.Equal(t, []byte("\x02again"), resp)
}
