package pgserver

import (
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeServer accepts one connection, reads its startup message and answers
// with the given messages.
func fakeServer(t *testing.T, answer ...[]byte) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	t.Cleanup(func() { l.Close() }) // runs first: ends a pending Accept
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var n [4]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(n[:])-4)); err != nil {
			return
		}
		for _, m := range answer {
			c.Write(m)
		}
		io.Copy(io.Discard, c) // until the client hangs up
	}()
	return l.Addr().String()
}

// message frames a server message.
func message(typ byte, body ...byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{typ}, uint32(4+len(body))), body...)
}

func TestSessionReturnsReportedParametersWhenReady(t *testing.T) {
	addr := fakeServer(t,
		message('R', 0, 0, 0, 0),
		message('S', []byte("server_version\x0015.0\x00")...),
		message('K', 0, 0, 0, 1, 0, 0, 0, 2),
		message('Z', 'I'))
	params, err := session(t.Context(), addr, "u")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"server_version": "15.0"}, params)
}

func TestSessionReportsTheServersError(t *testing.T) {
	addr := fakeServer(t, message('E', []byte("SFATAL\x00C57P03\x00Mthe database system is starting up\x00\x00")...))
	_, err := session(t.Context(), addr, "u")
	require.ErrorContains(t, err, "FATAL 57P03: the database system is starting up")
}

func TestSessionRefusesAPasswordRequest(t *testing.T) {
	addr := fakeServer(t, message('R', 0, 0, 0, 5, 1, 2, 3, 4)) // AuthenticationMD5Password
	_, err := session(t.Context(), addr, "u")
	require.ErrorContains(t, err, "expected trust")
}
