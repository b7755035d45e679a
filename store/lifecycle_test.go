package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	berrors "go.etcd.io/bbolt/errors"
)

func TestSecondOpenReturnsErrLockedWithinTimeout(t *testing.T) {
	dir := t.TempDir()
	openDir(t, dir)

	start := time.Now()
	s2, err := Open(Config{Dir: dir, OpenTimeout: 100 * time.Millisecond})
	elapsed := time.Since(start)
	require.Nil(t, s2)
	require.ErrorIs(t, err, ErrLocked)
	require.Contains(t, err.Error(), filepath.Join(dir, fileName))
	require.Less(t, elapsed, 5*time.Second, "Open must give up, not hang")
}

func TestOpenRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no dir":           {},
		"negative timeout": {Dir: t.TempDir(), OpenTimeout: -time.Second},
		"negative max":     {Dir: t.TempDir(), MaxSize: -1},
	} {
		_, err := Open(cfg)
		require.ErrorIs(t, err, ErrInvalid, name)
	}
}

func TestReopenKeepsDataMetaAndClusterID(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, s.SetClusterID("c1", 271))
	_, err = s.Promise(ctx, 7, 3)
	require.NoError(t, err)
	owner := Claim{Epoch: 3, Owner: "a", Replicas: []string{"a", "b", "c"}}
	require.NoError(t, s.Accept(ctx, 7, owner))
	require.NoError(t, choose(ctx, s, 7, owner))
	require.NoError(t, s.Commit(ctx, &Batch{Partition: 7, Epoch: 3, RequestID: []byte("r"), Response: []byte("ok"),
		Writes: []KV{{Key: []byte("k"), Value: []byte("v")}}}))
	want, err := s.Meta(7)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openDir(t, dir)
	id, err := s.ClusterID()
	require.NoError(t, err)
	require.Equal(t, "c1", id)
	got, err := s.Meta(7)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, Meta{Promised: 3, Chosen: owner, HasChosen: true, Position: Position{Epoch: 3, LSN: 1}}, got)
	requireValue(t, s, 7, "k", "v")
	resp, ok, err := s.Response(7, []byte("r"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "ok", string(resp))
	ps, err := s.Partitions()
	require.NoError(t, err)
	require.Equal(t, []int{7}, ps)
}

func TestSetClusterIDRefusesAnotherCluster(t *testing.T) {
	s := openTest(t)
	id, err := s.ClusterID()
	require.NoError(t, err)
	require.Empty(t, id)
	require.NoError(t, s.SetClusterID("alpha", 271))
	require.NoError(t, s.SetClusterID("alpha", 271), "setting the same ID again is fine")
	err = s.SetClusterID("beta", 271)
	require.ErrorIs(t, err, ErrClusterMismatch)
	require.Contains(t, err.Error(), "alpha")
	require.Contains(t, err.Error(), "beta")
	id, err = s.ClusterID()
	require.NoError(t, err)
	require.Equal(t, "alpha", id)
}

func TestSetClusterIDRefusesAnotherPartitionCountAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	require.NoError(t, s.SetClusterID("alpha", 271))
	require.ErrorIs(t, s.SetClusterID("alpha", 0), ErrInvalid)
	require.NoError(t, s.Close())

	s = openDir(t, dir)
	err := s.SetClusterID("alpha", 512)
	require.ErrorIs(t, err, ErrClusterMismatch)
	require.Contains(t, err.Error(), "271")
	require.Contains(t, err.Error(), "512")
	require.NoError(t, s.SetClusterID("alpha", 271))
}

func TestCloseIsIdempotentAndLaterOpsReturnErrClosed(t *testing.T) {
	ctx := context.Background()
	s, err := Open(Config{Dir: t.TempDir(), NoSync: true})
	require.NoError(t, err)
	require.NoError(t, put(ctx, s, 0, 0, "k", "v"))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())

	require.ErrorIs(t, put(ctx, s, 0, 0, "k", "v"), ErrClosed)
	p := s.Submit(&Batch{})
	<-p.Done()
	require.ErrorIs(t, p.Err(), ErrClosed)
	_, err = s.Promise(ctx, 0, 1)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.SetClusterID("c", 271), ErrClosed)
	_, _, err = s.Get(0, []byte("k"))
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.Meta(0)
	require.ErrorIs(t, err, ErrClosed)
	_, _, err = s.Export(0, Position{}, nil, 1024)
	require.ErrorIs(t, err, ErrClosed)
}

func TestCloseFailsQueuedOpsAndCommittedOnesStay(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, NoSync: true})
	require.NoError(t, err)
	var pending []*Pending
	for i := range 2000 {
		pending = append(pending, s.Submit(&Batch{Writes: []KV{{Key: []byte{byte(i >> 8), byte(i)}, Value: []byte("v")}}}))
	}
	require.NoError(t, s.Close())
	committed := 0
	for _, p := range pending {
		<-p.Done() // every waiter is released by Close
		if p.Err() == nil {
			committed++
		} else {
			require.ErrorIs(t, p.Err(), ErrClosed)
		}
	}
	s = openDir(t, dir)
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, uint64(committed), m.Position.LSN, "exactly the acknowledged batches are in the file")
}

// A transaction that bbolt fails (here: the file would outgrow MaxSize, as
// on a full disk) fails every op in it and poisons the store.
func TestFailedTransactionPoisonsStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, NoSync: true, MaxSize: 1 << 20})
	require.NoError(t, err)
	require.NoError(t, put(ctx, s, 0, 1, "small", "v"))

	err = put(ctx, s, 0, 1, "big", strings.Repeat("x", 2<<20))
	require.ErrorIs(t, err, ErrFailed)
	require.ErrorIs(t, err, berrors.ErrMaxSizeReached)

	require.ErrorIs(t, put(ctx, s, 0, 1, "small2", "v"), ErrFailed, "a poisoned store refuses every write")
	_, err = s.Promise(ctx, 0, 2)
	require.ErrorIs(t, err, ErrFailed)
	c, err := s.NewCopy(0, Position{})
	require.NoError(t, err)
	require.ErrorIs(t, c.Add(ctx, []Entry{{Kind: KindData, Key: []byte("k"), Value: []byte("v")}}), ErrFailed, "nor is a copy staged outside the committer")
	requireValue(t, s, 0, "small", "v") // reads still work
	require.NoError(t, s.Close())

	s = openDir(t, dir)
	requireValue(t, s, 0, "small", "v")
	requireAbsent(t, s, 0, "big")
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, Meta{Promised: 1, Position: Position{Epoch: 1, LSN: 1}}, m)
}
