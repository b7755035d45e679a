package owner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// unreachableSource is a Transport whose fetches all fail, as from a
// source that is down.
type unreachableSource struct{ Transport }

func (unreachableSource) Fetch(context.Context, string, FetchRequest) (Page, error) {
	return Page{}, errors.New("source unreachable")
}

// syncCopy sends o a Sync with no Wait, which answers once the copy ended,
// and returns its outcome.
func syncCopy(ctx context.Context, o *Owner, req Sync) error {
	r, err := o.HandleSync(ctx, req)
	if err == nil && !r.Done {
		return errors.New("a Sync with no Wait answered before its copy ended")
	}
	return err
}

// A replica asked to sync a copy it already holds keeps it and only raises
// its promise. If it learns meanwhile a final claim it is not a replica of,
// it drops the copy; the sync must then not report success, or the
// proposal counts a replica (possibly its own owner) that holds nothing at
// the position it chose. Found by the robustness harness (RF 3, combined,
// seed 5015): the owner of a new claim read its own copy at the source's
// position, dropped it on learning the base claim, raised its promise,
// and wrote its start marker on the empty partition. That empty copy was
// now the most advanced one, and the next claim copied it to the other
// replicas: the partition's acknowledged writes were lost.
func TestSyncDoesNotKeepACopyThatIsDroppedMeanwhile(t *testing.T) {
	ctx := context.Background()
	held := store.Position{Epoch: 11, LSN: 1}
	dropping := store.Claim{Epoch: 16, Base: 11, Owner: "a", Replicas: []string{"a", "b", "c"}, BaseReplicas: []string{"r", "b", "c"}}
	req := Sync{P: 1, Ballot: 17, Base: dropping, Source: "b", Pos: held}
	const runs = 500
	fetched := 0
	for i := range runs {
		s, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
		require.NoError(t, err)
		r, err := New(Config{Self: "r", Partitions: 4, Store: s, Transport: unreachableSource{}})
		require.NoError(t, err)
		_, err = s.Promise(ctx, 1, 11) // a replica the claim at epoch 11 synced
		require.NoError(t, err)
		require.NoError(t, apply(ctx, r, write(11, store.Position{}, "k", "v")))

		var wg sync.WaitGroup
		var syncErr, learnErr error
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			for range i % 8 { // vary which of the two goes first
				runtime.Gosched()
			}
			syncErr = syncCopy(ctx, r, req)
		})
		wg.Go(func() { <-start; learnErr = r.learn(ctx, 1, dropping) })
		close(start)
		wg.Wait()
		require.NoError(t, learnErr)

		m, err := s.Meta(1)
		require.NoError(t, err)
		v, ok, err := s.Get(1, []byte("k"))
		require.NoError(t, err)
		if syncErr == nil {
			require.Equal(t, held, m.Position, "run %d: the sync succeeded, so the copy must be at its position", i)
			require.True(t, ok, "run %d: the sync succeeded, so the copy must hold its data", i)
			require.Equal(t, "v", string(v))
			require.GreaterOrEqual(t, m.Promised, req.Ballot)
		} else {
			fetched++
			require.Equal(t, store.Position{}, m.Position, "run %d: %v", i, syncErr)
			require.False(t, ok)
		}
		r.Close()
		require.NoError(t, s.Close())
	}
	t.Logf("%d of %d syncs met the drop first and fetched (from a source that is down)", fetched, runs)
}

// pagedSource is a Transport that serves a source store's copy in small
// pages, failing the fetch of page failAt (counting from 1; 0: none).
type pagedSource struct {
	Transport
	src    *store.Store
	failAt int
	pages  int
}

func (f *pagedSource) Fetch(_ context.Context, _ string, req FetchRequest) (Page, error) {
	f.pages++
	if f.pages == f.failAt {
		return Page{}, errors.New("source went down")
	}
	entries, next, err := f.src.Export(req.P, req.Pos, req.After, 64)
	return Page{Entries: entries, Next: next}, err
}

