package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/singlewriter/singlewriter/internal/faultnet"
	"github.com/singlewriter/singlewriter/internal/rpc"
	"github.com/stretchr/testify/require"
)

// stallingNetwork is a Network that reports its RPC listener's address and
// holds Start when it asks for the gossip transport, until release closes.
type stallingNetwork struct {
	*faultnet.Net
	listening chan string
	release   chan struct{}
}

func (s *stallingNetwork) Listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := s.Net.Listen(ctx, addr)
	if err == nil {
		s.listening <- ln.Addr().String()
	}
	return ln, err
}

func (s *stallingNetwork) Gossip(bindAddr string, bindPort int) (memberlist.NodeAwareTransport, error) {
	<-s.release
	return s.Net.Gossip(bindAddr, bindPort)
}

// A restarted node's peers still know its RPC address and may call it the
// moment it listens, but its handlers need its ring (a Sync fetches from a
// peer found there): the harness saw a restarting node crash on one. The
// node answers nothing until Start has built its ring.
func TestNodeAnswersNoRPCBeforeItsRingExists(t *testing.T) {
	fn := faultnet.New(net.IPv4(127, 0, 1, 60), 1)
	sn := &stallingNetwork{Net: fn, listening: make(chan string, 1), release: make(chan struct{})}
	n, err := New(Config{
		Name: "n", DataDir: t.TempDir(), Bootstrap: true, Network: sn,
		RPCAddr: fn.IP().String() + ":0", GossipAddr: fn.IP().String() + ":0",
	})
	require.NoError(t, err)
	defer n.Close()
	require.False(t, n.Settled(), "settled before Start")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- n.Start(ctx) }()
	addr := <-sn.listening
	// A readiness probe or an early caller, racing Start.
	require.False(t, n.Settled(), "settled while Start has no ring yet")
	require.Empty(t, n.Members())
	require.Empty(t, n.GossipAddr())
	_, err = n.Call(ctx, []byte("k"), "no-such-method", nil)
	require.ErrorIs(t, err, ErrClosed)

	peer := rpc.NewClient(rpc.ClientConfig{Hello: rpc.Hello{Cluster: fmt.Sprintf("%+v", n.cfg.fingerprint()), Node: "peer"}})
	defer peer.Close()
	call := callRequest{ID: []byte("id"), Key: []byte("k"), Method: "no-such-method"}.encode()
	early, cancelEarly := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelEarly()
	_, err = peer.Call(early, addr, msgCall, call)
	require.ErrorIs(t, err, context.DeadlineExceeded, "answered while Start had no ring yet")

	close(sn.release)
	require.NoError(t, <-started)
	// Only the key's owner says that it has no such method; a bootstrap
	// node serves its partitions soon after Start.
	waitFor(t, 10*time.Second, func() error {
		if _, ok := n.Serving(n.Partition([]byte("k"))); !ok {
			return errors.New("the key's partition is not served yet")
		}
		return nil
	})
	b, err := peer.Call(ctx, addr, msgCall, call)
	require.NoError(t, err)
	r, err := decodeCallResponse(b)
	require.NoError(t, err)
	require.Equal(t, statusUnknownMethod, r.Status)
}
