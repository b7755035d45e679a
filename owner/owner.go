package owner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
)

// clusterIDGossipTimeout bounds the wait for the gossip of this node's
// cluster ID (Ring.SetClusterID); push/pull carries it later if it ends.
const clusterIDGossipTimeout = time.Second

// maxConcurrentAttempts bounds the acquisitions and resumes run at once.
const maxConcurrentAttempts = 16

// Owner serves this node's partitions and acquires the ones the ring
// assigns to it. Create it with New, pass Delegate to the ring, then Start.
type Owner struct {
	cfg    Config
	store  *store.Store
	claims *Claims
	parts  []*partition

	ring Ring
	// unfinal holds, per partition, the chosen claim the store held at
	// load without knowing it final: load leaves it out of the claims
	// table, and reconcile makes it final (see finalize) until the table
	// knows a claim as new. Only load and reconcile touch it.
	unfinal map[int]store.Claim
	// synced is set once a full claims table came from a peer (or this node
	// bootstrapped): a node acquires nothing before.
	synced atomic.Bool
	// leaving is set by Leave: the node acquires nothing any more.
	leaving atomic.Bool
	// streams carry this node's replicated batches, one per replica it
	// sent any to (see stream).
	streamsMu sync.Mutex
	streams   map[string]*stream

	stats counters
	kicks chan struct{}
	// sem bounds the attempts running at once, preCopies the pre-copies
	// (an attempt gives its slot back while it pre-copies: preCopy).
	sem       chan struct{}
	preCopies chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	once      sync.Once
	// closeMu orders Close against Submit, HandleHandoff and startCopy, which start
	// goroutines for callers outside the Owner: they start them under the
	// read lock once they saw closed unset, and Close sets closed under the
	// write lock before it waits, so it waits for every one of them.
	closeMu sync.RWMutex
	closed  bool
	// copyAsked holds when this node last asked for a copy of each
	// partition (askForCopies); only the reconcile loop touches it.
	copyAsked map[int]time.Time
}

// New returns an Owner over cfg.Store, with the claims the store knows.
func New(cfg Config) (*Owner, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := &Owner{
		cfg:       cfg,
		store:     cfg.Store,
		claims:    NewClaims(cfg.Partitions),
		parts:     make([]*partition, cfg.Partitions),
		kicks:     make(chan struct{}, 1),
		sem:       make(chan struct{}, maxConcurrentAttempts),
		preCopies: make(chan struct{}, maxConcurrentAttempts),
		unfinal:   map[int]store.Claim{},
		copyAsked: map[int]time.Time{},
		streams:   map[string]*stream{},
	}
	o.ctx, o.cancel = context.WithCancel(context.Background())
	for p := range o.parts {
		o.parts[p] = &partition{p: p}
	}
	if err := o.load(); err != nil {
		return nil, err
	}
	return o, nil
}

// load reads the cluster ID and, if there is one, checks the partition
// count stored with it and reads the chosen claims from the store (a new
// cluster is created later, by Bootstrap).
func (o *Owner) load() error {
	id, err := o.store.ClusterID()
	if err != nil {
		return err
	}
	if id != "" {
		// Checks the partition count (and stores it in a directory of a
		// build that did not).
		if err := o.store.SetClusterID(id, o.cfg.Partitions); err != nil {
			return fmt.Errorf("owner: %w", err)
		}
		o.claims.SetCluster(id)
		o.synced.Store(o.cfg.Bootstrap)
	}
	ps, err := o.store.Partitions()
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p >= o.cfg.Partitions {
			return fmt.Errorf("owner: store holds partition %d but the cluster has %d", p, o.cfg.Partitions)
		}
		if id == "" {
			// No claim here may be acted on: the store is of a bootstrap
			// interrupted before its last step (Bootstrap writes them
			// again) or of a node that stopped before it stored the
			// cluster it joined (gossip brings them).
			continue
		}
		m, err := o.store.Meta(p)
		if err != nil {
			return err
		}
		switch {
		case m.HasChosen && m.Final:
			o.claims.Merge(p, m.Chosen)
		case m.HasChosen:
			o.unfinal[p] = m.Chosen
		}
	}
	return nil
}

