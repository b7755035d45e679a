package owner

import (
	"context"
	"testing"

	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// A cluster ID being created refuses other clusters' claims at once, but
// is neither reported nor sent to peers until it is published: a peer
// that adopted it would be bound to a cluster that may never exist.
func TestReservedClusterIDIsNotSentUntilPublished(t *testing.T) {
	creating := NewClaims(4)
	require.True(t, creating.Reserve("new"))
	require.Empty(t, creating.Cluster())

	peer := NewClaims(4)
	_, err := peer.MergeEncoded(creating.Encode())
	require.ErrorIs(t, err, ErrNoCluster)
	require.Empty(t, peer.Cluster())

	other := NewClaims(4)
	other.SetCluster("other")
	other.Merge(0, store.Claim{Epoch: 3, Owner: "x", Replicas: []string{"x"}})
	_, err = creating.MergeEncoded(other.Encode())
	require.ErrorIs(t, err, ErrForeignCluster)
	_, known := creating.Get(0)
	require.False(t, known)

	creating.Publish()
	require.Equal(t, "new", creating.Cluster())
	_, err = peer.MergeEncoded(creating.Encode())
	require.NoError(t, err)
	require.Equal(t, "new", peer.Cluster())
}

// A bootstrap that fails before its last step leaves nothing that names
// its cluster, in the store or in what gossip sends, and the next start
// bootstraps again; the claims it had written are not acted on meanwhile.
func TestFailedBootstrapLeavesNoClusterAndIsRetried(t *testing.T) {
	s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	require.NoError(t, err)
	defer s.Close()
	cfg := Config{Self: "a", Partitions: 4, Store: s, Transport: noTransport{}, Bootstrap: true}
	root := store.Claim{Owner: "a", Replicas: []string{"a"}}
	_, err = s.Choose(context.Background(), 0, root, true) // as if it stopped after partition 0
	require.NoError(t, err)

	failing, err := New(cfg)
	require.NoError(t, err)
	_, known := failing.claims.Get(0)
	require.False(t, known, "a claim of a store without a cluster ID was loaded")
	failing.Close() // its context ends: the root claims cannot be written
	created, err := failing.Bootstrap()
	require.Error(t, err)
	require.False(t, created)
	_, err = NewClaims(4).MergeEncoded(failing.claims.Encode())
	require.ErrorIs(t, err, ErrNoCluster, "gossip sent the ID of a cluster that was not created")
	id, err := s.ClusterID()
	require.NoError(t, err)
	require.Empty(t, id)

	retried, err := New(cfg)
	require.NoError(t, err)
	defer retried.Close()
	created, err = retried.Bootstrap()
	require.NoError(t, err)
	require.True(t, created)
	id, err = s.ClusterID()
	require.NoError(t, err)
	require.Equal(t, retried.claims.Cluster(), id)
	for p := range 4 {
		c, ok := retried.claims.Get(p)
		require.True(t, ok)
		require.Equal(t, "a", c.Owner)
	}
}
