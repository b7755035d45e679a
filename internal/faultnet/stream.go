package faultnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Listen opens a TCP listener on addr whose Accept closes connections from
// blocked peers.
func (n *Net) Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &listener{Listener: ln, n: n}, nil
}

// Dial opens a TCP connection to addr from this node's IP, unless addr's
// peer is blocked.
func (n *Net) Dial(ctx context.Context, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if n.isBlocked(&net.IPAddr{IP: net.ParseIP(host)}) {
		return nil, fmt.Errorf("faultnet: dial %s: %w", addr, ErrBlocked)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: n.ip}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return n.track(c)
}

// dialTimeout is Dial with a timeout instead of a context.
func (n *Net) dialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return n.Dial(ctx, addr)
}

// listener drops connections from blocked peers and tracks the others.
type listener struct {
	net.Listener
	n *Net
}

// Accept returns the next connection from a peer that is not blocked.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc, err := l.n.track(c)
		if errors.Is(err, ErrBlocked) {
			continue
		}
		return tc, err
	}
}