// Bootstrap creates a new cluster, a random cluster ID and the root claim
// (epoch 0, this node) of every partition, if Config.Bootstrap is set and
// no cluster is known: the store holds none and gossip brought none. Call
// it once the ring has joined its seeds, so that a node that lost its
// data directory and restarts with Bootstrap set joins the cluster its
// seeds belong to instead of creating a second one. It reports whether it
// created a cluster.
func (o *Owner) Bootstrap() (bool, error) {
	if o.ctx.Err() != nil {
		return false, ErrClosed
	}
	if !o.cfg.Bootstrap {
		return false, nil
	}
	if stored, err := o.store.ClusterID(); err != nil || stored != "" {
		return false, err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return false, err
	}
	id := hex.EncodeToString(b[:])
	// Reserving the ID refuses, from now on, claims of any other cluster,
	// but neither peers' claims tables nor persistCluster see it before the
	// store holds the root claims and the ID: a crash or an error before
	// that leaves nothing that names it, and the next start bootstraps
	// again.
	if !o.claims.Reserve(id) {
		o.cfg.Logger.Warn("Bootstrap is set but the seeds belong to a cluster: joining it", "cluster", o.claims.Cluster())
		return false, nil
	}
	if o.ring != nil { // else persistCluster tells it, once started
		// The ring's metadata carries the ID from now on, before the
		// cluster exists: a node started with Bootstrap that sees a
		// member with an ID creates none, and waits for its claims.
		if err := o.ring.SetClusterID(id, clusterIDGossipTimeout); err != nil {
			o.cfg.Logger.Warn("cannot gossip the new cluster's ID yet", "err", err)
		}
	}
	root := store.Claim{Owner: o.cfg.Self, Replicas: []string{o.cfg.Self}}
	for p := range o.cfg.Partitions {
		if _, err := o.store.Choose(o.ctx, p, root, true); err != nil {
			return false, err
		}
	}
	// The ID goes last: a crash before it leaves a store that bootstraps again.
	if err := o.store.SetClusterID(id, o.cfg.Partitions); err != nil {
		return false, err
	}
	for p := range o.cfg.Partitions {
		o.claims.Merge(p, root)
	}
	o.claims.Publish()
	o.synced.Store(true)
	o.kick()
	o.cfg.Logger.Info("bootstrapped a new cluster", "cluster", id, "partitions", o.cfg.Partitions)
	return true, nil
}

// Start begins serving and acquiring over the ring r.
func (o *Owner) Start(r Ring) {
	o.ring = r
	o.wg.Add(1)
	go o.run()
}

// Close stops serving and waits for every goroutine of the Owner. It does
// not hand partitions off (see Leave). It is idempotent.
func (o *Owner) Close() {
	o.once.Do(func() {
		o.closeMu.Lock()
		o.closed = true
		o.closeMu.Unlock()
		o.cancel()
		o.wg.Wait()
		for _, pt := range o.parts {
			pt.stop()
		}
	})
}

// Claims returns the node's claims table.
func (o *Owner) Claims() *Claims { return o.claims }

// Lease admits a call on partition p if this node serves it and its store
// has not failed (store.Store.Err, which it then returns); otherwise it
// returns a *NotOwnerError with the newest claim known.
func (o *Owner) Lease(p int) (Lease, error) {
	if o.ctx.Err() != nil {
		return Lease{}, ErrClosed
	}
	if p < 0 || p >= len(o.parts) {
		return Lease{}, fmt.Errorf("owner: partition %d out of range [0,%d)", p, len(o.parts))
	}
	if l, ok := o.parts[p].lease(); ok {
		if err := o.store.Err(); err != nil {
			// Nothing can commit here: a call would run and fail, and a
			// retry run it again, while its batches reach the backups.
			l.Release()
			return Lease{}, fmt.Errorf("owner: partition %d: %w", p, err)
		}
		return l, nil
	}
	c, _ := o.claims.Get(p)
	return Lease{}, &NotOwnerError{P: p, Claim: c}
}