// A sync stages the copy page by page: a source lost halfway leaves the
// replica's old copy whole, and the next sync installs every page.
func TestSyncInstallsEveryPageOrNothing(t *testing.T) {
	ctx := context.Background()
	src, err := store.Open(store.Config{Dir: t.TempDir(), NoSync: true})
	require.NoError(t, err)
	defer src.Close()
	const keys = 50
	for i := range keys {
		require.NoError(t, src.Commit(ctx, &store.Batch{Partition: 1, Epoch: 11, Writes: []store.KV{{Key: fmt.Appendf(nil, "key-%02d", i), Value: []byte("v")}}}))
	}
	held, err := src.Meta(1)
	require.NoError(t, err)

	dir := t.TempDir()
	s, err := store.Open(store.Config{Dir: dir, NoSync: true})
	require.NoError(t, err)
	defer s.Close()
	source := &pagedSource{src: src, failAt: 3}
	r, err := New(Config{Self: "r", Partitions: 4, Store: s, Transport: source})
	require.NoError(t, err)
	defer r.Close()
	_, err = s.Promise(ctx, 1, 5) // a replica the claim at epoch 5 synced
	require.NoError(t, err)
	require.NoError(t, apply(ctx, r, write(5, store.Position{}, "old", "x")))
	req := Sync{P: 1, Ballot: 17, Base: store.Claim{Epoch: 11, Owner: "b", Replicas: []string{"b", "r"}}, Source: "b", Pos: held.Position}

	require.Error(t, syncCopy(ctx, r, req))
	v, ok, err := s.Get(1, []byte("old"))
	require.NoError(t, err)
	require.True(t, ok, "a failed sync keeps the old copy")
	require.Equal(t, "x", string(v))
	for _, k := range []string{"key-00", "key-02"} { // in the pages fetched before the failure
		_, ok, err = s.Get(1, []byte(k))
		require.NoError(t, err)
		require.False(t, ok, "%s of a failed sync is visible", k)
	}

	source.failAt, source.pages = 0, 0
	require.NoError(t, syncCopy(ctx, r, req))
	require.Greater(t, source.pages, 10, "the copy came in many pages")
	got, next, err := s.Export(1, held.Position, nil, 1<<20)
	require.NoError(t, err)
	require.Nil(t, next)
	require.Len(t, got, keys, "every page, and nothing of the old copy")
	m, err := s.Meta(1)
	require.NoError(t, err)
	require.Equal(t, held.Position, m.Position)
	require.GreaterOrEqual(t, m.Promised, req.Ballot)

	// Nothing is left staged: the failed sync discarded its pages.
	r.Close()
	require.NoError(t, s.Close())
	require.Zero(t, stagedCopies(t, dir))
}

// stagedCopies counts the copies staged in the data file in dir (the
// store's layout: sub-buckets of the top-level "staging" bucket), reading
// the file directly: Open would delete them.
func stagedCopies(t *testing.T, dir string) int {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "singlewriter.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer db.Close()
	n := 0
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("staging")); b != nil {
			return b.ForEachBucket(func([]byte) error { n++; return nil })
		}
		return nil
	}))
	return n
}

// A copy kept by a sync (already at the position) may have moved since
// this node last applied a replicated batch: it owned the partition
// meanwhile, and its own writes went straight to its store. The new
// owner's first batch follows the kept position and must apply at once,
// not wait for predecessors that will never come.
func TestSyncKeepingACopyAcceptsTheNewOwnersFirstBatch(t *testing.T) {
	ctx := context.Background()
	r, s := syncedReplicaOf(t)
	require.NoError(t, apply(ctx, r, write(1, store.Position{}, "k", "as a backup of epoch 1")))
	// As owner at epoch 2, its writes bypass the replication queue.
	owned := store.Position{Epoch: 1, LSN: 1}
	for i := range 3 {
		b := write(2, owned, "k", fmt.Sprintf("as the owner, write %d", i))
		require.NoError(t, s.Commit(ctx, &b))
		owned = store.Position{Epoch: 2, LSN: owned.LSN + 1}
	}
	base := store.Claim{Epoch: 2, Owner: "r", Replicas: []string{"r", "b", "c"}}
	require.NoError(t, syncCopy(ctx, r, Sync{P: 1, Ballot: 3, Base: base, Source: "b", Pos: owned}))
	turnCtx, cancel := context.WithTimeout(ctx, replicaTurnWait/2)
	defer cancel()
	require.NoError(t, apply(turnCtx, r, write(3, owned, "k", "from the new owner")),
		"the new owner's first batch waited for batches that will never come")
}

