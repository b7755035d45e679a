package rpc

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// netListen listens on a specific loopback address, as a restarted node
// would.
func netListen(addr string) (net.Listener, error) {
	return net.Listen("tcp", addr)
}

func TestHelloFromOtherClusterIsRefused(t *testing.T) {
	requireNoLeaks(t)
	srv := startServer(t, nil, echo)
	c := newClient(t, ClientConfig{Hello: Hello{Cluster: "other", Node: "intruder"}})

	_, err := c.Call(context.Background(), srv.Addr().String(), 1, nil)
	require.ErrorIs(t, err, ErrRefused)
	require.Contains(t, err.Error(), `cluster "other" is not "test"`)
	require.Zero(t, srv.accepted.Load())
	require.Eventually(t, func() bool { return len(srv.log.String()) > 0 }, 5*time.Second, time.Millisecond)
	require.Contains(t, srv.log.String(), "rpc: refused connection")
}

func TestServerHelloRejectedByClientIsRefused(t *testing.T) {
	requireNoLeaks(t)
	srv := startServer(t, nil, echo)
	wrong := errors.New("server from another cluster")
	c := newClient(t, ClientConfig{Accept: func(h Hello) error {
		require.Equal(t, Hello{Cluster: "test", Node: "server"}, h)
		return wrong
	}})

	_, err := c.Call(context.Background(), srv.Addr().String(), 1, nil)
	require.ErrorIs(t, err, ErrRefused)
	require.ErrorIs(t, err, wrong)
}

func TestClientCloseFailsInFlightCallsAndLaterCalls(t *testing.T) {
	requireNoLeaks(t)
	entered := make(chan struct{})
	srv := startServer(t, nil, func(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	c := NewClient(ClientConfig{Hello: Hello{Cluster: "test"}})

	done := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), srv.Addr().String(), 1, nil)
		done <- err
	}()
	<-entered
	require.NoError(t, c.Close())
	err := waitResult(t, done)
	require.ErrorIs(t, err, ErrConnClosed)
	require.ErrorIs(t, err, ErrClosed)

	require.NoError(t, c.Close(), "Close is idempotent")
	_, err = c.Call(context.Background(), srv.Addr().String(), 1, nil)
	require.ErrorIs(t, err, ErrClosed)
}

// TestCloseLeavesNoGoroutines exercises every goroutine kind (dial, reader,
// writer, accept loop, handlers blocked in flight) and closes both ends.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	ln := listen(t)
	entered := make(chan struct{}, 10)
	srv, err := Serve(ServerConfig{Listener: ln, Handler: func(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
		if typ == 1 {
			entered <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return body, nil
	}})
	require.NoError(t, err)
	c := NewClient(ClientConfig{})
	addr := ln.Addr().String()

	_, err = c.Call(context.Background(), addr, 0, []byte("warm"))
	require.NoError(t, err)
	done := make(chan error, 10)
	for range 10 {
		go func() {
			_, err := c.Call(context.Background(), addr, 1, nil)
			done <- err
		}()
	}
	for range 10 {
		<-entered
	}
	require.NotEmpty(t, leakedGoroutines(), "the leak check must see a running server")
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close(), "Close is idempotent")
	for range 10 {
		require.ErrorIs(t, waitResult(t, done), ErrConnClosed)
	}
	require.NoError(t, c.Close())

	require.Eventually(t, func() bool { return len(leakedGoroutines()) == 0 }, 5*time.Second, time.Millisecond)
}

func TestServeRejectsBadConfig(t *testing.T) {
	_, err := Serve(ServerConfig{Handler: echo})
	require.ErrorContains(t, err, "Listener")
	ln := listen(t)
	defer ln.Close()
	_, err = Serve(ServerConfig{Listener: ln})
	require.ErrorContains(t, err, "Handler")
	_, err = Serve(ServerConfig{Listener: ln, Handler: echo, MaxFrame: 3})
	require.ErrorContains(t, err, "MaxFrame 3")
	_, err = Serve(ServerConfig{Listener: ln, Handler: echo, WriteTimeout: -time.Second})
	require.ErrorContains(t, err, "WriteTimeout -1s")
	require.Panics(t, func() { NewClient(ClientConfig{DialTimeout: -time.Second}) })
	require.Panics(t, func() { NewClient(ClientConfig{WriteTimeout: -time.Second}) })
}
