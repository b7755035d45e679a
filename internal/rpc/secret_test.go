package rpc

import (
	"bufio"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/stretchr/testify/require"
)

// serveWithSecret serves, on a fresh loopback port, a handler that counts
// the requests it runs, for a cluster with secret.
func serveWithSecret(t *testing.T, secret []byte, runs *atomic.Int64) *Server {
	srv, err := Serve(ServerConfig{
		Listener: listen(t),
		Hello:    Hello{Cluster: "test", Node: "server"},
		Secret:   secret,
		Handler: func(_ context.Context, _ uint8, body []byte) ([]byte, error) {
			runs.Add(1)
			return body, nil
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	return srv
}

// With a secret, each end of a connection proves it knows it: a client
// without it is refused, and so is a server without it, and a client that
// skips checking the server's proof and sends a wrong one of its own
// never gets a request handled.
func TestBothEndsProveTheClusterSecret(t *testing.T) {
	requireNoLeaks(t)
	secret := []byte("0123456789abcdef")
	var runs atomic.Int64
	addr := serveWithSecret(t, secret, &runs).Addr().String()
	ctx := context.Background()

	member := newClient(t, ClientConfig{Secret: secret})
	out, err := member.Call(ctx, addr, 1, []byte("in"))
	require.NoError(t, err)
	require.Equal(t, "in", string(out))

	outsider := newClient(t, ClientConfig{})
	_, err = outsider.Call(ctx, addr, 1, []byte("in"))
	require.ErrorIs(t, err, ErrRefused)

	// An outsider that ignores the server's proof and sends a forged one.
	nc := rawHandshakeWith(t, addr, []byte("not the secret"))
	defer nc.Close()
	_, err = nc.Write(frameBytes(t, wire.Frame{ID: 1, Type: 1, Body: []byte("forged")}))
	require.NoError(t, err)
	_, err = wire.ReadFrame(bufio.NewReader(nc), maxHelloFrame)
	// A reset when the server closed with the forged request unread.
	require.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET),
		"the server must drop the connection, not answer: %v", err)
	require.Equal(t, int64(1), runs.Load(), "only the member's request may run")

	// A server without the secret cannot pass for a member.
	var otherRuns atomic.Int64
	unkeyed := serveWithSecret(t, nil, &otherRuns).Addr().String()
	_, err = member.Call(ctx, unkeyed, 1, []byte("in"))
	require.ErrorIs(t, err, ErrRefused)
	require.Zero(t, otherRuns.Load())
}
