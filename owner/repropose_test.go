package owner

import (
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// A value that one replica of the base accepted must be proposed again,
// with the owner it names, by the next proposer that hears of it. When that
// owner is down, the proposal must not wait for the owner's copy: with
// three replicas and the owner one of them, the two others are the only
// majority, one of them reports the value, and the partition would stay
// unserved until the owner came back.
//
// K (epoch 1, owner a, replicas a, b, c). c proposes itself; b alone
// accepts (a misses the Accept, every Choose is lost); then c is cut off.
// a acquires from K: it proposes c's value again, which a and b copy and
// choose without c, then acquires from that claim and serves, with K's
// write.
func TestValueProposedAgainWithAnOwnerThatIsDownIsChosenWithoutIt(t *testing.T) {
	const p = 1
	m := &mesh{}
	a, sa := m.add(t, "a")
	_, sb := m.add(t, "b")
	c, sc := m.add(t, "c")
	table := &ring.Table{}
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "b", "c"}, BaseReplicas: []string{"a"}}, sa, sb, sc)

	m.setDrop(func(from, to, kind string) bool { return kind == "choose" || to == "a" && kind == "accept" })
	ok, _ := c.acquire(p, k, table, []string{"c", "a", "b"})
	require.False(t, ok, "c's value is accepted by b alone")
	meta, err := sb.Meta(p)
	require.NoError(t, err)
	require.Equal(t, "c", meta.Accepted.Owner)

	m.setDrop(func(from, to, kind string) bool { return from == "c" || to == "c" })
	base := k
	for range 4 {
		ok, seen := a.acquire(p, base, table, []string{"a", "b", "c"})
		a.parts[p].done(ok, time.Time{}, 0, seen)
		if ok {
			break
		}
		if newest, known := a.claims.Get(p); known {
			base = newest
		}
	}
	claim, serving := a.Serving(p)
	require.True(t, serving, "a and b, a majority of every claim, could not move the partition on while c is down (newest claim known to a: %+v)", base)
	require.Greater(t, claim.Base, k.Epoch, "a serves a successor of the claim that names c, not of K")
	v, _, err := sa.Get(p, []byte("k"))
	require.NoError(t, err)
	require.Equal(t, "v1", string(v))
	require.NoError(t, writeVia(t, a, p, "k", "v2"))
}