// pacedFetches is a Transport whose fetches each wait for one more answer
// "still copying" to have reached the proposer (on notDone): a copy whose
// pages take about half a RequestTimeout each.
type pacedFetches struct {
	Transport
	notDone <-chan struct{}
	pages   atomic.Int32
}

func (f *pacedFetches) Fetch(ctx context.Context, from string, req FetchRequest) (Page, error) {
	select {
	case <-f.notDone:
	case <-ctx.Done():
		return Page{}, ctx.Err()
	}
	f.pages.Add(1)
	return f.Transport.Fetch(ctx, from, req)
}

// syncAnswers is a Transport that reports every Sync answer that says the
// copy is still being fetched.
type syncAnswers struct {
	Transport
	notDone chan<- struct{}
}

func (s syncAnswers) Sync(ctx context.Context, to string, req Sync) (SyncReply, error) {
	r, err := s.Transport.Sync(ctx, to, req)
	if err == nil && !r.Done {
		select {
		case s.notDone <- struct{}{}:
		case <-ctx.Done():
		}
	}
	return r, err
}

// A partition whose copy takes longer than one request's timeout still
// changes owner: the proposer asks again while the copy is being fetched,
// and each page has its own timeout. With the whole Sync bounded by
// RequestTimeout, such a partition could never move or regain a replica
// (each attempt's new promise at the source also fails the last attempt's
// fetches). Copying 264 MB between two stores on this machine takes
// about 3.6 s, the default RequestTimeout is 4 s.
func TestCopyLongerThanARequestTimeoutCompletes(t *testing.T) {
	const p = 1
	const requestTimeout = 400 * time.Millisecond
	ctx := context.Background()
	notDone := make(chan struct{})
	m := &mesh{}
	_, sa := m.addWith(t, "a", func(c *Config) { c.RequestTimeout = requestTimeout })
	fetches := &pacedFetches{notDone: notDone}
	_, sb := m.addWith(t, "b", func(c *Config) {
		c.RequestTimeout = requestTimeout
		fetches.Transport = c.Transport
		c.Transport = fetches
	})
	c, _ := m.addWith(t, "c", func(c *Config) {
		c.RequestTimeout = requestTimeout
		c.Transport = syncAnswers{Transport: c.Transport, notDone: notDone}
	})
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a"}}, sa)
	big := bytes.Repeat([]byte("x"), 700<<10) // one entry per page: three pages
	require.NoError(t, sa.Commit(ctx, &store.Batch{Partition: p, Epoch: 1, Writes: []store.KV{
		{Key: []byte("k1"), Value: big}, {Key: []byte("k2"), Value: big}, {Key: []byte("k3"), Value: big},
	}}))
	held, err := sa.Meta(p)
	require.NoError(t, err)

	start := time.Now()
	ok, _ := c.acquire(p, k, &ring.Table{}, []string{"c", "b"})
	require.True(t, ok, "c's claim with replica b, whose copy takes three pages, was not chosen")
	require.Greater(t, time.Since(start), requestTimeout, "the copy did not outlast a request's timeout")
	require.EqualValues(t, 3, fetches.pages.Load())
	kc, serving := c.Serving(p)
	require.True(t, serving)
	require.Equal(t, []string{"c", "b"}, kc.Replicas)
	mb, err := sb.Meta(p)
	require.NoError(t, err)
	require.True(t, held.Position.Less(mb.Position), "b holds %v, not the copy at %v and c's start marker", mb.Position, held.Position)
	v, ok, err := sb.Get(p, []byte("k3"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, big, v)
}

// A replica outside the majority whose copy is slow holds up the new owner
// for half a RequestTimeout at most: its claim is chosen and served while
// that copy is still being fetched (the copy goes on, and completes or
// fails on its own).
func TestSlowCopyToAReplicaOutsideTheMajorityDoesNotDelayTheOwner(t *testing.T) {
	const p = 1
	fast := func(c *Config) { c.RequestTimeout = 400 * time.Millisecond }
	m := &mesh{}
	_, sa := m.addWith(t, "a", fast)
	src := &slowSource{fetching: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(src.release)
	m.addWith(t, "b", func(c *Config) {
		c.RequestTimeout = time.Hour // b's fetch waits for the test, not for a timeout
		src.Transport = c.Transport
		c.Transport = src
	})
	m.addWith(t, "d", fast)
	c, _ := m.addWith(t, "c", fast)
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a"}}, sa)

	go c.acquire(p, k, &ring.Table{}, []string{"c", "b", "d"})
	<-src.fetching
	require.Eventually(t, func() bool { _, serving := c.Serving(p); return serving }, 10*time.Second, 10*time.Millisecond,
		"the new owner serves nothing while b's copy is being fetched")
}

// An owner restarted with its data directory acquires its own claim again
// (a claim with several replicas is never resumed): nobody serves the
// partition meanwhile, so it does not wait for the whole copy of a replica
// outside its majority either. Found in review.
func TestRestartedOwnerDoesNotWaitForALaggingReplicasWholeCopy(t *testing.T) {
	const p = 1
	fast := func(c *Config) { c.RequestTimeout = 400 * time.Millisecond }
	m := &mesh{}
	src := &slowSource{fetching: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(src.release)
	c, sc := m.addWith(t, "c", fast)
	_, sb := m.addWith(t, "b", fast)
	m.addWith(t, "d", func(cfg *Config) { cfg.RequestTimeout = time.Hour; src.Transport = cfg.Transport; cfg.Transport = src })
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "c", Replicas: []string{"c", "b", "d"}}, sc, sb)

	go c.acquire(p, k, &ring.Table{}, []string{"c", "b", "d"})
	<-src.fetching
	require.Eventually(t, func() bool { _, serving := c.Serving(p); return serving }, 10*time.Second, 10*time.Millisecond,
		"the restarted owner serves nothing while d's copy is being fetched")
}

// Resyncs waiting for copies give their attempt slots back: a takeover of
// another partition does not wait behind them (with every slot held, the
// partitions of a dead node would stay unserved for as long as the
// copies take). Found in review.
func TestResyncsWaitingForCopiesDoNotStarveATakeover(t *testing.T) {
	requireTakeoverBesideCopies(t, []string{"c", "b", "d"}, func(*Config) {})
}

// requireTakeoverBesideCopies builds a mesh of c, b and d, where every
// fetch d makes hangs (configure adjusts d's Config), has c, serving
// maxConcurrentAttempts partitions whose claims have replicas base,
// acquire each with replicas c, b and d, waits until d is fetching; then
// it has c take over another partition, of an owner that is gone, and
// requires c to serve it. It returns c.
func requireTakeoverBesideCopies(t *testing.T, base []string, configure func(*Config)) *Owner {
	t.Helper()
	parts := func(c *Config) { c.Partitions = maxConcurrentAttempts + 2; c.RequestTimeout = 400 * time.Millisecond }
	m := &mesh{}
	src := &slowSource{fetching: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(func() { close(src.release) })
	c, sc := m.addWith(t, "c", parts)
	_, sb := m.addWith(t, "b", parts)
	m.addWith(t, "d", func(cfg *Config) {
		parts(cfg)
		cfg.RequestTimeout = time.Hour
		configure(cfg)
		src.Transport = cfg.Transport
		cfg.Transport = src
	})
	for p := range maxConcurrentAttempts {
		k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "c", Replicas: base}, sc, sb)
		require.NoError(t, c.startServing(p, k))
		c.wg.Add(1)
		go c.attempt(Step{P: p, Action: Acquire, Claim: k, Replicas: []string{"c", "b", "d"}}, &ring.Table{})
	}
	<-src.fetching
	q := maxConcurrentAttempts
	k := claimOn(t, q, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "c", "b"}}, sc, sb)
	c.wg.Add(1)
	go c.attempt(Step{P: q, Action: Acquire, Claim: k, Replicas: []string{"c", "b"}}, &ring.Table{})
	require.Eventually(t, func() bool { _, serving := c.Serving(q); return serving }, 10*time.Second, 10*time.Millisecond,
		"the takeover of partition %d waits behind the copies to d", q)
	return c
}