// Serving reports the claim this node serves partition p under, if any;
// none for a partition out of range.
func (o *Owner) Serving(p int) (store.Claim, bool) {
	if p < 0 || p >= len(o.parts) {
		return store.Claim{}, false
	}
	return o.parts[p].servedClaim()
}

// Settled reports whether this node's view has converged: for every
// partition it knows a claim whose owner and replicas are those the ring
// places over the members it sees, and it serves, at that claim's epoch,
// every partition such a claim gives it, and it holds a copy of every
// partition whose claim names it as a replica. Call it after Start.
func (o *Owner) Settled() bool {
	t := o.ring.Table()
	for p, c := range o.claims.Snapshot() {
		if c.Owner == "" || p >= len(t.Owners) || c.Owner != t.Owners[p] || !sameMembers(c.Replicas, t.Replicas[p]) {
			return false
		}
		if served, ok := o.Serving(p); c.Owner == o.cfg.Self && (!ok || served.Epoch != c.Epoch) {
			return false
		}
		if m, err := o.store.Meta(p); err != nil || o.forgot(m, c) {
			return false
		}
	}
	return true
}

// kick asks the loop to look at the ring and the claims again.
func (o *Owner) kick() {
	select {
	case o.kicks <- struct{}{}:
	default:
	}
}

// run is the reconcile loop: it waits for a ring view that has been stable
// for SettleTime, then starts the attempts Plan asks for. The wait starts
// again when the node first gets the cluster's claims: a joining node gets
// them in the same exchange that tells it the members, and its table of
// itself alone, stable since it started, must not be acted on (with
// replicas it would claim partitions with itself as their only replica).
func (o *Owner) run() {
	defer o.wg.Done()
	var version uint64
	var stableAt time.Time
	synced := false
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		t := o.ring.Table()
		changed, claimsChanged := o.ring.Changed(), o.claims.Changed()
		now := time.Now()
		if t.Version != version || stableAt.IsZero() || synced != o.synced.Load() {
			version, stableAt, synced = t.Version, now.Add(o.cfg.SettleTime), o.synced.Load()
		}
		wake := time.Second
		if now.Before(stableAt) {
			wake = stableAt.Sub(now)
		} else {
			wake = min(wake, o.reconcile(t, now))
		}
		timer.Reset(wake)
		select {
		case <-o.ctx.Done():
			return
		case <-changed:
		case <-claimsChanged:
		case <-o.kicks:
		case <-timer.C:
		}
	}
}

// reconcile starts the attempts Plan asks for and returns how long until
// the next backoff ends.
func (o *Owner) reconcile(t *ring.Table, now time.Time) time.Duration {
	if o.leaving.Load() {
		return time.Second
	}
	if err := o.persistCluster(); err != nil {
		o.cfg.Logger.Warn("cannot adopt cluster ID", "err", err)
		return time.Second
	}
	wake := time.Second
	var steps []Step
	for _, p := range slices.Sorted(maps.Keys(o.unfinal)) {
		c := o.unfinal[p]
		if known, ok := o.claims.Get(p); ok && known.Epoch >= c.Epoch {
			delete(o.unfinal, p)
			continue
		}
		steps = append(steps, Step{P: p, Action: Finalize, Claim: c})
	}
	steps = append(steps, Plan(o.cfg.Self, t, o.claims.Snapshot(),
		o.Serving, o.fenced, func(p int) bool { return o.parts[p].dueResync(now) })...)
	for _, s := range steps {
		if s.Action == Acquire && !o.synced.Load() {
			continue
		}
		pt := o.parts[s.P]
		if !pt.tryBusy(now) {
			pt.mu.Lock()
			if pt.retryAt.After(now) {
				wake = min(wake, pt.retryAt.Sub(now))
			}
			pt.mu.Unlock()
			continue
		}
		o.wg.Add(1)
		go o.attempt(s, t)
	}
	o.askForCopies(t, now)
	return wake
}

