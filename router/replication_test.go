package router

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/store"
)

// ledger records, per key, the increments a workload attempted and the
// highest counter value an acknowledged call returned.
type ledger struct {
	mu       sync.Mutex
	attempts map[string]int
	acked    map[string]uint64
	// lastOK and gaps measure unavailability: per key, the time of the last
	// acknowledged call, and the longest time between two of them.
	lastOK map[string]time.Time
	gaps   map[string]time.Duration
}

func newLedger() *ledger {
	return &ledger{attempts: map[string]int{}, acked: map[string]uint64{}, lastOK: map[string]time.Time{}, gaps: map[string]time.Duration{}}
}

// incrementUntil runs one writer per key, each incrementing its key
// through the live nodes in turn, until stop is closed: a key's gaps then
// measure its own partition's unavailability.
func (l *ledger) incrementUntil(c *testCluster, keys []string, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				live := c.live()
				if len(live) == 0 { // the test failed and closed the nodes
					return
				}
				entry := live[i%len(live)]
				l.mu.Lock()
				l.attempts[key]++
				l.mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				v, err := entry.Call(ctx, []byte(key), "inc", nil)
				cancel()
				if err != nil {
					continue // unknown outcome: may or may not have applied
				}
				now := time.Now()
				l.mu.Lock()
				l.acked[key] = max(l.acked[key], binary.BigEndian.Uint64(v))
				if last, ok := l.lastOK[key]; ok {
					l.gaps[key] = max(l.gaps[key], now.Sub(last))
				}
				l.lastOK[key] = now
				l.mu.Unlock()
			}
		}()
	}
	return &wg
}

// waitAcknowledgedSince waits until every key has an increment
// acknowledged after since.
func (l *ledger) waitAcknowledgedSince(t *testing.T, keys []string, since time.Time) {
	t.Helper()
	waitFor(t, 60*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, k := range keys {
			if !l.lastOK[k].After(since) {
				return fmt.Errorf("key %s not acknowledged since %s", k, since.Format(time.StampMicro))
			}
		}
		return nil
	})
}

// accountKeys returns the keys acct-0 to acct-(count-1), and those of them
// that n owns; it fails the test if n owns none.
func accountKeys(t *testing.T, n *Node, count int) (keys []string, owned map[string]bool) {
	t.Helper()
	owned = map[string]bool{}
	for i := range count {
		k := fmt.Sprintf("acct-%d", i)
		keys = append(keys, k)
		if cl, _ := n.Owner(n.Partition([]byte(k))); cl.Owner == n.Name() {
			owned[k] = true
		}
	}
	require.NotEmpty(t, owned, "no key on %s", n.Name())
	return keys, owned
}

// acks returns the number of acknowledged increments so far.
func (l *ledger) acks() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n uint64
	for _, v := range l.acked {
		n += v
	}
	return n
}

// requireNothingLost reads every key through n and checks that it holds at
// least its highest acknowledged value and at most its attempts.
func (l *ledger) requireNothingLost(t *testing.T, n *Node) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, acked := range l.acked {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		v, err := n.Call(ctx, []byte(key), "get", nil)
		cancel()
		require.NoError(t, err, key)
		require.Len(t, v, 8, key)
		got := binary.BigEndian.Uint64(v)
		require.GreaterOrEqual(t, got, acked, "key %s: an acknowledged increment was lost", key)
		require.LessOrEqual(t, got, uint64(l.attempts[key]), "key %s: more increments than attempts", key)
	}
}

