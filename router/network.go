package router

import (
	"context"
	"net"

	"github.com/hashicorp/memberlist"
)

// Network provides a node's sockets. Nil means the operating system's.
// Tests use it to cut, delay and drop links (see internal/faultnet).
type Network interface {
	// Listen opens the RPC listener on addr (host:port).
	Listen(ctx context.Context, addr string) (net.Listener, error)
	// Dial opens an RPC connection to a peer at addr (host:port).
	Dial(ctx context.Context, addr string) (net.Conn, error)
	// Gossip returns the gossip transport, bound on bindAddr:bindPort (a
	// zero port picks a free one).
	Gossip(bindAddr string, bindPort int) (memberlist.NodeAwareTransport, error)
}
