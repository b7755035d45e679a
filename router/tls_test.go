package router

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testCA signs certificates for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// leaf returns a certificate for 127.0.0.1 signed by ca, good for both
// ends of a connection.
func (ca *testCA) leaf(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// mutualTLS is a node's configuration with a certificate from own,
// trusting peers whose certificates trusted signed, both ways.
func mutualTLS(t testing.TB, own, trusted *testCA) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{own.leaf(t)},
		RootCAs:      trusted.pool,
		ClientCAs:    trusted.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
}

// TestRPCOverTLSRefusesPeersWithoutTheClustersCertificate runs a cluster
// whose RPC is mutual TLS: a call forwarded between its nodes runs, and a
// process sending the same request to a node's RPC port runs it only over
// TLS with a certificate of the cluster's CA, not over plain TCP nor with
// a certificate of another CA.
func TestRPCOverTLSRefusesPeersWithoutTheClustersCertificate(t *testing.T) {
	cluster, other := newTestCA(t, "cluster"), newTestCA(t, "other")
	c, key, ran := newCountingPair(t, func(n *Node) { n.cfg.TLS = mutualTLS(t, cluster, cluster) })
	n1 := c.nodes[1]
	require.Error(t, callAsOutsider(n1, key, nil), "plain TCP")
	require.Error(t, callAsOutsider(n1, key, dialTLS(nil, mutualTLS(t, other, cluster))), "a certificate of another CA")
	require.Equal(t, int64(1), ran.Load(), "an outsider's call ran")
	require.NoError(t, callAsOutsider(n1, key, dialTLS(nil, mutualTLS(t, cluster, cluster))), "a certificate of the cluster's CA")
	require.Equal(t, int64(2), ran.Load())
}

// TestDialRefusesAPeerWhoseCertificateTheClusterDidNotSign checks the
// other direction: a node's dial verifies the certificate of the server it
// reaches.
func TestDialRefusesAPeerWhoseCertificateTheClusterDidNotSign(t *testing.T) {
	cluster, other := newTestCA(t, "cluster"), newTestCA(t, "other")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		nc, err := tlsListener{ln, mutualTLS(t, other, cluster)}.Accept()
		if err == nil {
			_ = nc.(tlsConn).Handshake()
			nc.Close()
		}
	}()
	_, err = dialTLS(nil, mutualTLS(t, cluster, cluster))(context.Background(), ln.Addr().String())
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown)
}

// writeCounter counts the bytes written through it.
type writeCounter struct {
	net.Conn
	n atomic.Int64
}

func (c *writeCounter) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return c.Conn.Write(b)
}

// TestClosingATLSLinkSendsNothing checks that closing a TLS connection
// sends no close_notify alert, whose write waits up to 5 s when the peer
// stopped reading and the socket's buffer is full: a link's close must not
// hold a node's Close, or the drop of a frozen peer, that long.
func TestClosingATLSLinkSendsNothing(t *testing.T) {
	ca := newTestCA(t, "cluster")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := tlsListener{ln, mutualTLS(t, ca, ca)}.Accept()
		if err == nil {
			_ = nc.(tlsConn).Handshake()
			accepted <- nc
		}
	}()
	var counter *writeCounter
	dial := dialTLS(func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := net.Dial("tcp", addr)
		counter = &writeCounter{Conn: nc}
		return counter, err
	}, mutualTLS(t, ca, ca))
	c, err := dial(context.Background(), ln.Addr().String())
	require.NoError(t, err)
	defer (<-accepted).Close()
	written := counter.n.Load()
	require.NoError(t, c.Close())
	require.Equal(t, written, counter.n.Load(), "Close wrote to the peer")
}

// TestNewKeepsACopyOfAWorkableTLSConfig checks New's handling of
// Config.TLS: a configuration that can serve and dial is kept as a copy,
// and one that requires client certificates without one to present is
// refused (its dials would all fail).
func TestNewKeepsACopyOfAWorkableTLSConfig(t *testing.T) {
	ca := newTestCA(t, "cluster")
	conf := mutualTLS(t, ca, ca)
	n, err := New(Config{Name: "n0", DataDir: t.TempDir(), TLS: conf})
	require.NoError(t, err)
	defer n.Close()
	require.False(t, conf == n.cfg.TLS, "New kept the caller's *tls.Config, which the caller may change")
	require.Equal(t, conf.Certificates, n.cfg.TLS.Certificates)

	serverOnly := conf.Clone()
	serverOnly.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &conf.Certificates[0], nil }
	serverOnly.Certificates = nil
	_, err = New(Config{Name: "n1", DataDir: t.TempDir(), TLS: serverOnly})
	require.ErrorContains(t, err, "Config.TLS requires client certificates")
	serverOnly.ClientAuth = tls.NoClientCert
	n1, err := New(Config{Name: "n1", DataDir: t.TempDir(), TLS: serverOnly})
	require.NoError(t, err, "a server-only certificate where no client certificate is required")
	n1.Close()
}