func TestReplicatedClusterLosesNothingWhenANodeCrashesUnderTraffic(t *testing.T) {
	c := newReplicatedCluster(t, 5, 3, func(n *Node) {
		n.Handle("inc", counter)
		n.Handle("get", get)
	})
	victim := c.nodes[3]
	// Keys spread over many partitions, some owned by the victim.
	keys, victimOwned := accountKeys(t, victim, 60)

	l := newLedger()
	stop := make(chan struct{})
	writers := l.incrementUntil(c, keys, stop)
	waitFor(t, 30*time.Second, func() error {
		if n := l.acks(); n < 600 {
			return fmt.Errorf("%d acknowledged increments", n)
		}
		return nil
	})
	restart := victim.cfg
	restart.GossipAddr, restart.RPCAddr = victim.GossipAddr(), victim.server.Addr().String()
	crashedAt := time.Now()
	require.NoError(t, victim.Close()) // no Leave: a crash, as far as the others can tell
	c.waitDropped(victim.Name())
	detected := time.Since(crashedAt)
	// Every key, the victim's included, is acknowledged again after the
	// crash: its partitions were taken over from their surviving replicas.
	l.waitAcknowledgedSince(t, keys, crashedAt)
	afterTakeover := l.acks()
	waitFor(t, 30*time.Second, func() error {
		if n := l.acks(); n < afterTakeover+300 {
			return fmt.Errorf("%d acknowledged increments", n)
		}
		return nil
	})
	close(stop)
	writers.Wait()

	c.waitConverged() // every partition back to 3 replicas, none on the victim
	for _, n := range c.live() {
		for p := range n.cfg.Partitions {
			if cl, ok := n.Serving(p); ok {
				require.Len(t, cl.Replicas, 3)
				require.NotContains(t, cl.Replicas, victim.Name())
			}
		}
	}
	l.requireNothingLost(t, c.nodes[0])

	// The victim restarts on its old directory, whose copies are stale: it
	// serves none of them, gets its share of partitions back through new
	// claims that sync it, and answers with every acknowledged write.
	restart.Seeds = []string{c.nodes[0].GossipAddr(), c.nodes[1].GossipAddr()}
	back := c.start(restart)
	c.waitConverged()
	l.requireNothingLost(t, back)

	t.Logf("every survivor dropped the victim %s after the crash", detected.Round(time.Millisecond))
	logGaps(t, "victim's keys", l, func(k string) bool { return victimOwned[k] })
	logGaps(t, "other keys", l, func(k string) bool { return !victimOwned[k] })
}