// persistCluster stores the cluster ID learned by gossip before the node
// takes part in any protocol, and then tells the ring.
func (o *Owner) persistCluster() error {
	id := o.claims.Cluster()
	if id == "" {
		return nil
	}
	cur, err := o.store.ClusterID()
	if err != nil {
		return err
	}
	if cur != id {
		if err := o.CheckBootstrapLeftovers(); err != nil {
			return err
		}
		if err := o.store.SetClusterID(id, o.cfg.Partitions); err != nil {
			return err
		}
	}
	return o.ring.SetClusterID(id, clusterIDGossipTimeout)
}

// CheckBootstrapLeftovers returns an error if the store holds no cluster
// ID but a root claim (epoch 0) naming this node: a Bootstrap of this node
// stopped before it stored its new cluster's ID. Under another cluster,
// those claims would be read as final at the next start, and this node
// would serve partitions it does not own, so the node refuses to adopt
// one (persistCluster) and to start (the router calls it after
// Bootstrap).
func (o *Owner) CheckBootstrapLeftovers() error {
	if id, err := o.store.ClusterID(); err != nil || id != "" {
		return err
	}
	ps, err := o.store.Partitions()
	if err != nil {
		return err
	}
	for _, p := range ps {
		m, err := o.store.Meta(p)
		if err != nil {
			return err
		}
		if m.HasChosen && m.Chosen.Epoch == 0 && m.Chosen.Owner == o.cfg.Self {
			return fmt.Errorf("owner: the data directory holds the root claims of a cluster this node began to create and never served (partition %d): "+
				"it cannot join another cluster with them; start it with an empty data directory", p)
		}
	}
	return nil
}

// takeSlot waits for a slot of the semaphore for partition p's attempt,
// which gives it back with partition.yieldSlot; false if the Owner closed
// first.
func (o *Owner) takeSlot(p int) bool {
	select {
	case o.sem <- struct{}{}:
		o.parts[p].setYield(func() { <-o.sem })
		return true
	case <-o.ctx.Done():
		return false
	}
}

// attempt runs one step for a partition, bounded by the semaphore.
func (o *Owner) attempt(s Step, t *ring.Table) {
	defer o.wg.Done()
	pt := o.parts[s.P]
	if !o.takeSlot(s.P) {
		pt.done(false, time.Now(), o.cfg.RetryBackoff, 0)
		return
	}
	defer pt.yieldSlot() // the slot held at the end, if any (see preCopy)
	if c, known := o.claims.Get(s.P); known && c.Epoch > s.Claim.Epoch && (s.Action == Acquire || s.Action == Resume) {
		// Planned from an older claim than the newest now known (an
		// attempt that ended meanwhile may have made it): plan again.
		pt.done(true, time.Now(), o.cfg.RetryBackoff, 0)
		o.kick()
		return
	}
	if o.leaving.Load() && (s.Action == Acquire || s.Action == Resume) {
		// Leave began: this node takes nothing more. Leave waits for the
		// attempts marked busy before it began (attempting): either this
		// check sees leaving, or Leave sees this attempt.
		pt.done(true, time.Now(), o.cfg.RetryBackoff, 0)
		return
	}
	var ok bool
	var seen = s.Claim.Epoch
	switch s.Action {
	case Resume:
		ok = o.resume(s.P, s.Claim)
	case Acquire:
		ok, seen = o.acquire(s.P, s.Claim, t, s.Replicas)
		if ok {
			o.stats.acquired.Add(1)
		} else {
			o.stats.failedAcquires.Add(1)
		}
	case Release:
		ok = o.learn(o.ctx, s.P, s.Claim) == nil
	case Finalize:
		ok = o.finalize(s.P, s.Claim)
	}
	o.parts[s.P].done(ok, time.Now(), o.cfg.RetryBackoff, seen)
	if !ok {
		o.kick()
	}
}