// A Sync at a higher ballot replaces a copy still being fetched for a
// lower one (that proposal lost, and the source refuses its fetches once
// it promised the higher ballot), and the lower one, asked again, is
// refused instead of restarting its copy.
func TestSyncAtAHigherBallotReplacesACopyInProgress(t *testing.T) {
	ctx := context.Background()
	src := &slowSource{fetching: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(src.release)
	b, _ := replicaOf(t, func(c *Config) { c.Self = "b"; c.Transport = src })
	b.synced.Store(true)
	base := store.Claim{Epoch: 4, Owner: "a", Replicas: []string{"a", "b", "c"}}
	pos := store.Position{Epoch: 4, LSN: 3}
	low := Sync{P: 1, Ballot: 5, Base: base, Source: "a", Pos: pos, Wait: time.Millisecond}
	high := Sync{P: 1, Ballot: 6, Base: base, Source: "c", Pos: pos, Wait: time.Millisecond}

	r, err := b.HandleSync(ctx, low)
	require.NoError(t, err)
	require.False(t, r.Done)
	<-src.fetching // the copy for ballot 5 is under way

	r, err = b.HandleSync(ctx, high)
	require.NoError(t, err)
	require.False(t, r.Done)
	<-src.fetching // the copy for ballot 6 started, once the other ended
	require.EqualValues(t, 1, src.gaveUp.Load(), "the copy for ballot 5 was not cancelled")
	require.True(t, b.parts[1].copying())

	_, err = b.HandleSync(ctx, low)
	require.ErrorContains(t, err, "a copy for ballot 6 is being fetched")
}

// A Sync to a replica outside the majority that answers soon after the
// majority did is waited for, so that replica holds the copy when the claim
// is announced. Announced first, the claim would make the replica refuse a
// Sync still on its way (it knows a final claim newer than the proposal's
// base), and the replica would lag from the start. Found by the robustness
// harness (wipe, RF 3, seed 70002): with such replicas, a lost data
// directory left partitions with a majority of replicas holding nothing.
func TestReplicaWhoseSyncAnswersLateHoldsTheCopyWhenTheClaimIsAnnounced(t *testing.T) {
	const p = 1
	chosen := make(chan struct{})
	var once sync.Once
	m := &mesh{}
	m.setDrop(func(_, _, kind string) bool {
		if kind == "choose" {
			once.Do(func() { close(chosen) })
		}
		return false
	})
	_, sa := m.add(t, "a")
	late := &pacedFetches{notDone: chosen} // b's copy starts once the claim is chosen
	_, sb := m.addWith(t, "b", func(c *Config) { late.Transport = c.Transport; c.Transport = late })
	m.add(t, "d")
	c, _ := m.add(t, "c")
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a"}}, sa)

	ok, _ := c.acquire(p, k, &ring.Table{}, []string{"c", "b", "d"})
	require.True(t, ok)
	v, ok, err := sb.Get(p, []byte("k"))
	require.NoError(t, err)
	require.True(t, ok, "b does not hold the copy when the claim is announced")
	require.Equal(t, "v1", string(v))
}

// A replica that owned the partition and wrote to its store directly
// (its replication queue position is then stale) takes the new owner's
// first batch that follows its store at once, whether or not that claim's
// Sync reaches it: it used to wait for its turn after the stale position
// and, with the Sync lost, refused every batch of the claim until a resync
// (found in review). A Sync that comes after the batch finds data written
// after its base and is refused; the replica keeps the batch.
func TestBatchFollowingTheReplicasOwnWritesIsAppliedWithoutItsSync(t *testing.T) {
	ctx := context.Background()
	const p = 1
	r, s := replicaOf(t)
	r.synced.Store(true)
	claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "r", "x"}}, s)
	require.NoError(t, apply(ctx, r, write(1, store.Position{Epoch: 1, LSN: 1}, "k", "v2")))
	// r owns claim 2 and writes to its store directly.
	k2 := store.Claim{Epoch: 2, Base: 1, Owner: "r", Replicas: []string{"r", "a", "x"}}
	_, err := s.Choose(ctx, p, k2, true)
	require.NoError(t, err)
	for _, v := range []string{"v3", "v4"} {
		require.NoError(t, s.Commit(ctx, &store.Batch{Partition: p, Epoch: 2, Writes: []store.KV{{Key: []byte("k"), Value: []byte(v)}}}))
	}
	pos := store.Position{Epoch: 2, LSN: 4}
	require.NoError(t, apply(ctx, r, write(3, pos, "k", "from the new owner")), "the batch that follows the store waited for a turn that had passed")
	v, _, err := s.Get(p, []byte("k"))
	require.NoError(t, err)
	require.Equal(t, "from the new owner", string(v))

	_, err = r.HandleSync(ctx, Sync{P: p, Ballot: 3, Base: k2, Source: "a", Pos: pos, Wait: time.Second})
	require.ErrorContains(t, err, "after the proposal's base")
}

