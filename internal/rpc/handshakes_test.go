package rpc

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Connections that never send their handshake (a flood of silent peers)
// are held maxHandshakes at a time: one more is closed at once instead of
// holding a goroutine and its buffers for HandshakeTimeout, and the
// refusal is logged. A client connects again once the silent ones are
// gone.
func TestConnectionsBeyondTheHandshakeLimitAreClosedAtOnce(t *testing.T) {
	ts := startServer(t, nil, echo)
	addr := ts.Addr().String()
	silent := make([]net.Conn, 0, maxHandshakes)
	for range maxHandshakes {
		nc, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		silent = append(silent, nc)
	}
	// The server accepts in order: the silent ones hold every slot (for
	// HandshakeTimeout, 5 s), and the next connection finds none.
	extra, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer extra.Close()
	require.NoError(t, extra.SetReadDeadline(time.Now().Add(defaultHandshakeTimeout/2)))
	_, err = extra.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "a connection beyond the limit was kept waiting for its handshake")
	require.Contains(t, ts.log.String(), "too many connections in their handshake")

	for _, nc := range silent {
		require.NoError(t, nc.Close())
	}
	c := newClient(t, ClientConfig{})
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.Call(ctx, addr, 1, []byte("hi"))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "no client could connect once the silent connections were gone")
}
