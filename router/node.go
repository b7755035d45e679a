package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/singlewriter/singlewriter/internal/rpc"
	"github.com/singlewriter/singlewriter/owner"
	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
)

// placementVersion names the partition placement rules this build uses;
// nodes that differ are refused.
const placementVersion = 1

// protocolVersion names the encoding of the messages between nodes (the
// RPC handshake, the router's and the owner's messages, the gossiped
// claims). Bump it with any change to them: nodes of builds that differ
// refuse each other at join, with ring.ErrIncompatible naming both, rather
// than fail on every message. Version 2 added Sync.Wait and SyncReply,
// version 3 a call's deadline (callRequest.Budget), version 4 the
// cancellation of a request (wire.FlagCancel), which a node of version 3
// takes for a broken connection, version 5 statusReusedID and the call's
// digest in dedup records (see dedupRecord), version 6 dedupFormat at the
// end of their names (see dedupID): a node of version 5 would not find the
// records of version 6, and run a retry again; version 7 the cluster ID
// in the RPC handshake (rpc.Hello.ClusterID), version 8 the pre-copy
// (msgPreCopy, owner.FetchRequest's Live and Tracker, owner.Page's
// Tracker), whose fetch a node of version 7 would decode wrongly.
const protocolVersion = 8

// Node is one member of a cluster: it serves the partitions it owns and
// routes calls for the others. Create it with New, register handlers with
// Handle, then Start.
type Node struct {
	cfg    Config
	store  *store.Store
	owner  *owner.Owner
	ring   *ring.Ring
	server *rpc.Server
	client *rpc.Client
	exec   *executor
	// fenced counts commits refused by the epoch check, failedCommits the
	// ones that failed otherwise (see Stats).
	fenced, failedCommits atomic.Uint64

	// mu guards handlers.
	mu       sync.RWMutex
	handlers map[string]Handler

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// closeMu orders Close against execute, which starts key workers (adds
	// to wg) under its read lock once it saw closed unset; Close sets
	// closed under the write lock, so no worker starts after its Wait.
	closeMu sync.RWMutex
	closed  bool
	// startMu is held by Start throughout and by Close before it closes
	// what Start created. It guards started, client, ring and server.
	startMu sync.Mutex
	started bool
	// ready is set once Start has built the ring and started the owner over
	// it: the methods that read them (Call, Members, GossipAddr, Settled)
	// may then run, from any goroutine.
	ready atomic.Bool
	once  sync.Once
	// done is closed once the node has stopped. stopErr is the error of a
	// stopped node (ErrClosed, wrapping the store's failure if it had
	// failed), for Err and for the methods that find the node closed: it
	// is set before n.ctx is cancelled and closed is set, so read it only
	// after seeing either.
	done    chan struct{}
	stopErr error
	// stopping counts the goroutine that stopOnStoreFailure starts to
	// stop the node, which Close waits for.
	stopping sync.WaitGroup
}

