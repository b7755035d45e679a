package ring

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewPublishesATableOfItself(t *testing.T) {
	r := start(t, testConfig("solo"))
	tbl := r.Table()
	assert.Equal(t, uint64(1), tbl.Version)
	assert.Equal(t, []Member{{Name: "solo", RPCAddr: "rpc-solo"}}, tbl.Members)
	for p := range tbl.Owners {
		assert.Equal(t, "solo", tbl.Owners[p])
		assert.Equal(t, []string{"solo"}, tbl.Replicas[p])
	}
	assert.Equal(t, "solo", r.LocalName())
	assert.True(t, strings.HasPrefix(r.GossipAddr(), "127.0.0.1:"), r.GossipAddr())
	assert.NotEqual(t, "127.0.0.1:0", r.GossipAddr())
}

func TestNodesConvergeToIdenticalTables(t *testing.T) {
	began := time.Now()
	rs := startCluster(t, 3)
	var tables []*Table
	for _, r := range rs {
		tables = append(tables, waitTable(t, r, 10*time.Second, "3 members", hasMembers("a", "b", "c")))
	}
	t.Logf("3 nodes converged %v after the first New", time.Since(began))

	want := Place([]Member{{"a", "rpc-a"}, {"b", "rpc-b"}, {"c", "rpc-c"}}, testFP.Partitions, testFP.RF)
	for i, tbl := range tables {
		assert.Equal(t, want.Checksum, tbl.Checksum, rs[i].LocalName())
		assert.Equal(t, want.Replicas, tbl.Replicas, rs[i].LocalName())
		assert.GreaterOrEqual(t, tbl.Version, uint64(2), rs[i].LocalName())
	}
}

func TestKeysMapToTheSameOwnerOnAllNodes(t *testing.T) {
	rs := startCluster(t, 3)
	var tables []*Table
	for _, r := range rs {
		tables = append(tables, waitTable(t, r, 10*time.Second, "3 members", hasMembers("a", "b", "c")))
	}
	for i := range 10000 {
		key := fmt.Appendf(nil, "user-%d", i)
		p := Partition(key, testFP.Partitions)
		owner := tables[0].Owners[p]
		require.NotEmpty(t, owner)
		for j, tbl := range tables[1:] {
			require.Equal(t, owner, tbl.Owners[p], "key %q on %s", key, rs[j+1].LocalName())
		}
	}
}

// startWatchedPair starts rings a and b joined to each other, a logging
// to the returned recorder, and waits until a sees both.
func startWatchedPair(t *testing.T) (*warnRecorder, *Ring, *Ring) {
	rec := newWarnRecorder()
	cfgA := testConfig("a")
	cfgA.Logger = slog.New(rec)
	a := start(t, cfgA)
	b := start(t, testConfig("b", a.GossipAddr()))
	waitTable(t, a, 10*time.Second, "a, b", hasMembers("a", "b"))
	return rec, a, b
}

func TestForeignFingerprintIsRefused(t *testing.T) {
	rec, a, b := startWatchedPair(t)

	for name, fp := range map[string]Fingerprint{
		"x-cluster":    {Cluster: "other", Partitions: testFP.Partitions, RF: testFP.RF, PlacementVersion: PlacementVersion},
		"x-partitions": {Cluster: testFP.Cluster, Partitions: 113, RF: testFP.RF, PlacementVersion: PlacementVersion},
		"x-rf":         {Cluster: testFP.Cluster, Partitions: testFP.Partitions, RF: 1, PlacementVersion: PlacementVersion},
		"x-protocol":   {Cluster: testFP.Cluster, Partitions: testFP.Partitions, RF: testFP.RF, PlacementVersion: PlacementVersion, Protocol: testFP.Protocol + 1},
	} {
		cfg := testConfig(name, a.GossipAddr())
		cfg.Fingerprint = fp
		x, err := New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = x.Join(ctx)
		cancel()
		require.ErrorIs(t, err, ErrIncompatible, name)
		assert.Equal(t, []Member{{Name: name, RPCAddr: "rpc-" + name}}, x.Table().Members, name)
		require.NoError(t, x.Close())

		rec.receive(t, map[string]string{
			"msg":    "ring: refusing node with another fingerprint",
			"node":   name,
			"addr":   x.GossipAddr(),
			"theirs": fp.String(),
			"ours":   testFP.String(),
		}, 5*time.Second)
	}

	// The cluster still works, and once a good node's arrival has gossiped
	// through it, no refused node has ever been in a table.
	versionA := a.Table().Version
	c := start(t, testConfig("c", b.GossipAddr()))
	for _, r := range []*Ring{a, b, c} {
		waitTable(t, r, 10*time.Second, "a, b, c", hasMembers("a", "b", "c"))
	}
	assert.Equal(t, versionA+1, a.Table().Version, "a published exactly one table since: the one with c")
}

