package router

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// checkTLS rejects a Config.TLS that cannot serve: every node accepts its
// peers' connections as a TLS server.
func checkTLS(c *tls.Config) error {
	if len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetConfigForClient == nil {
		return errors.New("router: Config.TLS holds no certificate (Certificates, GetCertificate or GetConfigForClient): every node serves its peers' RPC connections")
	}
	return nil
}

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
			c.ServerName = host
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
		return tc, nil
	}
}