// waitForTurn waits until a batch on replica r waits for its turn after
// position pos of partition p.
func waitForTurn(t *testing.T, r *Owner, p int, pos store.Position) {
	t.Helper()
	require.Eventually(t, func() bool { return turnWaited(r.parts[p], pos.LSN) },
		10*time.Second, time.Millisecond, "the batch does not wait for its turn")
}

// replicaCopyingOnePage returns a replica (with its store) whose copies
// come from src, a source that serves one page, k=v1, once src.release is
// closed.
func replicaCopyingOnePage(t *testing.T) (*Owner, *store.Store, *slowSource) {
	src := &slowSource{fetching: make(chan struct{}, 1), release: make(chan struct{}),
		page: []store.Entry{{Kind: store.KindData, Key: []byte("k"), Value: []byte("v1")}}}
	r, s := replicaOf(t, func(c *Config) { c.Transport = src })
	r.synced.Store(true)
	return r, s, src
}

// A copy started for a Sync at ballot 5 from base K (epoch 1) is not
// installed over writes made after K that this replica acknowledged while
// the copy was being fetched (a proposal at ballot 3, chosen first, is
// served). HandleSync checks "holds data written after K" only when the
// copy starts, and Install alone refuses only data at epoch 5 or later.
// Found in review: K's replicas {a, x, y}; P3 is promised by {a, x}, P5
// by {x, y} and adopts P3's value with y as its source; P3 is chosen and
// its owner's writes at 3 reach a majority; P5's copies from y then rolled
// them back.
func TestCopyIsNotInstalledOverWritesMadeAfterItsBaseWhileItRan(t *testing.T) {
	ctx := context.Background()
	const p = 1
	r, s, src := replicaCopyingOnePage(t)
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "a", Replicas: []string{"a", "r", "x"}}, s)
	require.NoError(t, apply(ctx, r, write(1, store.Position{Epoch: 1, LSN: 1}, "tail", "t")))
	req := Sync{P: p, Ballot: 5, Base: k, Source: "x", Pos: store.Position{Epoch: 1, LSN: 1}, Wait: time.Millisecond}
	rep, err := r.HandleSync(ctx, req)
	require.NoError(t, err)
	require.False(t, rep.Done)
	<-src.fetching

	require.NoError(t, apply(ctx, r, write(3, store.Position{Epoch: 1, LSN: 2}, "k", "acknowledged at 3")))

	close(src.release)
	req.Wait = 0 // until the copy ended
	_, err = r.HandleSync(ctx, req)
	require.ErrorIs(t, err, store.ErrPosition)
	v, ok, err := s.Get(p, []byte("k"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "acknowledged at 3", string(v), "the copy for ballot 5 rolled back a write acknowledged at epoch 3")
	m, err := s.Meta(p)
	require.NoError(t, err)
	require.Equal(t, store.Position{Epoch: 3, LSN: 3}, m.Position)
}

