package router

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
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
