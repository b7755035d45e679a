package owner

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
	"github.com/stretchr/testify/require"
)

// slowSource is a Transport whose fetches block until release is closed
// (a large partition being copied) and then return page, the whole copy,
// or fail if page is nil; it records the Handoffs sent and counts the
// fetches that gave up on their context.
type slowSource struct {
	Transport
	fetching chan struct{}
	release  chan struct{}
	page     []store.Entry
	gaveUp   atomic.Int32
	mu       sync.Mutex
	handoffs []Handoff
}

func (s *slowSource) Fetch(ctx context.Context, _ string, _ FetchRequest) (Page, error) {
	select {
	case s.fetching <- struct{}{}:
	default:
	}
	select {
	case <-s.release:
		if s.page != nil {
			return Page{Entries: s.page}, nil
		}
		return Page{}, context.Canceled
	case <-ctx.Done():
		s.gaveUp.Add(1)
		return Page{}, ctx.Err()
	}
}

func (s *slowSource) Handoff(_ context.Context, _ string, req Handoff) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handoffs = append(s.handoffs, req)
	return nil
}

// A backup that holds nothing of a partition yet, but is copying it right
// now (the owner's acquisition syncs it; a large partition takes a while),
// must not ask the owner for a copy: the owner would acquire the partition
// again, and its new promise makes every Fetch of the copy in progress fail
// (HandleFetch refuses the old ballot). A copy that takes longer than the
// ask interval would then never complete, and the owner would re-acquire
// (drain, new epoch) the partition every few seconds, for good.
func TestBackupDoesNotAskForACopyWhileOneIsBeingCopied(t *testing.T) {
	ctx := context.Background()
	src := &slowSource{fetching: make(chan struct{}, 1), release: make(chan struct{})}
	b, _ := replicaOf(t, func(c *Config) { c.Self = "b"; c.Transport = src })
	b.synced.Store(true)
	c := store.Claim{Epoch: 4, Owner: "a", Replicas: []string{"a", "b", "c"}}
	require.NoError(t, b.learn(ctx, 1, c)) // gossip brought it

	copied := make(chan error, 1)
	go func() {
		copied <- syncCopy(ctx, b, Sync{P: 1, Ballot: 5, Base: c, Source: "a", Pos: store.Position{Epoch: 4, LSN: 3}})
	}()
	<-src.fetching // the copy is under way

	table := &ring.Table{
		Owners:   []string{"a", "a", "a", "a"},
		Replicas: [][]string{c.Replicas, c.Replicas, c.Replicas, c.Replicas},
	}
	b.askForCopies(table, time.Now())
	b.Close() // waits for the ask goroutines
	close(src.release)
	require.Error(t, <-copied)

	src.mu.Lock()
	defer src.mu.Unlock()
	for _, h := range src.handoffs {
		require.NotEqual(t, 1, h.P, "asked the owner to acquire partition 1 again while its copy was being fetched")
	}
}

// fixedRing is a Ring whose table never changes.
type fixedRing struct{ t *ring.Table }

func (r fixedRing) Table() *ring.Table                       { return r.t }
func (r fixedRing) Changed() <-chan struct{}                 { return nil }
func (r fixedRing) Broadcast([]byte)                         {}
func (r fixedRing) SetClusterID(string, time.Duration) error { return nil }
func (r fixedRing) SetLeaving(time.Duration) error           { return nil }

// preparesSeen is a Transport that records the Prepares sent and answers
// none.
type preparesSeen struct {
	Transport
	mu       sync.Mutex
	prepared []string
}

func (s *preparesSeen) Prepare(_ context.Context, to string, _ Prepare) (PromiseReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prepared = append(s.prepared, to)
	return PromiseReply{}, context.Canceled
}

// A backup's ask for a copy is a Handoff to the claim's owner itself. The
// asker checked that its own ring gives the partition to that owner, but
// the owner's ring may already give it to another node (one that joined):
// the owner must then not acquire the partition again (with the asker's
// replica set), racing the ring's owner, whose acquisition syncs the
// replicas anyway. A Leave's Handoff never goes to the claim's owner.
func TestAskForACopyDoesNotMakeANodeThatIsNotTheRingsOwnerAcquire(t *testing.T) {
	ctx := context.Background()
	tr := &preparesSeen{}
	a, _ := replicaOf(t, func(c *Config) { c.Self = "a"; c.Transport = tr })
	a.synced.Store(true)
	c := store.Claim{Epoch: 4, Owner: "a", Replicas: []string{"a", "b", "c"}}
	require.NoError(t, a.learn(ctx, 1, c))
	moved := []string{"n", "a", "b"} // n joined: a's ring gives partition 1 to n
	a.ring = fixedRing{&ring.Table{
		Owners:   []string{"n", "n", "n", "n"},
		Replicas: [][]string{moved, moved, moved, moved},
	}}

	_ = a.HandleHandoff(Handoff{P: 1, Replicas: c.Replicas}) // b's ask, from its older view
	pt := a.parts[1]
	require.Eventually(t, func() bool { // the attempt, if one started, has ended
		pt.mu.Lock()
		defer pt.mu.Unlock()
		return !pt.busy
	}, 10*time.Second, time.Millisecond)
	a.Close()

	tr.mu.Lock()
	defer tr.mu.Unlock()
	require.Empty(t, tr.prepared, "a acquired partition 1, which its ring gives to n")
}
