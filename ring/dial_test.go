package ring

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// Config.AdvertisePort is ignored when BindPort is zero (its doc), as with
// memberlist's own transport: the ring advertises the port it bound.
func TestAdvertisePortIsIgnoredWithAPortChosenByTheSystem(t *testing.T) {
	cfg := testConfig("a")
	cfg.AdvertiseAddr, cfg.AdvertisePort = "127.0.0.1", 1
	r, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	_, port, err := net.SplitHostPort(r.GossipAddr())
	require.NoError(t, err)
	require.NotEqual(t, "1", port, "the ring advertises AdvertisePort, not the port it bound")
}