// In a resync (the owner acquires its own claim again to catch a replica
// up) the owner waits for a copy outside the majority that makes progress,
// however long it takes: the partition is drained for the attempt anyway,
// and a copy cut short would fail again at every resync (its source moves
// with the owner's first write), so the replica would never catch up.
//
// The lagging replica's other answers may come late too, after the others
// chose the claim, as a replica's whose disk is slow do: it is still
// waited for (a replica from which nothing came back is waited for only
// DrainTimeout, see drive).
func TestResyncWaitsForTheLaggingReplicasWholeCopy(t *testing.T) {
	t.Run("answers at once", func(t *testing.T) { testResyncWaitsForTheLaggingReplicasWholeCopy(t, false) })
	t.Run("answers after the others", func(t *testing.T) { testResyncWaitsForTheLaggingReplicasWholeCopy(t, true) })
}

func testResyncWaitsForTheLaggingReplicasWholeCopy(t *testing.T, lateAnswers bool) {
	const p = 1
	const requestTimeout = 400 * time.Millisecond
	notDone := make(chan struct{})
	m := &mesh{}
	fetches := &pacedFetches{notDone: notDone}
	_, sb := m.addWith(t, "b", func(c *Config) {
		c.RequestTimeout = requestTimeout
		fetches.Transport = c.Transport
		c.Transport = fetches
	})
	_, sd := m.addWith(t, "d", func(c *Config) { c.RequestTimeout = requestTimeout })
	c, sc := m.addWith(t, "c", func(c *Config) {
		c.RequestTimeout = requestTimeout
		if lateAnswers {
			c.Transport = heldUntilCopying(c.Transport, "b")
		}
		c.Transport = syncAnswers{Transport: c.Transport, notDone: notDone}
	})
	// c serves its claim; b, one of its replicas, holds nothing of it (it
	// lost its copy).
	k := claimOn(t, p, store.Claim{Epoch: 1, Owner: "c", Replicas: []string{"c", "b", "d"}}, sc, sd)
	big := bytes.Repeat([]byte("x"), 700<<10) // one entry per page: three pages
	for _, s := range []*store.Store{sc, sd} {
		require.NoError(t, s.Commit(context.Background(), &store.Batch{Partition: p, Epoch: 1, Writes: []store.KV{
			{Key: []byte("k1"), Value: big}, {Key: []byte("k2"), Value: big}, {Key: []byte("k3"), Value: big},
		}}))
	}
	require.NoError(t, c.startServing(p, k))

	ok, _ := c.acquire(p, k, &ring.Table{}, []string{"c", "b", "d"})
	require.True(t, ok)
	require.EqualValues(t, 3, fetches.pages.Load())
	v, ok, err := sb.Get(p, []byte("k3"))
	require.NoError(t, err)
	require.True(t, ok, "the resync announced its claim before b's copy was done")
	require.Equal(t, big, v)
}