// logGaps logs the distribution, over the keys selected, of each key's
// longest time without an acknowledged call.
func logGaps(t *testing.T, what string, l *ledger, selected func(key string) bool) {
	var gaps []time.Duration
	for k, g := range l.gaps {
		if selected(k) {
			gaps = append(gaps, g)
		}
	}
	if len(gaps) == 0 {
		return
	}
	slices.Sort(gaps)
	t.Logf("%s: longest gap between acknowledgements, %d keys: min %s, median %s, max %s",
		what, len(gaps), gaps[0].Round(time.Millisecond), gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
}

func TestIsolatedOwnerCannotCommitAndTheMajorityTakesOver(t *testing.T) {
	c := newFaultyCluster(t, 5, 3, func(n *Node) {
		n.Handle("inc", counter)
		n.Handle("get", get)
	})
	x := c.nodes[2]
	var key []byte
	for i := 0; key == nil; i++ {
		k := fmt.Appendf(nil, "acct-%d", i)
		if cl, _ := x.Owner(x.Partition(k)); cl.Owner == x.Name() {
			key = k
		}
	}
	p := x.Partition(key)
	before, _ := x.Serving(p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for range 5 {
		_, err := c.nodes[0].Call(ctx, key, "inc", nil)
		require.NoError(t, err)
	}

	c.isolate(x.Name())
	// The isolated owner still believes it serves p, runs the handler and
	// commits locally, but no other replica confirms: nothing is
	// acknowledged.
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	_, err := x.Call(short, key, "inc", nil)
	cancelShort()
	require.ErrorIs(t, err, ErrUnavailable)
	waitFor(t, 30*time.Second, func() error {
		if x.Stats().FailedCommits == 0 {
			return errorf("the unconfirmed commit is not counted as failed")
		}
		return nil
	})

	// The majority side detects the loss, takes p over from the two other
	// replicas and serves it at a higher epoch, with every acknowledged
	// increment.
	v, err := c.nodes[0].Call(ctx, key, "inc", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(6), binary.BigEndian.Uint64(v), "the isolated owner's unconfirmed increment is not in the data")
	after, _ := c.nodes[0].Owner(p)
	require.NotEqual(t, x.Name(), after.Owner)
	require.Greater(t, after.Epoch, before.Epoch)

	c.heal()
	c.waitConverged()
	v, err = c.nodes[1].Call(ctx, key, "get", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(6), binary.BigEndian.Uint64(v), "after the heal, the value is the majority's")
}

// With replicas, a paused owner's late write is refused by the replicas
// that promised the new owner, and Call, which cannot tell whether another
// replica kept the write, asks the new owner with the same request ID: the
// increment is applied exactly once, by the new owner.
func TestPausedOwnerWithReplicasIsFencedAndTheCallCompletesOnTheNewOwner(t *testing.T) {
	computed, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	c := newReplicatedCluster(t, 4, 3, func(n *Node) {
		n.Handle("get", get)
		n.Handle("inc", counter)
		n.Handle("paused-inc", func(ctx context.Context, req *Request) ([]byte, error) {
			out, err := counter(ctx, req)
			if runs.Add(1) == 1 {
				close(computed) // the write is computed ...
				<-release       // ... and the handler pauses, like a long GC pause
			}
			return out, err
		})
	})
	x := c.nodes[1]
	entry := c.nodes[0]
	key := keyOwnedBy(entry, x.Name())
	p := x.Partition(key)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for range 3 {
		_, err := entry.Call(ctx, key, "inc", nil)
		require.NoError(t, err)
	}

	paused := callAsync(ctx, entry, key, "paused-inc")
	<-computed
	// The handoff half of Leave: x stays up, so its late commit is decided
	// (refused) rather than failed by Close.
	handedOff := make(chan error, 1)
	go func() { handedOff <- x.owner.Leave(ctx) }() // its drain gives up on the paused call
	var next store.Claim
	waitFor(t, 30*time.Second, func() error {
		cl, ok := entry.Owner(p)
		if !ok || cl.Owner == x.Name() {
			return fmt.Errorf("partition %d still claimed by %s", p, cl.Owner)
		}
		next = cl
		return nil
	})
	require.Len(t, next.Replicas, 3, "the handoff keeps every copy")
	require.NotContains(t, next.Replicas, x.Name())
	close(release)

	require.NoError(t, <-paused, "the call completes on the new owner")
	require.EqualValues(t, 2, runs.Load(), "the handler ran on the paused owner, then on the new one")
	v, err := entry.Call(ctx, key, "get", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(4), binary.BigEndian.Uint64(v), "incremented exactly once")
	// The paused owner answers after its commit is decided, but if that
	// answer was lost, the retry did not wait for it.
	var st Stats
	waitFor(t, 30*time.Second, func() error {
		if st = x.Stats(); st.FencedCommits+st.FailedCommits == 0 {
			return fmt.Errorf("the paused owner's commit is not decided")
		}
		return nil
	})
	require.NotZero(t, st.FencedCommits, "the paused owner's commit was refused as stale (%d failed otherwise)", st.FailedCommits)
	require.NoError(t, <-handedOff)
	require.NoError(t, x.Leave(ctx))
}

// A leaving owner drains the calls in flight before the next owner's claim
// is chosen: the next owner asks it to promise first, even though the
// tables already list it as leaving, so a call that ends within the drain
// commits there, once. (Asked together with the backups, it would see
// them promise the new claim first and its commit fenced: the call would
// run a second time at the new owner.)
func TestLeavingOwnerWithReplicasDrainsTheCallInFlight(t *testing.T) {
	running, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	c := newReplicatedCluster(t, 3, 3, func(n *Node) {
		n.Handle("get", get)
		n.Handle("held-inc", func(ctx context.Context, req *Request) ([]byte, error) {
			if runs.Add(1) == 1 {
				close(running)
				<-release
			}
			return counter(ctx, req)
		})
	})
	c.waitConverged()
	x, entry := c.nodes[1], c.nodes[0]
	key := keyOwnedBy(entry, x.Name())
	p := x.Partition(key)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	unblock := sync.OnceFunc(func() { close(release) })
	defer unblock()

	called := callAsync(ctx, entry, key, "held-inc")
	<-running
	left := make(chan error, 1)
	go func() { left <- x.Leave(ctx) }()
	waitFor(t, 30*time.Second, func() error { // its drain began: a Prepare reached it
		if _, ok := x.Serving(p); ok {
			return fmt.Errorf("%s still serves partition %d", x.Name(), p)
		}
		return nil
	})
	unblock()
	require.NoError(t, <-called)
	require.NoError(t, <-left)
	require.EqualValues(t, 1, runs.Load(), "the call ran again at the new owner")
	v, err := entry.Call(ctx, key, "get", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), binary.BigEndian.Uint64(v))
}