func TestDelegateStatePropagates(t *testing.T) {
	da, db, dc := newRecordingDelegate("state-a"), newRecordingDelegate("state-b"), newRecordingDelegate("state-c")
	cfgA := testConfig("a")
	cfgA.Delegate = da
	a := start(t, cfgA)
	cfgB := testConfig("b", a.GossipAddr())
	cfgB.Delegate = db
	b := start(t, cfgB)
	// Join is a push/pull: both sides merge the other's full state.
	receive(t, db.merged, "state-a", time.Second)
	receive(t, da.merged, "state-b", time.Second)

	cfgC := testConfig("c", b.GossipAddr())
	cfgC.Delegate = dc
	c := start(t, cfgC)
	receive(t, dc.merged, "state-b", time.Second)
	for _, r := range []*Ring{a, b, c} {
		waitTable(t, r, 10*time.Second, "a, b, c", hasMembers("a", "b", "c"))
	}

	began := time.Now()
	a.Broadcast([]byte("hello from a"))
	receive(t, db.msgs, "hello from a", 5*time.Second)
	receive(t, dc.msgs, "hello from a", 5*time.Second)
	t.Logf("broadcast reached both peers in %v", time.Since(began))

	// Periodic push/pull carries full state between nodes that never joined
	// each other directly.
	receive(t, dc.merged, "state-a", 5*time.Second)
}

func TestBroadcastDropsOversizedMessages(t *testing.T) {
	r := start(t, testConfig("a"))
	r.Broadcast(make([]byte, MaxBroadcastSize+1))
	assert.Zero(t, r.hooks.queue.NumQueued())
	r.Broadcast(make([]byte, MaxBroadcastSize))
	assert.Equal(t, 1, r.hooks.queue.NumQueued())
}

func TestCrashedNodeIsRemoved(t *testing.T) {
	rs := startCluster(t, 3)
	for _, r := range rs {
		waitTable(t, r, 10*time.Second, "a, b, c", hasMembers("a", "b", "c"))
	}
	crashed := time.Now()
	require.NoError(t, rs[2].Close()) // no Leave: the others must detect it
	for _, r := range rs[:2] {
		waitTable(t, r, 20*time.Second, "a, b", hasMembers("a", "b"))
		t.Logf("%s dropped the crashed node after %v", r.LocalName(), time.Since(crashed))
	}
	assert.Equal(t, rs[0].Table().Checksum, rs[1].Table().Checksum)
}

func TestLeaveRemovesNode(t *testing.T) {
	rs := startCluster(t, 3)
	for _, r := range rs {
		waitTable(t, r, 10*time.Second, "a, b, c", hasMembers("a", "b", "c"))
	}
	left := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, rs[2].Leave(ctx))
	for _, r := range rs[:2] {
		waitTable(t, r, 5*time.Second, "a, b", hasMembers("a", "b"))
		t.Logf("%s dropped the leaving node after %v", r.LocalName(), time.Since(left))
	}
	require.ErrorIs(t, rs[2].Leave(ctx), ErrClosed)
}

func TestJoinWithoutSeedsStartsAlone(t *testing.T) {
	r, err := New(testConfig("a"))
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.Join(context.Background()))
}

// goneAddr returns the gossip address of a node that was closed: nobody
// answers there.
func goneAddr(t *testing.T) string {
	t.Helper()
	gone, err := New(testConfig("gone"))
	require.NoError(t, err)
	addr := gone.GossipAddr()
	require.NoError(t, gone.Close())
	return addr
}

func TestJoinUnreachableSeedEndsWithContext(t *testing.T) {
	addr := goneAddr(t)

	r, err := New(testConfig("a", addr))
	require.NoError(t, err)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = r.Join(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), addr)
}

// A seed list may name this node itself, as one list shared by every node
// does. memberlist answers a node's join of itself; that answer must not
// count, or a node whose other seeds are down would start alone (and a
// Bootstrap node would create a second cluster). A list of itself alone is
// no seed at all.
func TestJoinDoesNotCountThisNodeAsASeed(t *testing.T) {
	addr := goneAddr(t)

	r, err := New(testConfig("a"))
	require.NoError(t, err)
	defer r.Close()
	r.cfg.Seeds = []string{r.GossipAddr(), addr}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, r.Join(ctx), context.DeadlineExceeded)

	r.cfg.Seeds = []string{r.GossipAddr()}
	require.NoError(t, r.Join(context.Background()))
}

// A node that joins this one while this one's seeds are down does not
// complete this one's Join: a new node knows nothing of the cluster the
// seeds may hold, and a Bootstrap node would create a second one.
func TestJoinIsNotCompletedByANodeJoiningThisOne(t *testing.T) {
	addr := goneAddr(t)

	a, err := New(testConfig("a", addr))
	require.NoError(t, err)
	defer a.Close()
	start(t, testConfig("b", a.GossipAddr()))
	waitTable(t, a, 10*time.Second, "a sees b", hasMembers("a", "b"))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, a.Join(ctx), context.DeadlineExceeded)
}

func TestCloseStopsEverything(t *testing.T) {
	rs := startCluster(t, 2)
	waitTable(t, rs[0], 10*time.Second, "a, b", hasMembers("a", "b"))
	for _, r := range rs {
		require.NoError(t, r.Close())
		require.NoError(t, r.Close(), "Close is idempotent")
		require.ErrorIs(t, r.Join(context.Background()), ErrClosed)
		require.ErrorIs(t, r.Leave(context.Background()), ErrClosed)
	}
	// Close waited for the table goroutine; it and memberlist's goroutines,
	// which see memberlist's shutdown channel, exit right after. (A goroutine
	// that ran its deferred wg.Done is still on the stack list for a moment.)
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		stacks := goroutines()
		if !strings.Contains(stacks, "ring.(*Ring).run") && !strings.Contains(stacks, "hashicorp/memberlist.") {
			return
		}
		require.True(t, time.Now().Before(deadline), "goroutines outlived Close:\n%s", stacks)
		<-tick.C
	}
}

// goroutines returns the stacks of all goroutines.
func goroutines() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
