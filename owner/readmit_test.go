package owner

import (
	"context"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// A replica that lost its data directory is readmitted by a Sync (the
// install raises its promise), but it forgot the claims it recorded before
// the loss. A proposer from the older base then counts it in a majority
// and makes a second successor of that base final: two owners acknowledge
// writes at once.
//
// K (epoch 1) is owned by a with replicas {a,b,c}. b acquires it with the
// ring's new replica set {b,a,f} (K2, epoch 2); a and b accept and record
// it, c misses the Accept and every Choose. a loses its directory. b's
// resync (K3, epoch 3) syncs a copy to a, whose Accept and Choose are
// lost. c, cut off from b and still knowing only K, acquires from K: a and
// c are a majority of K's replicas, neither remembers K2.
func TestReadmittedAmnesiacReplicaDoesNotLetAStaleBaseGetASecondSuccessor(t *testing.T) {
	ctx := context.Background()
	const p = 1
	m := &mesh{}
	_, sa := m.add(t, "a")
	b, sb := m.add(t, "b")
	c, sc := m.add(t, "c")
	m.add(t, "f")
	m.add(t, "d")
	m.add(t, "e")
	table := &ring.Table{}

	k := store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "b", "c"}, BaseReplicas: []string{"a"}}
	for _, s := range []*store.Store{sa, sb, sc} {
		_, err := s.Choose(ctx, p, k, true)
		require.NoError(t, err)
		require.NoError(t, s.Commit(ctx, &store.Batch{Partition: p, Epoch: 1, Writes: []store.KV{{Key: []byte("k"), Value: []byte("v1")}}}))
	}

	// K2: c misses the Accept and every Choose.
	m.setDrop(func(from, to, kind string) bool { return to == "c" && (kind == "accept" || kind == "choose") })
	ok, _ := b.acquire(p, k, table, []string{"b", "a", "f"})
	require.True(t, ok)
	k2, serving := b.Serving(p)
	require.True(t, serving)
	require.NoError(t, writeVia(t, b, p, "k", "v2"))

	// a loses its data directory and comes back blank.
	m.add(t, "a")

	// K3: b's resync syncs a, whose Accept and Choose are lost.
	m.setDrop(func(from, to, kind string) bool {
		return to == "c" && (kind == "accept" || kind == "choose") || to == "a" && (kind == "accept" || kind == "choose")
	})
	ok, _ = b.acquire(p, k2, table, []string{"b", "a", "f"})
	require.True(t, ok)
	k3, serving := b.Serving(p)
	require.True(t, serving)
	require.Equal(t, "b", k3.Owner)
	require.NoError(t, writeVia(t, b, p, "k", "v3"))

	// c, cut off from b, acquires from K with replicas {c,d,e}.
	m.setDrop(func(from, to, kind string) bool {
		return from == "c" && to == "b" || from == "b" && to == "c"
	})
	acquired := false
	for range 3 {
		ok, seen := c.acquire(p, k, table, []string{"c", "d", "e"})
		c.parts[p].done(ok, time.Time{}, 0, seen)
		if acquired = ok; ok {
			break
		}
	}
	require.True(t, acquired, "c and a majority of b's replicas can take over")
	kc, _ := c.Serving(p)
	require.GreaterOrEqual(t, kc.Base, k3.Epoch, "c's claim %+v is no successor of b's newest, %+v", kc, k3)
	v, _, err := sc.Get(p, []byte("k"))
	require.NoError(t, err)
	require.Equal(t, "v3", string(v), "c serves without the write b acknowledged under %+v", k3)
	cErr := writeVia(t, c, p, "k", "from c")
	bErr := writeVia(t, b, p, "k", "from b")
	require.Falsef(t, cErr == nil && bErr == nil,
		"two owners acknowledged writes at once: b under %+v, c under %+v (both successors of %+v)", k3, kc, k)
}
