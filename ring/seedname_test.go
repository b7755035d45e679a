package ring

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSeedGivenByHostNameIsNotRejoinedOnceAMember joins b through its seed
// a given by host name ("localhost:port", as a DNS name is in most
// deployments) and checks that the reconnect round does not re-join a seed
// that is already a live member: each re-join is a full push/pull of
// memberlist's and the Delegate's state, every reconnect interval, for as
// long as the node runs.
func TestSeedGivenByHostNameIsNotRejoinedOnceAMember(t *testing.T) {
	t.Run("ip", func(t *testing.T) { testSeedNotRejoined(t, "127.0.0.1") })
	t.Run("host name", func(t *testing.T) { testSeedNotRejoined(t, "localhost") })
}

// testSeedNotRejoined joins b through a's port on host, which must reach
// a's loopback address.
func testSeedNotRejoined(t *testing.T, host string) {
	ca := testConfig("a")
	ca.PushPullInterval = time.Hour // no periodic push/pull to count
	ca.Delegate = newRecordingDelegate("a")
	a := start(t, ca)
	_, port, err := net.SplitHostPort(a.GossipAddr())
	require.NoError(t, err)

	cb := testConfig("b", net.JoinHostPort(host, port))
	cb.PushPullInterval = time.Hour
	d := newRecordingDelegate("b")
	cb.Delegate = d
	b := start(t, cb)
	waitTable(t, b, 10*time.Second, "b sees a", hasMembers("a", "b"))
	receive(t, d.merged, "a", 10*time.Second) // the join's push/pull
	merges := len(d.merged)

	b.rejoinMissingSeeds()
	require.Equal(t, merges, len(d.merged), "a seed that is a live member was joined again")
}

// A seed name often resolves to every node, this one included (a
// headless service's name). Only this node's own address is left out of
// the join: the name's other addresses are the way into the cluster, and
// without them the node would start alone for good.
func TestSeedNameThatAlsoResolvesToThisNodeJoinsTheOthers(t *testing.T) {
	a := start(t, testConfig("a"))
	_, port, err := net.SplitHostPort(a.GossipAddr())
	require.NoError(t, err)
	defer func(orig func(context.Context, string) ([]string, error)) { lookupHost = orig }(lookupHost)
	lookupHost = func(ctx context.Context, host string) ([]string, error) {
		if host == "peers.test" {
			return []string{"127.0.0.2", "127.0.0.1"}, nil
		}
		return net.DefaultResolver.LookupHost(ctx, host)
	}
	cb := testConfig("b", net.JoinHostPort("peers.test", port))
	cb.BindAddr = "127.0.0.2"
	cb.BindPort, err = strconv.Atoi(port)
	require.NoError(t, err)
	b := start(t, cb)
	waitTable(t, b, 10*time.Second, "b sees a", hasMembers("a", "b"))
}
