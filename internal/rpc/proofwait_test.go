package rpc

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/stretchr/testify/require"
)

// TestServerDoesNotWaitForeverForTheClientsProof sends a greeting, reads
// the server's, and never sends the proof: HandshakeTimeout must cover the
// wait for it, so the server drops the connection and, closed, leaves no
// goroutine.
func TestServerDoesNotWaitForeverForTheClientsProof(t *testing.T) {
	requireNoLeaks(t)
	srv, err := Serve(ServerConfig{
		Listener: listen(t), Hello: Hello{Cluster: "test", Node: "server"}, Secret: []byte("k"),
		Handler:          func(context.Context, uint8, []byte) ([]byte, error) { return nil, nil },
		HandshakeTimeout: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })

	nc, err := net.Dial("tcp", srv.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	bw, br := bufio.NewWriter(nc), bufio.NewReader(nc)
	own := greeting{hello: Hello{Cluster: "test", Node: "silent"}, nonce: newNonce()}
	require.NoError(t, wire.WriteFrame(bw, wire.Frame{Type: helloType, Body: own.encode()}))
	require.NoError(t, bw.Flush())
	_, err = wire.ReadFrame(br, maxHelloFrame)
	require.NoError(t, err)
	_, err = wire.ReadFrame(br, maxHelloFrame) // blocks until the server drops it
	require.ErrorIs(t, err, io.EOF)
}
