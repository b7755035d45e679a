package store

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/stretchr/testify/require"
)

func TestWritesAndDedupRecordCommitAtomically(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	_, err := s.Promise(ctx, 0, 2)
	require.NoError(t, err)

	// Submit without waiting, so that both batches share a group: the
	// refused one must leave nothing, the applied one everything.
	stale := s.Submit(&Batch{Partition: 0, Epoch: 1, RequestID: []byte("r1"), Response: []byte("resp1"),
		Writes: []KV{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("1")}}})
	good := s.Submit(&Batch{Partition: 0, Epoch: 2, RequestID: []byte("r2"), Response: []byte("resp2"),
		Writes: []KV{{Key: []byte("c"), Value: []byte("2")}, {Key: []byte("d"), Value: []byte("2")}}})
	require.ErrorIs(t, stale.Wait(ctx), epoch.ErrStale)
	require.NoError(t, good.Wait(ctx))

	requireAbsent(t, s, 0, "a")
	requireAbsent(t, s, 0, "b")
	_, ok, err := s.Response(0, []byte("r1"))
	require.NoError(t, err)
	require.False(t, ok, "a refused batch must not store its dedup record")

	requireValue(t, s, 0, "c", "2")
	requireValue(t, s, 0, "d", "2")
	resp, ok, err := s.Response(0, []byte("r2"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "resp2", string(resp))
}

func TestGroupCommitGroupsConcurrentCommits(t *testing.T) {
	ctx := context.Background()
	// Real fsync: the window in which callers pile up behind one commit.
	s, err := Open(Config{Dir: t.TempDir()})
	require.NoError(t, err)
	defer s.Close()

	const callers = 64
	before := s.txs.Load()
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			<-start
			errs[i] = put(ctx, s, i%4, 0, fmt.Sprint("k", i), "v")
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	txs := s.txs.Load() - before
	t.Logf("%d commits in %d transactions", callers, txs)
	require.Less(t, txs, uint64(callers))
	for i := range callers {
		requireValue(t, s, i%4, fmt.Sprint("k", i), "v")
	}
}

func TestGroupAppliesOpsInSubmissionOrder(t *testing.T) {
	s := openTest(t)
	var pending []*Pending
	for i := range 100 {
		pending = append(pending, s.Submit(&Batch{Partition: 0, Epoch: 1,
			Writes: []KV{{Key: []byte("k"), Value: []byte(fmt.Sprint(i))}}}))
	}
	for _, p := range pending {
		<-p.Done()
		require.NoError(t, p.Err())
	}
	requireValue(t, s, 0, "k", "99")
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, Position{Epoch: 1, LSN: 100}, m.Position)
}

func TestInvalidBatchFailsAloneWithoutPoisoning(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	for name, b := range map[string]*Batch{
		"nil":                nil,
		"negative partition": {Partition: -1},
		"empty key":          {Writes: []KV{{Key: nil, Value: []byte("v")}}},
		"huge key":           {Writes: []KV{{Key: make([]byte, 40000), Value: []byte("v")}}},
		"orphan response":    {Response: []byte("r")},
	} {
		require.ErrorIs(t, s.Commit(ctx, b), ErrInvalid, name)
	}
	require.NoError(t, put(ctx, s, 0, 0, "k", "v"))
	ps, err := s.Partitions()
	require.NoError(t, err)
	require.Equal(t, []int{0}, ps, "an invalid batch must touch nothing")
}

func TestNilValueDeletesAndEmptyValueIsStored(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	require.NoError(t, put(ctx, s, 0, 0, "k", "v"))
	require.NoError(t, s.Commit(ctx, &Batch{Writes: []KV{{Key: []byte("k")}, {Key: []byte("e"), Value: []byte{}}}}))
	requireAbsent(t, s, 0, "k")
	requireValue(t, s, 0, "e", "")
}

func TestWaitStopsOnContextButBatchStillCommits(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, s.Commit(ctx, &Batch{}), context.Canceled, "a dead context submits nothing")

	p := s.Submit(&Batch{Writes: []KV{{Key: []byte("k"), Value: []byte("v")}}})
	if err := p.Wait(ctx); err != nil { // nil if the commit won the race
		require.ErrorIs(t, err, context.Canceled)
	}
	<-p.Done()
	require.NoError(t, p.Err())
	requireValue(t, s, 0, "k", "v")
}

func TestBatchNamingAnotherPreviousPositionIsRefused(t *testing.T) {
	ctx := context.Background()
	for name, cfg := range map[string]Config{"wal": {NoSync: true}, "bbolt only": {NoSync: true, MaxSize: 1 << 30}} {
		cfg.Dir = t.TempDir()
		s, err := Open(cfg)
		require.NoError(t, err, name)
		require.NoError(t, put(ctx, s, 0, 1, "a", "1"))
		at := Position{Epoch: 1, LSN: 1}
		for _, prev := range []Position{{Epoch: 1, LSN: 2}, {Epoch: 2, LSN: 1}, {}} {
			err := s.Commit(ctx, &Batch{Partition: 0, Epoch: 1, Prev: &prev, Writes: []KV{{Key: []byte("a"), Value: []byte("x")}}})
			require.ErrorIs(t, err, ErrPosition, "%s: prev %v", name, prev)
		}
		requireValue(t, s, 0, "a", "1")
		require.NoError(t, s.Commit(ctx, &Batch{Partition: 0, Epoch: 1, Prev: &at, Writes: []KV{{Key: []byte("a"), Value: []byte("2")}}}), name)
		requireValue(t, s, 0, "a", "2")
		m, err := s.Meta(0)
		require.NoError(t, err)
		require.Equal(t, Position{Epoch: 1, LSN: 2}, m.Position, name)
		require.NoError(t, s.Close())
	}
}