// New opens the node's store and prepares it; nothing listens or joins
// until Start.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	st, err := store.Open(store.Config{Dir: cfg.DataDir, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("router: open store: %w", err)
	}
	n := &Node{cfg: cfg, store: st, handlers: map[string]Handler{}, done: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.owner, err = owner.New(owner.Config{
		Self:              cfg.Name,
		Partitions:        cfg.Partitions,
		Store:             st,
		ReplicationFactor: cfg.ReplicationFactor,
		Transport:         transport{n},
		Bootstrap:         cfg.Bootstrap,
		AcceptDataLoss:    cfg.AcceptDataLoss,
		SettleTime:        cfg.SettleTime,
		DrainTimeout:      cfg.DrainTimeout,
		Logger:            cfg.Logger.With("node", cfg.Name),
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	n.exec = newExecutor(n)
	return n, nil
}

// Handle registers h for method. Register every method before Start, and
// the same methods on every node: a call that reaches a node without its
// method fails with ErrUnknownMethod. It panics if method is empty or h is
// nil.
func (n *Node) Handle(method string, h Handler) {
	if method == "" || h == nil {
		panic(fmt.Sprintf("router: Handle(%q) with an empty method or a nil handler", method))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.handlers[method] = h
}

func (n *Node) handler(method string) Handler {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.handlers[method]
}

// Start listens for RPCs, joins the gossip through the seeds (until ctx
// ends) and begins serving and acquiring partitions.
//
// Close may run at any time, from any goroutine: it ends a Start in
// progress, which then returns an error, and waits for it. A Start that
// fails closes the node (the store included): a later Start returns
// ErrClosed, and trying again takes a new Node.
func (n *Node) Start(ctx context.Context) error {
	n.startMu.Lock()
	if n.started {
		n.startMu.Unlock()
		if n.isClosed() {
			return ErrClosed
		}
		return errors.New("router: Start called twice")
	}
	err := n.start(ctx)
	n.startMu.Unlock()
	if err == nil {
		return nil
	}
	closedMeanwhile := n.isClosed()
	n.Close() // outside startMu, which Close takes
	if closedMeanwhile && !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w during Start: %w", ErrClosed, err)
	}
	return err
}

// start is Start under startMu. On failure it returns the error and leaves
// what it created to Close, having closed only what it did not publish.
func (n *Node) start(ctx context.Context) error {
	if n.isClosed() {
		return ErrClosed
	}
	n.started = true
	// Close ends a join in progress: it cancels n.ctx, then waits for
	// startMu.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(n.ctx, stop)()
	// The cluster ID goes in each handshake's Hello (rpc's ClusterID): a
	// node that creates or joins its cluster in this Start has none yet.
	hello := rpc.Hello{Cluster: fmt.Sprintf("%+v", n.cfg.fingerprint()), Node: n.cfg.Name}
	checkHello := func(h rpc.Hello) error {
		if h.Cluster != hello.Cluster {
			return fmt.Errorf("router: peer %q is of cluster %s, we are %s", h.Node, h.Cluster, hello.Cluster)
		}
		if ours := n.owner.Claims().Cluster(); ours != "" && h.ClusterID != "" && h.ClusterID != ours {
			return fmt.Errorf("%w: peer %q belongs to cluster ID %s, we to %s", store.ErrClusterMismatch, h.Node, h.ClusterID, ours)
		}
		return nil
	}
	ln, err := n.listen(ctx)
	if err != nil {
		return fmt.Errorf("router: listen on %s: %w", n.cfg.RPCAddr, err)
	}
	// Client and server share one frame limit: a request or a response that
	// one end allows must not make the other drop the connection.
	maxFrame := frameLimit(n.cfg.MaxPayload)
	clusterID := n.owner.Claims().Cluster
	ccfg := rpc.ClientConfig{Hello: hello, ClusterID: clusterID, Secret: n.cfg.SecretKey, Accept: checkHello, MaxFrame: maxFrame, Logger: n.cfg.Logger}
	if n.cfg.Network != nil {
		ccfg.Dial = n.cfg.Network.Dial
	}
	if n.cfg.TLS != nil {
		ccfg.Dial = dialTLS(ccfg.Dial, n.cfg.TLS)
	}
	n.client = rpc.NewClient(ccfg)
	rc := n.cfg.gossipConfig()
	if n.cfg.Network != nil {
		if rc.Transport, err = n.cfg.Network.Gossip(rc.BindAddr, rc.BindPort); err != nil {
			ln.Close()
			return fmt.Errorf("router: gossip transport on %s: %w", n.cfg.GossipAddr, err)
		}
	}
	rc.RPCAddr, rc.ClusterID, rc.Delegate = ln.Addr().String(), n.owner.Claims().Cluster(), n.owner
	n.ring, err = ring.New(rc)
	if err != nil {
		if rc.Transport != nil {
			rc.Transport.Shutdown()
		}
		ln.Close()
		return err
	}
	n.owner.Start(n.ring)
	n.ready.Store(true)
	// Serve only now: every handler needs the ring, and a restarted node's
	// peers, which still know its address, may call it at once.
	n.server, err = rpc.Serve(rpc.ServerConfig{
		Listener: ln, Handler: n.serve, Hello: hello, ClusterID: clusterID, Secret: n.cfg.SecretKey, Accept: checkHello,
		MaxFrame: maxFrame, Logger: n.cfg.Logger,
	})
	if err != nil {
		ln.Close()
		return err
	}
	if err := n.ring.Join(ctx); err != nil {
		return fmt.Errorf("router: join: %w", err)
	}
	// Only now: the seeds' cluster, if they have one, arrived with the join.
	created, err := n.bootstrap(ctx)
	if err != nil {
		return fmt.Errorf("router: bootstrap: %w", err)
	}
	if err := n.owner.CheckBootstrapLeftovers(); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	if created {
		// Members that joined before there was a cluster get its claims
		// now, not at their next push/pull.
		n.ring.PushState()
	}
	if n.ctx.Err() != nil { // Close began after the join
		return ErrClosed
	}
	n.wg.Add(3)
	go n.pruneResponses()
	go n.dropDeparted()
	go n.stopOnStoreFailure()
	return nil
}

// bootstrap creates a new cluster (see Config.Bootstrap) unless the
// cluster exists (a member carries its ID) or another member started with
// Bootstrap sorts first by name (Ring.Founders): of several such nodes
// that see each other, one creates the cluster and the others join it,
// instead of each creating its own. A node that left the creation to
// another waits until the cluster reaches it or ctx ends; it never
// creates one after that, even if the other node seems gone (a network
// partition looks the same).
func (n *Node) bootstrap(ctx context.Context) (bool, error) {
	if !n.cfg.Bootstrap {
		return false, nil
	}
	yielded := false
	for {
		changed, claimsChanged := n.ring.Changed(), n.owner.Claims().Changed()
		if n.owner.Claims().Cluster() != "" {
			return false, nil
		}
		founders := n.ring.Founders()
		if !yielded && len(founders) > 0 && founders[0] == n.cfg.Name {
			return n.owner.Bootstrap()
		}
		if !yielded {
			yielded = true
			n.cfg.Logger.Info("router: waiting for the cluster another node creates", "node", n.cfg.Name, "founders", founders)
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("waiting for the cluster that another node started with Bootstrap creates: %w; "+
				"if it never does, start this node again once that node is gone", ctx.Err())
		case <-changed:
		case <-claimsChanged:
		case <-time.After(time.Second):
		}
	}
}

// frameLimit is the largest RPC frame of nodes whose Config.MaxPayload is
// maxPayload. The largest frame is a fetched page: its first entry may be
// a key of store.MaxKeySize with a value of maxPayload, over the page's
// budget, and the cursor of the next page repeats the key.
func frameLimit(maxPayload int) int {
	return max(maxPayload, owner.FetchPageBytes) + 2*store.MaxKeySize + 64<<10
}

// failureLeaveTimeout bounds how long a node whose store failed waits for
// its leave to be gossiped before it closes anyway.
const failureLeaveTimeout = 5 * time.Second

// stopOnStoreFailure stops the node when its store fails (a write or a sync
// failed: a full disk, an I/O error). The store then refuses every write,
// so the node can serve nothing, and it neither hands partitions off nor
// answers a promise: nothing it holds is trusted. The node leaves the
// gossip at once (see stop), so that the others place its partitions
// elsewhere without waiting for failure detection (with replication factor
// 3 they take them over from the backups; with 1 they wait for this node's
// restart), and closes.
func (n *Node) stopOnStoreFailure() {
	defer n.wg.Done()
	select {
	case <-n.ctx.Done():
	case <-n.store.Failed():
		n.cfg.Logger.Error("router: the store failed; the node leaves the cluster and closes", "node", n.cfg.Name, "err", n.store.Err())
		n.stopping.Add(1)
		go func() { // not on wg, which stop waits for
			defer n.stopping.Done()
			if err := n.stop(); err != nil {
				n.cfg.Logger.Warn("router: stopping after the store failed", "node", n.cfg.Name, "err", err)
			}
		}()
	}
}

// dropDeparted breaks the RPC connections to each member that leaves this
// node's table (it left, or gossip declared it dead; a member that only
// announced it is leaving still serves), failing the calls in
// flight to it: Call then retries them, with the same request ID, at the
// partition's next owner. Without it, a call forwarded to an owner that
// froze, or whose network went silent, would wait for its context: such a
// peer never closes the connection.
func (n *Node) dropDeparted() {
	defer n.wg.Done()
	var members map[string]bool
	for {
		changed := n.ring.Changed()
		now := map[string]bool{}
		t := n.ring.Table()
		for _, m := range slices.Concat(t.Members, t.Leaving) {
			now[m.Name] = true
		}
		for name := range members {
			if !now[name] {
				n.client.DropNode(name, fmt.Errorf("router: %s left this node's view of the cluster", name))
			}
		}
		members = now
		select {
		case <-changed:
		case <-n.ctx.Done():
			return
		}
	}
}

// listen opens the RPC listener, on Config.Network if set, serving TLS
// if Config.TLS is set.
func (n *Node) listen(ctx context.Context) (net.Listener, error) {
	var ln net.Listener
	var err error
	if n.cfg.Network != nil {
		ln, err = n.cfg.Network.Listen(ctx, n.cfg.RPCAddr)
	} else {
		var lc net.ListenConfig
		ln, err = lc.Listen(ctx, "tcp", n.cfg.RPCAddr)
	}
	if err != nil || n.cfg.TLS == nil {
		return ln, err
	}
	return tlsListener{ln, n.cfg.TLS}, nil
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// GossipAddr returns the gossip address the node bound, for other nodes'
// Seeds; "" until Start has bound it.
func (n *Node) GossipAddr() string {
	if !n.ready.Load() {
		return ""
	}
	return n.ring.GossipAddr()
}

// Partition returns the partition of key.
func (n *Node) Partition(key []byte) int { return ring.Partition(key, n.cfg.Partitions) }

// Owner returns the newest claim this node knows for partition p: its owner
// and epoch.
func (n *Node) Owner(p int) (store.Claim, bool) { return n.owner.Claims().Get(p) }

// Serving reports whether this node serves partition p, and at which
// claim.
func (n *Node) Serving(p int) (store.Claim, bool) { return n.owner.Serving(p) }

// Settled reports whether this node's view of the cluster has converged:
// every partition's newest known claim has the owner and replicas that
// placement gives over the members this node sees, this node serves the
// partitions it owns, and it holds a copy of every partition whose claim
// names it as a replica (after a lost data directory, once they were
// synced to it again). A readiness check can poll it, and a rolling
// replacement of disks should wait for it between nodes; it is one node's
// view, so a cluster has settled when all its nodes are, each seeing all
// the others (Members). It is false until Start has built the ring.
func (n *Node) Settled() bool { return n.ready.Load() && n.owner.Settled() }

// Audit returns partition p's epoch transitions as this node recorded
// them, oldest first: every claim it learned was chosen, with its owner.
// Checkers compare the audits of all nodes: no epoch may have two owners.
func (n *Node) Audit(p int) ([]store.AuditRecord, error) {
	if n.isClosed() {
		return nil, n.stopErr
	}
	if p < 0 || p >= n.cfg.Partitions {
		return nil, fmt.Errorf("router: partition %d out of range [0,%d)", p, n.cfg.Partitions)
	}
	return n.store.Audit(p)
}

// isClosed reports whether Close has begun.
func (n *Node) isClosed() bool {
	n.closeMu.RLock()
	defer n.closeMu.RUnlock()
	return n.closed
}

// Members returns the names of the members in this node's view; none
// until Start has built the ring.
func (n *Node) Members() []string {
	if !n.ready.Load() {
		return nil
	}
	var names []string
	for _, m := range n.ring.Table().Members {
		names = append(names, m.Name)
	}
	return names
}

func (n *Node) rpcAddr(name string) (string, error) {
	m, ok := n.ring.Table().Member(name)
	if !ok {
		return "", fmt.Errorf("router: node %q is not a member", name)
	}
	return m.RPCAddr, nil
}

// Leave takes this node out of every partition, leaves the gossip and
// closes the node: it tells the others it is leaving (their tables place
// nothing on it), hands the partitions it owns to the nodes that own them
// next, and waits until the owners of those it backs up have acquired
// them again without it. Its data directory may then go. If ctx ends
// first, or no other member is left to take them (this is the last node,
// or every other is leaving too), it returns an error naming how many
// partitions it still holds: they stay in its data directory, and the
// node closes without leaving the gossip, so that the others see it fail,
// after failure detection, as after Close.
func (n *Node) Leave(ctx context.Context) error {
	if n.isClosed() {
		return n.stopErr
	}
	if !n.ready.Load() { // never started, or Start failed before the ring
		return n.Close()
	}
	err := n.owner.Leave(ctx)
	if err == nil {
		err = n.ring.Leave(ctx)
	}
	return errors.Join(err, n.Close())
}

// Close stops the node without handing its partitions off, as a crash
// would, but cleanly: in-flight calls fail (the contexts of the handlers
// running here end, whether their call came from another node or from
// this one), and a restart with the same Name and DataDir serves its
// partitions again. It returns once every handler running here has
// returned, so a handler must end when its context does. It is
// idempotent.
func (n *Node) Close() error {
	err := n.stop()
	n.stopping.Wait()
	return err
}

// Done returns a channel that is closed once the node has stopped: Close
// or Leave has returned, or the node stopped by itself because its store
// failed (see Err).
func (n *Node) Done() <-chan struct{} { return n.done }

// Err returns nil until Done is closed, then why the node stopped:
// ErrClosed after Close or Leave; if its store had failed (a full disk, an
// I/O error), an error that matches both ErrClosed and store.ErrFailed.
// A node whose store fails leaves the cluster and closes by itself; a
// restart with the same DataDir serves again everything it acknowledged.
func (n *Node) Err() error {
	select {
	case <-n.done:
		return n.stopErr
	default:
		return nil
	}
}

// stop is Close, without waiting for a stop that stopOnStoreFailure
// started. A node whose store failed, whoever stops it, also leaves the
// gossip, and its Err and its calls name the failure.
func (n *Node) stop() error {
	var err error
	n.once.Do(func() {
		failure := n.store.Err()
		n.stopErr = ErrClosed
		if failure != nil {
			n.stopErr = fmt.Errorf("%w: %w", ErrClosed, failure)
		}
		n.closeMu.Lock()
		n.closed = true
		n.closeMu.Unlock()
		n.cancel()
		n.startMu.Lock() // a Start in progress ends: its join is cancelled
		defer n.startMu.Unlock()
		if n.server != nil {
			err = errors.Join(err, n.server.Close())
		}
		n.owner.Close()
		if n.ring != nil {
			if failure != nil {
				ctx, cancel := context.WithTimeout(context.Background(), failureLeaveTimeout)
				err = errors.Join(err, n.ring.Leave(ctx))
				cancel()
			}
			err = errors.Join(err, n.ring.Close())
		}
		if n.client != nil {
			err = errors.Join(err, n.client.Close())
		}
		n.wg.Wait()
		err = errors.Join(err, n.store.Close())
		close(n.done)
	})
	return err
}

// pruneResponses deletes stored responses older than DedupRetention.
func (n *Node) pruneResponses() {
	defer n.wg.Done()
	t := time.NewTicker(max(n.cfg.DedupRetention/10, time.Second))
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case now := <-t.C:
			if _, err := n.store.PruneResponses(n.ctx, now.Add(-n.cfg.DedupRetention)); err != nil && n.ctx.Err() == nil {
				n.cfg.Logger.Warn("pruning stored responses failed", "err", err)
			}
		}
	}
}
