package rpc

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/stretchr/testify/require"
)

// bigBody is far larger than the socket buffers the tests below leave to
// a peer that does not read, so that writing it blocks.
var bigBody = make([]byte, 1<<20)

// smallReadBuffer shrinks nc's receive buffer, so that what a peer sends
// to it and nobody reads fills it at once.
func smallReadBuffer(t *testing.T, nc net.Conn) {
	require.NoError(t, nc.(*net.TCPConn).SetReadBuffer(4096))
}

// TestServerDropsAClientThatStopsReading: a client sends requests and never
// reads the answers. Once the socket's buffers are full the server's writer
// cannot go on; it must drop the connection after WriteTimeout instead of
// holding it, its writer and the handlers queued behind it, for as long as
// the client stays connected.
func TestServerDropsAClientThatStopsReading(t *testing.T) {
	requireNoLeaks(t)
	ts := &testServer{}
	srv, err := Serve(ServerConfig{
		Listener:     listen(t),
		Handler:      func(context.Context, uint8, []byte) ([]byte, error) { return bigBody, nil },
		Hello:        Hello{Cluster: "test", Node: "server"},
		WriteTimeout: 500 * time.Millisecond,
		Logger:       ts.log.logger(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })

	nc := rawHandshake(t, srv.Addr().String())
	defer nc.Close()
	smallReadBuffer(t, nc)
	for id := range uint64(16) {
		_, err := nc.Write(frameBytes(t, wire.Frame{ID: id + 1, Type: 1}))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		log := ts.log.String()
		return strings.Contains(log, "dropped connection") && strings.Contains(log, "i/o timeout")
	}, 10*time.Second, time.Millisecond, "the server still holds the connection; its log:\n%s", ts.log.String())
}

// TestCallFailsWhenTheServerStopsReading: the server completes the
// handshake and then reads nothing. The client's writer blocks on the full
// socket; after WriteTimeout the connection must be dropped and the call on
// it fail with ErrConnClosed, where before it waited for as long as the
// server stayed connected (its context was the only way out).
func TestCallFailsWhenTheServerStopsReading(t *testing.T) {
	requireNoLeaks(t)
	ln := listen(t)
	t.Cleanup(func() { ln.Close() })
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		smallReadBuffer(t, nc)
		if _, _, err := serverHandshake(newLink(nc, time.Minute), Hello{Cluster: "test", Node: "server"}, 4<<20, nil, nil); err != nil {
			return
		}
		<-stop // reads nothing until the test ends
	}()

	c := newClient(t, ClientConfig{
		WriteTimeout: 500 * time.Millisecond,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err == nil {
				err = nc.(*net.TCPConn).SetWriteBuffer(4096)
			}
			return nc, err
		},
	})
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), ln.Addr().String(), 1, bigBody)
		done <- err
	}()
	err := waitResult(t, done)
	require.ErrorIs(t, err, ErrConnClosed)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
}

// deadlineConn records the write deadlines set on it and the size of each
// write; each write takes perWrite of the test's clock.
type deadlineConn struct {
	net.Conn
	deadlines []time.Time
	writes    []int
	now       *time.Time
	perWrite  time.Duration
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.deadlines = append(c.deadlines, t)
	return nil
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, len(p))
	*c.now = c.now.Add(c.perWrite)
	return len(p), nil
}

// TestWriteDeadlineMovesOnOnceHalfOfItIsUsed drives deadlineWriter's
// clock: a write gets a new deadline only when less than half the timeout
// is left (after an idle spell too, when the old one has passed), and a
// large write is cut into pieces, each of which may move it on.
func TestWriteDeadlineMovesOnOnceHalfOfItIsUsed(t *testing.T) {
	start := time.Unix(1000, 0)
	now := start
	nc := &deadlineConn{now: &now}
	w := &deadlineWriter{nc: nc, timeout: 10 * time.Second, now: func() time.Time { return now }}
	write := func(n int) {
		t.Helper()
		k, err := w.Write(make([]byte, n))
		require.NoError(t, err)
		require.Equal(t, n, k)
	}

	write(10)
	require.Equal(t, []time.Time{start.Add(10 * time.Second)}, nc.deadlines, "the first write sets a deadline")
	now = start.Add(4 * time.Second)
	write(10)
	require.Len(t, nc.deadlines, 1, "more than half of the timeout was left")
	now = start.Add(6 * time.Second)
	write(10)
	require.Equal(t, now.Add(10*time.Second), nc.deadlines[1], "less than half was left")
	now = start.Add(time.Hour)
	write(10)
	require.Equal(t, now.Add(10*time.Second), nc.deadlines[2], "the deadline passed while the link was idle")

	nc.writes = nil
	write(2*bufferSize + 1)
	require.Equal(t, []int{bufferSize, bufferSize, 1}, nc.writes, "a large write goes in pieces")
	require.Len(t, nc.deadlines, 3)

	// A slow link: each piece takes 3 s. The first two start with 10 s
	// and 7 s left, the third with 4 s: it gets a new deadline.
	nc.perWrite = 3 * time.Second
	now = now.Add(10 * time.Second)
	write(3 * bufferSize)
	third := now.Add(-nc.perWrite)
	require.Equal(t, []time.Time{third.Add(-6 * time.Second).Add(10 * time.Second), third.Add(10 * time.Second)}, nc.deadlines[3:],
		"a piece that starts with less than half the timeout left gets a new deadline")
}
