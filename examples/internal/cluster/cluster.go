// Package cluster starts a demo cluster for the example programs: several
// router.Nodes in one process, on loopback sockets, with their data in a
// temporary directory and timings short enough for a demo.
//
//	c, err := cluster.New("singlewriter-demo-", func(n *router.Node) {
//		n.Handle("get", get)
//	})
//	if err != nil { ... }
//	defer c.Close()
//	for _, name := range []string{"node-0", "node-1", "node-2"} {
//		if _, err := c.Start(ctx, name); err != nil { ... }
//	}
//	if err := c.WaitSettled(ctx); err != nil { ... }
//
// The first node started bootstraps the cluster; each later one joins
// through the gossip addresses of the nodes already running. The nodes
// keep three copies of each partition, router.Config's default, unless New
// is given ReplicationFactor.
// Pause is the demos' hook for stopping a handler midway while a partition
// moves, and MovingKey picks a key whose partition a joining node takes.
package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/singlewriter/singlewriter/router"
)

// Demo timings: a cluster on loopback settles and hands partitions off in
// well under a second with these (router.Config documents each).
const (
	settleTime = 100 * time.Millisecond
	// replicatedSettleTime is settleTime with replication: a membership
	// change then moves the replicas of many more partitions, so nodes
	// started together wait until they all see each other and acquire once,
	// rather than once per membership on the way.
	replicatedSettleTime = 500 * time.Millisecond
	// DrainTimeout is how long a node waits for the calls in flight on a
	// partition it hands off; a call still running then is fenced.
	DrainTimeout     = 300 * time.Millisecond
	pushPullInterval = 500 * time.Millisecond
)

// RunBudget bounds one run of a demo. A run takes 5-20 s, failure
// detection included, but has taken over a minute under the race detector
// beside other test packages on 2 cores.
const RunBudget = 3 * time.Minute

// Cluster is a set of nodes running in this process.
type Cluster struct {
	dir   string
	setup func(*router.Node)
	// rf is every node's router.Config.ReplicationFactor.
	rf int

	// mu guards nodes and started.
	mu sync.Mutex
	// nodes are the running nodes, in start order.
	nodes []*router.Node
	// started counts the nodes ever started: only the first bootstraps.
	started int
}

// Option changes the nodes New's cluster starts.
type Option func(*Cluster)

// ReplicationFactor starts every node with router.Config.ReplicationFactor
// rf: 1, 3 (the default) or 5. With 1, a crashed node's partitions wait
// for it to restart; with 3 or 5, the survivors take them over once they
// detect the failure, after about 4-5 s. Replicated nodes wait 500 ms
// instead of 100 ms for a stable membership before they acquire
// partitions, so that nodes started together acquire once.
func ReplicationFactor(rf int) Option {
	return func(c *Cluster) { c.rf = rf }
}

// New creates an empty cluster whose nodes keep their data under a new
// temporary directory named with prefix. setup registers the handlers on
// every node before it starts.
func New(prefix string, setup func(*router.Node), opts ...Option) (*Cluster, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, setup: setup, rf: router.DefaultReplicationFactor}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Dir returns the directory holding the nodes' data.
func (c *Cluster) Dir() string { return c.dir }

// Nodes returns the running nodes, in start order.
func (c *Cluster) Nodes() []*router.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

// Start starts a node named name and joins it to the running nodes; the
// cluster's first node bootstraps a new cluster instead. Once the first
// node runs, several Starts may run at once.
func (c *Cluster) Start(ctx context.Context, name string) (*router.Node, error) {
	c.mu.Lock()
	var seeds []string
	for _, n := range c.nodes {
		seeds = append(seeds, n.GossipAddr())
	}
	bootstrap := c.started == 0
	c.started++
	c.mu.Unlock()
	settle := settleTime
	if c.rf > 1 {
		settle = replicatedSettleTime
	}
	n, err := router.New(router.Config{
		Name:              name,
		DataDir:           filepath.Join(c.dir, name),
		Seeds:             seeds,
		Bootstrap:         bootstrap,
		ReplicationFactor: c.rf,
		SettleTime:        settle,
		DrainTimeout:      DrainTimeout,
		PushPullInterval:  pushPullInterval,
	})
	if err != nil {
		return nil, err
	}
	c.setup(n)
	if err := n.Start(ctx); err != nil {
		n.Close()
		return nil, err
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	return n, nil
}

// WaitSettled waits until every running node sees all the others and has
// settled (router.Node.Settled): every partition's claim names the owner
// and the replicas the ring places it on, and that owner serves it.
func (c *Cluster) WaitSettled(ctx context.Context) error {
	nodes := c.Nodes()
	settled := func() bool {
		for _, n := range nodes {
			if len(n.Members()) != len(nodes) || !n.Settled() {
				return false
			}
		}
		return true
	}
	if err := Until(ctx, func() (bool, error) { return settled(), nil }); err != nil {
		return fmt.Errorf("cluster did not settle: %w", err)
	}
	return nil
}

// Until calls cond every 20 ms until it reports done or fails, and
// returns its error, or ctx's once ctx ends.
func Until(ctx context.Context, cond func() (done bool, err error)) error {
	for {
		if done, err := cond(); done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Leave stops n as a deploy's SIGTERM handler does: it hands n's
// partitions to the nodes that own them next, leaves the gossip and closes
// n (router.Node.Leave).
func (c *Cluster) Leave(ctx context.Context, n *router.Node) error {
	err := n.Leave(ctx)
	c.forget(n)
	return err
}

// Crash stops n as a crash would: it closes n without handing its
// partitions off (router.Node.Close). With replication factor 1 they stay
// unavailable until n restarts with its data directory; with 3 or 5 the
// other nodes take them over once they detect the failure. Unlike a
// crash, Close waits for the handlers running on n to return. It ends the
// ctx of every handler running on n, whether its call came from another
// node or from n itself: a handler that ignores its ctx blocks Crash.
func (c *Cluster) Crash(n *router.Node) error {
	err := n.Close()
	c.forget(n)
	return err
}

// forget drops n from the running nodes.
func (c *Cluster) forget(n *router.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes = slices.DeleteFunc(c.nodes, func(m *router.Node) bool { return m == n })
}

// Close closes every running node and removes the data directory.
func (c *Cluster) Close() {
	for _, n := range c.Nodes() {
		c.Crash(n)
	}
	os.RemoveAll(c.dir)
}
