package rpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/stretchr/testify/require"
)

// rawHandshake opens a raw connection and completes a valid handshake.
func rawHandshake(t *testing.T, addr string) net.Conn {
	return rawHandshakeWith(t, addr, nil)
}

// rawHandshakeWith opens a raw connection and completes a handshake,
// proving knowledge of secret.
func rawHandshakeWith(t *testing.T, addr string, secret []byte) net.Conn {
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	bw := bufio.NewWriter(nc)
	own := greeting{hello: Hello{Cluster: "test"}, nonce: newNonce()}
	require.NoError(t, wire.WriteFrame(bw, wire.Frame{Type: helloType, Body: own.encode()}))
	require.NoError(t, bw.Flush())
	f, err := wire.ReadFrame(bufio.NewReader(nc), maxHelloFrame)
	require.NoError(t, err)
	require.Equal(t, wire.FlagResponse, f.Flags)
	peer, err := decodeGreeting(f.Body)
	require.NoError(t, err)
	proof := transcript{cluster: "test", client: own, server: peer}.prove(secret, clientRole)
	require.NoError(t, wire.WriteFrame(bw, wire.Frame{Type: helloType, Body: proof}))
	require.NoError(t, bw.Flush())
	return nc
}

func frameBytes(t *testing.T, f wire.Frame) []byte {
	var buf bufferWriter
	bw := bufio.NewWriter(&buf)
	require.NoError(t, wire.WriteFrame(bw, f))
	require.NoError(t, bw.Flush())
	return buf.b
}

type bufferWriter struct{ b []byte }

func (w *bufferWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// TestGarbageDropsOnlyThatConnection sends garbage of several kinds, before
// and after the handshake. The server must drop that connection, log why,
// and keep serving a client connected before and one connecting after.
func TestGarbageDropsOnlyThatConnection(t *testing.T) {
	requireNoLeaks(t)
	srv := startServer(t, nil, echo)
	addr := srv.Addr().String()
	c := newClient(t, ClientConfig{})
	_, err := c.Call(context.Background(), addr, 1, []byte("before"))
	require.NoError(t, err)

	oversized := binary.BigEndian.AppendUint32(nil, 1<<31)
	short := binary.BigEndian.AppendUint32(nil, 3)
	cases := []struct {
		name      string
		handshake bool
		garbage   []byte
	}{
		{"http instead of hello", false, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"hello with malformed body", false, frameBytes(t, wire.Frame{Type: helloType, Body: []byte{9, 'x'}})},
		{"request instead of hello", false, frameBytes(t, wire.Frame{ID: 1, Type: 5})},
		{"oversized length", true, oversized},
		{"length below header", true, append(short, 1, 2, 3)},
		{"response sent to a server", true, frameBytes(t, wire.Frame{ID: 1, Type: 1, Flags: wire.FlagResponse})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.log.String()
			var nc net.Conn
			if tc.handshake {
				nc = rawHandshake(t, addr)
			} else {
				nc, err = net.Dial("tcp", addr)
				require.NoError(t, err)
			}
			defer nc.Close()
			_, err := nc.Write(tc.garbage)
			require.NoError(t, err)

			// The server hangs up: reading ends (EOF or reset), without a
			// reply. The deadline only guards against a hang.
			require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
			got, err := io.ReadAll(nc)
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "server did not drop the connection")
			if !tc.handshake {
				require.Empty(t, got)
			}
			require.Eventually(t, func() bool { return len(srv.log.String()) > len(before) }, 5*time.Second, time.Millisecond)
			require.Regexp(t, `rpc: (refused|dropped) connection`, srv.log.String()[len(before):])

			_, err = c.Call(context.Background(), addr, 2, []byte("still here"))
			require.NoError(t, err)
		})
	}
	fresh := newClient(t, ClientConfig{})
	_, err = fresh.Call(context.Background(), addr, 3, []byte("after"))
	require.NoError(t, err)
}
