package router

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/internal/rpc"
	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
)

// A node restarted on the data directory of another cluster of the same
// name is refused at Start: joining, it would serve that cluster's claims
// and values for keys this cluster owns.
func TestNodeOnAnotherClustersDataDirIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	setup := func(n *Node) { n.Handle("inc", counter) }
	x := newTestCluster(t, 2, setup)
	y := &testCluster{t: t, dir: t.TempDir(), setup: setup}
	other := y.add("n1", true)
	require.NotEqual(t, x.nodes[0].owner.Claims().Cluster(), other.owner.Claims().Cluster())
	keys := make([][]byte, 16)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "acct-%d", i)
		for range 3 {
			_, err := x.nodes[0].Call(ctx, keys[i], "inc", nil)
			require.NoError(t, err)
		}
		_, err := other.Call(ctx, keys[i], "inc", nil)
		require.NoError(t, err)
	}
	otherDir := other.cfg.DataDir
	require.NoError(t, other.Close())

	victim := x.nodes[1]
	cfg := x.restartConfig(victim)
	require.NoError(t, victim.Close())
	ownDir := cfg.DataDir
	cfg.DataDir = otherDir
	n, err := New(cfg)
	require.NoError(t, err)
	startCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	err = n.Start(startCtx)
	stop()
	require.ErrorIs(t, err, ring.ErrIncompatible, "a node of another cluster ID must not join")
	require.Contains(t, err.Error(), other.owner.Claims().Cluster())
	n.Close()

	cfg.DataDir = ownDir
	x.start(cfg)
	x.waitConverged()
	for _, k := range keys {
		v, err := x.nodes[0].Call(ctx, k, "inc", nil)
		require.NoError(t, err)
		require.Equal(t, uint64(4), binary.BigEndian.Uint64(v), "key %s", k)
	}
}

// A node's RPC connections carry the cluster ID it has now, not the one
// it had when it started serving: nodes that created their clusters in
// this Start, with the same cluster name, refuse each other's connections
// both ways (an RPC could otherwise teach one cluster's claims to the
// other, or run a call there).
func TestRPCBetweenClustersCreatedInThisStartIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	x := newTestCluster(t, 1, nil).nodes[0]
	y := newTestCluster(t, 1, nil).nodes[0]
	require.NotEqual(t, x.owner.Claims().Cluster(), y.owner.Claims().Cluster())
	for _, pair := range [][2]*Node{{x, y}, {y, x}} {
		from, to := pair[0], pair[1]
		addr, err := to.rpcAddr(to.cfg.Name)
		require.NoError(t, err)
		_, err = from.client.Call(ctx, addr, msgCall, callRequest{Key: []byte("k"), Method: "inc"}.encode())
		require.ErrorIs(t, err, rpc.ErrRefused)
		require.ErrorContains(t, err, "cluster ID")
	}
}

// Two nodes started together with Bootstrap set, each the other's seed,
// make one cluster: the one whose name sorts first creates it, the other
// joins it. Each creating its own, they would serve the same keys from
// two stores.
func TestTwoBootstrapNodesStartedTogetherMakeOneCluster(t *testing.T) {
	c := &testCluster{t: t, dir: t.TempDir(), setup: func(n *Node) { n.Handle("inc", counter) }}
	gossip := []string{freeLoopbackAddr(t, "127.0.0.2"), freeLoopbackAddr(t, "127.0.0.3")}
	nodes := make([]*Node, 2)
	for i := range nodes {
		cfg := c.config(fmt.Sprintf("n%d", i), true)
		cfg.GossipAddr, cfg.RPCAddr = gossip[i], "127.0.0.1:0"
		cfg.Seeds = []string{gossip[1-i]}
		n, err := New(cfg)
		require.NoError(t, err)
		c.setup(n)
		t.Cleanup(func() { n.Close() })
		nodes[i] = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() { errs <- n.Start(ctx) }()
	}
	for range nodes {
		require.NoError(t, <-errs)
	}
	c.nodes = nodes
	c.waitConverged()
	require.NotEmpty(t, nodes[0].owner.Claims().Cluster())
	require.Equal(t, nodes[0].owner.Claims().Cluster(), nodes[1].owner.Claims().Cluster(), "two clusters were created")
	for i := range 16 {
		key := fmt.Appendf(nil, "acct-%d", i)
		for j, n := range nodes {
			v, err := n.Call(ctx, key, "inc", nil)
			require.NoError(t, err)
			require.Equal(t, uint64(j+1), binary.BigEndian.Uint64(v), "key %s through %s", key, n.cfg.Name)
		}
	}
}

