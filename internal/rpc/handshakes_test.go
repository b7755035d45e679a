package rpc

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Connections that never send their handshake (a flood of idle
// connections) are held maxHandshakes at a time: a new one closes the
// oldest instead of each holding a goroutine and its buffers for
// HandshakeTimeout, and a peer still gets through while they stay open.
func TestConnectionsBeyondTheHandshakeLimitCloseTheOldest(t *testing.T) {
	ts := startServer(t, nil, echo)
	addr := ts.Addr().String()
	silent := make([]net.Conn, 0, maxHandshakes)
	for range maxHandshakes {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer nc.Close()
		silent = append(silent, nc)
	}

	c := newClient(t, ClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := c.Call(ctx, addr, 1, []byte("hi"))
	require.NoError(t, err, "a client could not connect past idle connections")
	require.Equal(t, "\x01hi", string(got))

	require.NoError(t, silent[0].SetReadDeadline(time.Now().Add(defaultHandshakeTimeout/2)))
	_, err = silent[0].Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the oldest idle connection was kept in its handshake")
	require.Contains(t, ts.log.String(), "too many connections in their handshake")
}
