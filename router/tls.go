package router

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
)

// checkTLS rejects a Config.TLS that cannot work both ways: every node
// accepts its peers' connections as a TLS server and dials them as a TLS
// client, which must present a certificate where servers require one.
func checkTLS(c *tls.Config) error {
	if len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetConfigForClient == nil {
		return errors.New("router: Config.TLS holds no certificate (Certificates, GetCertificate or GetConfigForClient): every node serves its peers' RPC connections")
	}
	requires := c.ClientAuth == tls.RequireAnyClientCert || c.ClientAuth == tls.RequireAndVerifyClientCert
	if requires && len(c.Certificates) == 0 && c.GetClientCertificate == nil {
		return errors.New("router: Config.TLS requires client certificates but has none to present (Certificates or GetClientCertificate): every node dials its peers too")
	}
	return nil
}

// tlsListener accepts the server ends of TLS connections with config.
type tlsListener struct {
	net.Listener
	config *tls.Config
}

// Accept implements net.Listener. The handshake runs on the connection's
// first read, under the RPC handshake's deadline.
func (l tlsListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tlsConn{tls.Server(nc, l.config)}, nil
}

// tlsConn is a TLS connection whose Close closes the socket without
// sending close_notify first: tls.Conn's would wait up to 5 s for a peer
// that stopped reading, holding whoever closes the link (a node's Close, a
// departed peer's drop). RPC frames carry their lengths, so the alert
// protects nothing here.
type tlsConn struct{ *tls.Conn }

// Close implements net.Conn.
func (c tlsConn) Close() error { return c.NetConn().Close() }

// dialTLS returns dial (nil: a net.Dialer's) with each connection made the
// client end of a TLS connection with config, its handshake done within
// the dial's ctx. The peer's certificate is verified against
// config.ServerName or, when that is empty, the host of the address
// dialed.
func dialTLS(dial func(ctx context.Context, addr string) (net.Conn, error), config *tls.Config) func(ctx context.Context, addr string) (net.Conn, error) {
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c := config
		if c.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("router: TLS to %s: %w", addr, err)
			}
			c = c.Clone()
			c.ServerName, _, _ = strings.Cut(host, "%") // an IPv6 zone is no part of a SAN
		}
		nc, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(nc, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("router: TLS handshake with %s: %w", addr, err)
		}
		return tlsConn{tc}, nil
	}
}
