package rpc

import (
	"bufio"
	"context"
	"errors"
	"net"
	"testing"

	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/stretchr/testify/require"
)

// TestOversizeRequestFailsOnlyItself sends, on a connection with a call in
// flight, a request that fits the client's MaxFrame but not the server's
// (the router's client and server use different limits). Only that request
// may fail, and with a reason naming the limit: the call in flight must
// still get its answer, and the connection must survive.
func TestOversizeRequestFailsOnlyItself(t *testing.T) {
	requireNoLeaks(t)
	const serverMax = 1024
	entered := make(chan struct{})
	release := make(chan struct{})
	ln := listen(t)
	srv, err := Serve(ServerConfig{Listener: ln, MaxFrame: serverMax, Handler: func(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
		if typ == 1 {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return echo(ctx, typ, body)
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	c := newClient(t, ClientConfig{}) // default MaxFrame, far above serverMax
	addr := ln.Addr().String()

	inFlight := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), addr, 1, []byte("held"))
		inFlight <- err
	}()
	<-entered

	_, err = c.Call(context.Background(), addr, 2, make([]byte, serverMax))
	require.Error(t, err)
	require.ErrorContains(t, err, wire.ErrFrameTooLarge.Error(), "the caller must learn why")

	close(release)
	require.NoError(t, waitResult(t, inFlight), "an unrelated call in flight must not fail")
}

// TestHelloWithTinyMaxFrameIsRefused sends a hello whose MaxFrame cannot
// hold a frame header: the server must refuse it, not cut its answers to
// a negative length.
func TestHelloWithTinyMaxFrameIsRefused(t *testing.T) {
	requireNoLeaks(t)
	srv := startServer(t, nil, func(context.Context, uint8, []byte) ([]byte, error) {
		return nil, errors.New("any error text")
	})
	nc, err := net.Dial("tcp", srv.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	bw := bufio.NewWriter(nc)
	require.NoError(t, wire.WriteFrame(bw, wire.Frame{Type: helloType, Body: greeting{hello: Hello{Cluster: "test"}, maxFrame: 1, nonce: newNonce()}.encode()}))
	require.NoError(t, wire.WriteFrame(bw, wire.Frame{ID: 1, Type: 1}))
	require.NoError(t, bw.Flush())

	br := bufio.NewReader(nc)
	for {
		// The server drops the connection, answering no request.
		f, err := wire.ReadFrame(br, maxHelloFrame)
		if err != nil {
			break
		}
		require.Zero(t, f.ID, "a request was answered")
	}
	require.Zero(t, srv.accepted.Load())
}