// A restart with another partition count is refused: a key's partition
// depends on the count, so the stored values would be looked for in the
// wrong partitions.
func TestRestartWithAnotherPartitionCountIsRefused(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	cfg := c.restartConfig(c.nodes[0])
	require.NoError(t, c.nodes[0].Close())
	cfg.Partitions *= 2
	_, err := New(cfg)
	require.ErrorIs(t, err, store.ErrClusterMismatch)
}

// freeLoopbackAddr returns host:port with a port free for both TCP and
// UDP on host, for a node whose address must be known before it starts.
func freeLoopbackAddr(t *testing.T, host string) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		require.NoError(t, err)
		addr := ln.Addr().String()
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err == nil {
			pc.Close()
			return addr
		}
	}
	t.Fatalf("no port on %s is free for both TCP and UDP", host)
	return ""
}

// A node started with Bootstrap that leaves the creation of the cluster to
// another one (whose name sorts first) waits for it in Start, and does not
// create a cluster of its own when the other one seems gone: a network
// partition looks the same, and the other one may have created one. Here
// the other's Start gave up, its seed unreachable; this node's Start ends
// with its ctx, saying why, and a restart creates the cluster.
func TestBootstrapNodeThatLeftTheCreationToAnotherWaitsForIt(t *testing.T) {
	var logs logBuffer
	c := &testCluster{t: t, dir: t.TempDir(), setup: func(n *Node) { n.Handle("inc", counter) }}
	cfg := c.config("n0", true)
	cfg.GossipAddr = freeLoopbackAddr(t, "127.0.0.2")
	cfg.Seeds = []string{freeLoopbackAddr(t, "127.0.0.3")} // nobody there
	first, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { first.Close() })
	giveUp, stop := context.WithCancel(context.Background())
	defer stop()
	firstStarted := make(chan error, 1)
	go func() { firstStarted <- first.Start(giveUp) }()

	cfg = c.config("n1", true)
	cfg.Seeds = []string{first.cfg.GossipAddr}
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	second, err := New(cfg)
	require.NoError(t, err)
	waiting, stopWaiting := context.WithCancel(context.Background())
	defer stopWaiting()
	secondStarted := make(chan error, 1)
	go func() { secondStarted <- second.Start(waiting) }()
	waitFor(t, 30*time.Second, func() error {
		if !strings.Contains(logs.String(), "waiting for the cluster another node creates") {
			return errors.New("n1 does not wait for n0 yet")
		}
		return nil
	})
	stop()
	require.Error(t, <-firstStarted)
	waitFor(t, 30*time.Second, func() error {
		if slices.Contains(second.Members(), "n0") {
			return errors.New("n1 still sees n0")
		}
		return nil
	})
	stopWaiting()
	err = <-secondStarted
	require.ErrorContains(t, err, "waiting for the cluster that another node started with Bootstrap creates")
	require.Empty(t, second.owner.Claims().Cluster(), "n1 created a cluster of its own")

	cfg.Seeds = nil
	restarted := c.start(cfg)
	require.NotEmpty(t, restarted.owner.Claims().Cluster(), "the restart created no cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := restarted.Call(ctx, []byte("k"), "inc", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), binary.BigEndian.Uint64(v))
}

// A node whose data directory holds the root claims of a bootstrap of its
// own that stopped before storing its cluster ID (they were never served)
// refuses to start in another cluster: at its next start it would read
// them as final, and serve partitions it does not own.
func TestNodeWithTheLeftoversOfAHalfDoneBootstrapIsRefused(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	cfg := c.config("n1", false)
	st, err := store.Open(store.Config{Dir: cfg.DataDir})
	require.NoError(t, err)
	_, err = st.Choose(context.Background(), 7, store.Claim{Owner: "n1", Replicas: []string{"n1"}}, true)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	n, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = n.Start(ctx)
	require.ErrorContains(t, err, "root claims of a cluster this node began to create")
	id, err := storeClusterID(cfg.DataDir)
	require.NoError(t, err)
	require.Empty(t, id, "the other cluster's ID was stored with the leftovers")
}

// storeClusterID reads the cluster ID of the closed store in dir.
func storeClusterID(dir string) (string, error) {
	st, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		return "", err
	}
	defer st.Close()
	return st.ClusterID()
}
