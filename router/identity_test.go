package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/internal/rpc"
	"github.com/singlewriter/singlewriter/owner"
	"github.com/stretchr/testify/require"
)

// TestMessageForANodeIsNotAnsweredByAnother stops n1 and starts, on n1's
// RPC address, a server of the same cluster that answers as another node
// (a restarted container given the old IP, a port reused on one host).
// Until failure detection, n0's table still maps n1 to that address. A
// protocol message n0 sends to n1 must not be answered by that other node:
// a promise or a replication acknowledgement counted as n1's would break
// the majority the ownership protocol relies on.
func TestMessageForANodeIsNotAnsweredByAnother(t *testing.T) {
	c := newTestCluster(t, 2, nil)
	n0, n1 := c.nodes[0], c.nodes[1]
	addr := n1.server.Addr().String()
	require.NoError(t, n1.Close())

	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	var misdelivered atomic.Int64
	impostor, err := rpc.Serve(rpc.ServerConfig{
		Listener: ln,
		Hello:    rpc.Hello{Cluster: fmt.Sprintf("%+v", n0.cfg.fingerprint()), Node: "impostor"},
		Handler: func(context.Context, uint8, []byte) ([]byte, error) {
			misdelivered.Add(1)
			return nil, errors.New("impostor")
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, impostor.Close()) })

	m, ok := n0.ring.Table().Member("n1")
	if !ok || m.RPCAddr != addr {
		t.Skip("n0 already dropped n1 from its table; the window this test needs has closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = transport{n0}.Prepare(ctx, "n1", owner.Prepare{P: 0, Ballot: 1 << 40})
	require.Error(t, err)
	require.Zero(t, misdelivered.Load(), "a message for n1 reached the node now at n1's old address")
}

// TestRPCFromOutsiderWithoutTheSecretIsRefused runs a cluster with a
// SecretKey: its nodes forward calls to each other, and a process that
// does not know the key, connecting to a node's RPC port with the
// handshake any node of that cluster sends (its fingerprint is all
// defaults here, so guessable), is refused like at the gossip port: whoever
// passes the handshake can run handlers and send the ownership protocol's
// messages.
func TestRPCFromOutsiderWithoutTheSecretIsRefused(t *testing.T) {
	c, key, ran := newCountingPair(t, func(n *Node) { n.cfg.SecretKey = []byte("0123456789abcdef") })
	err := callAsOutsider(c.nodes[1], key, nil)
	require.ErrorIs(t, err, rpc.ErrRefused)
	require.Equal(t, int64(1), ran.Load(), "the outsider's call ran")
}