// heldUntilCopying returns t with its Prepares, Accepts and Chooses to node
// to held until a Sync answer says to's copy is being fetched.
func heldUntilCopying(t Transport, to string) Transport {
	return &holdUntilCopying{Transport: t, to: to, copying: make(chan struct{})}
}

type holdUntilCopying struct {
	Transport
	to      string
	once    sync.Once
	copying chan struct{}
}

func (h *holdUntilCopying) hold(ctx context.Context, to string) error {
	if to != h.to {
		return nil
	}
	select {
	case <-h.copying:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *holdUntilCopying) Prepare(ctx context.Context, to string, req Prepare) (PromiseReply, error) {
	if err := h.hold(ctx, to); err != nil {
		return PromiseReply{}, err
	}
	return h.Transport.Prepare(ctx, to, req)
}

func (h *holdUntilCopying) Accept(ctx context.Context, to string, req Accept) (AcceptReply, error) {
	if err := h.hold(ctx, to); err != nil {
		return AcceptReply{}, err
	}
	return h.Transport.Accept(ctx, to, req)
}

func (h *holdUntilCopying) Choose(ctx context.Context, to string, req Choose) (ChooseReply, error) {
	if err := h.hold(ctx, to); err != nil {
		return ChooseReply{}, err
	}
	return h.Transport.Choose(ctx, to, req)
}

func (h *holdUntilCopying) Sync(ctx context.Context, to string, req Sync) (SyncReply, error) {
	r, err := h.Transport.Sync(ctx, to, req)
	if err == nil && !r.Done && to == h.to {
		h.once.Do(func() { close(h.copying) })
	}
	return r, err
}

// A new owner's first batch that reaches a replica before the replica's
// copy is installed (its Sync answered after the claim was announced)
// waits for its turn, and goes on as soon as the copy is installed at the
// position it follows, instead of timing out and leaving the replica
// lagging until a resync. Raised in review.
func TestBatchWaitingForACopyGoesOnOnceItIsInstalled(t *testing.T) {
	ctx := context.Background()
	const p = 1
	r, s, src := replicaCopyingOnePage(t)
	base := store.Claim{Epoch: 4, Owner: "a", Replicas: []string{"a", "r", "x"}}
	pos := store.Position{Epoch: 4, LSN: 3}
	req := Sync{P: p, Ballot: 5, Base: base, Source: "a", Pos: pos, Wait: time.Millisecond}
	rep, err := r.HandleSync(ctx, req)
	require.NoError(t, err)
	require.False(t, rep.Done)
	<-src.fetching

	applied := make(chan error, 1)
	go func() { applied <- applyAfterItsTurn(ctx, r, write(5, pos, "k", "from the new owner")) }()
	waitForTurn(t, r, p, pos)

	close(src.release)
	require.NoError(t, <-applied, "the batch timed out although the copy it follows was installed")
	v, ok, err := s.Get(p, []byte("k"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "from the new owner", string(v))
}
