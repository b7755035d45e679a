// Command quickstart runs a small cluster in one process, with the default
// replication factor (3), and shows what the library guarantees: every
// call runs on its key's owner, partitions move with rising epochs when a
// node joins, and a paused owner's late write is refused instead of
// overwriting the new owner's, its call then completing once on the new
// owner.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"

	"github.com/singlewriter/singlewriter/examples/internal/cluster"
	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/router"
	"github.com/singlewriter/singlewriter/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// demo is the running cluster.
type demo struct {
	c *cluster.Cluster
	// pause stops the first slow-inc call after it computed its write.
	pause *cluster.Pause
	// life ends when the demo does: it ends the pause then, not the
	// handler's ctx, which a GC pause would not see either.
	life context.Context
}

func run() error {
	d := &demo{pause: cluster.NewPause()}
	c, err := cluster.New("singlewriter-quickstart-", d.handlers)
	if err != nil {
		return err
	}
	defer c.Close()
	d.c = c

	ctx, cancel := context.WithTimeout(context.Background(), cluster.RunBudget)
	defer cancel() // before c.Close: it ends a pause still waiting
	d.life = ctx
	fmt.Println("Starting 3 nodes on loopback (replication factor 3, the default), data under", c.Dir())
	for i := range 3 {
		if _, err := c.Start(ctx, fmt.Sprintf("node-%d", i)); err != nil {
			return err
		}
	}
	if err := c.WaitSettled(ctx); err != nil {
		return err
	}
	if err := d.routing(ctx); err != nil {
		return err
	}
	if err := d.join(ctx); err != nil {
		return err
	}
	return d.fencing(ctx)
}

// handlers registers the demo's handlers on n.
func (d *demo) handlers(n *router.Node) {
	n.Handle("inc", increment(n))
	n.Handle("get", func(_ context.Context, req *router.Request) ([]byte, error) {
		v, _ := req.State.Get()
		return v, nil
	})
	n.Handle("slow-inc", func(ctx context.Context, req *router.Request) ([]byte, error) {
		out, err := increment(n)(ctx, req)
		if d.pause.Due() {
			d.pause.Wait(d.life) // the write is computed; now a long pause
		}
		return out, err
	})
}

// increment adds one to the key's counter and answers "<node> <epoch> <value>".
func increment(n *router.Node) router.Handler {
	return func(_ context.Context, req *router.Request) ([]byte, error) {
		v, _ := req.State.Get()
		var c uint64
		if len(v) == 8 {
			c = binary.BigEndian.Uint64(v)
		}
		req.State.Put(binary.BigEndian.AppendUint64(nil, c+1))
		return fmt.Appendf(nil, "%s %d %d", n.Name(), req.Epoch, c+1), nil
	}
}

func (d *demo) routing(ctx context.Context) error {
	fmt.Println("\n1. Every call runs on its key's owner, whichever node it enters.")
	fmt.Printf("   %-10s %-9s %-22s %s\n", "key", "partition", "entered at", "ran on (epoch) -> value")
	for i := range 6 {
		key := fmt.Sprintf("order-%d", i)
		for _, entry := range d.c.Nodes() {
			out, err := entry.Call(ctx, []byte(key), "inc", nil)
			if err != nil {
				return err
			}
			node, epoch, value := parseIncrement(out)
			fmt.Printf("   %-10s %-9d %-22s %s (%d) -> %d\n", key, entry.Partition([]byte(key)), entry.Name(), node, epoch, value)
		}
	}
	return nil
}

func (d *demo) join(ctx context.Context) error {
	before := d.claims()
	fmt.Println("\n2. A 4th node joins; the partitions the ring gives it move, each at a higher epoch.")
	if _, err := d.c.Start(ctx, "node-3"); err != nil {
		return err
	}
	if err := d.c.WaitSettled(ctx); err != nil {
		return err
	}
	after := d.claims()
	moved := 0
	for p := range after {
		if after[p].Owner == before[p].Owner {
			continue
		}
		if after[p].Epoch <= before[p].Epoch {
			return fmt.Errorf("partition %d moved without a higher epoch", p)
		}
		if moved < 5 {
			fmt.Printf("   partition %3d: %s at epoch %d -> %s at epoch %d\n", p, before[p].Owner, before[p].Epoch, after[p].Owner, after[p].Epoch)
		}
		moved++
	}
	fmt.Printf("   ... %d of %d partitions moved to node-3.\n", moved, len(after))
	for i := range 6 {
		key := []byte(fmt.Sprintf("order-%d", i))
		v, err := d.c.Nodes()[0].Call(ctx, key, "get", nil)
		if err != nil {
			return err
		}
		if n := binary.BigEndian.Uint64(v); n != 3 {
			return fmt.Errorf("%s = %d after 3 increments", key, n)
		}
		p := d.c.Nodes()[0].Partition(key)
		where := "stayed on " + after[p].Owner
		if after[p].Owner != before[p].Owner {
			where = fmt.Sprintf("moved from %s to %s", before[p].Owner, after[p].Owner)
		}
		fmt.Printf("   %s = 3 (3 increments; its partition %s)\n", key, where)
	}
	return nil
}

// fencing pauses an increment on its key's owner, moves the key's
// partition to a joining node, increments the key there, and releases the
// paused call: its commit must be refused, and Call must complete it on
// the new owner.
func (d *demo) fencing(ctx context.Context) error {
	fmt.Println("\n3. A paused owner wakes up after losing its partition: its write is fenced.")
	nodes := d.c.Nodes()
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name()
	}
	key := []byte(cluster.MovingKey("invoice-%d", 0, names, "node-4"))
	p := nodes[0].Partition(key)
	before, _ := nodes[0].Owner(p)
	old := nodes[slices.IndexFunc(nodes, func(n *router.Node) bool { return n.Name() == before.Owner })]
	type result struct {
		out []byte
		err error
	}
	zombie := make(chan result, 1)
	go func() {
		out, err := old.Call(ctx, key, "slow-inc", nil)
		zombie <- result{out, err}
	}()
	select {
	case <-d.pause.Paused():
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Printf("   %s owns %s (partition %d) at epoch %d; an increment runs there, computes 1 and pauses.\n", old.Name(), key, p, before.Epoch)

	joined, err := d.c.Start(ctx, "node-4")
	if err != nil {
		return err
	}
	if err := d.c.WaitSettled(ctx); err != nil {
		return err
	}
	if old.Stats().DrainTimeouts == 0 {
		return fmt.Errorf("%s's drain did not wait for the paused call", old.Name())
	}
	after, _ := joined.Owner(p)
	out, err := nodes[1].Call(ctx, key, "inc", nil)
	if err != nil {
		return err
	}
	node, epoch, value := parseIncrement(out)
	fmt.Printf("   Meanwhile node-4 joins: it takes partition %d at epoch %d (%s's drain gave up on the\n", p, after.Epoch, old.Name())
	fmt.Printf("   paused call after %s), and an increment runs there: %s (%d) -> %d.\n", cluster.DrainTimeout, node, epoch, value)

	d.pause.Release()
	r := <-zombie
	if r.err != nil {
		return fmt.Errorf("the paused call failed: %w", r.err)
	}
	// An acknowledged paused write would answer "<old owner> <old epoch> 1".
	node, epoch, value = parseIncrement(r.out)
	if node != joined.Name() || value != 2 {
		return fmt.Errorf("the paused owner's write was not fenced: the call answered %q", r.out)
	}
	if err := fencedCommit(ctx, old); err != nil {
		return err
	}
	fmt.Printf("   The paused handler resumes and commits 1 at epoch %d: its replicas refuse it. Call cannot\n", before.Epoch)
	fmt.Printf("   tell whether one of them kept the write, so it asks node-4 under the same request ID;\n")
	fmt.Printf("   the handler runs again there, on the current value: %s (%d) -> %d.\n", node, epoch, value)
	v, err := nodes[2].Call(ctx, key, "get", nil)
	if err != nil {
		return err
	}
	fmt.Printf("   %s = %d: both increments, each applied once.\n", key, binary.BigEndian.Uint64(v))
	fmt.Println("\nDone.")
	return nil
}

// fencedCommit waits until n's paused commit is decided (its answer may
// come after the retry's) and checks that it was refused as stale.
func fencedCommit(ctx context.Context, n *router.Node) error {
	err := cluster.Until(ctx, func() (bool, error) {
		st := n.Stats()
		if st.FencedCommits == 0 && st.FailedCommits > 0 {
			return false, fmt.Errorf("%s's paused commit failed without being fenced", n.Name())
		}
		return st.FencedCommits > 0, nil
	})
	if ctx.Err() != nil {
		return fmt.Errorf("%s's paused commit is not decided: %w", n.Name(), err)
	}
	return err
}

// parseIncrement splits an answer of increment.
func parseIncrement(out []byte) (node string, epoch, value uint64) {
	fmt.Sscanf(string(out), "%s %d %d", &node, &epoch, &value)
	return node, epoch, value
}

// claims returns node-0's view of every partition's claim.
func (d *demo) claims() []store.Claim {
	n := d.c.Nodes()[0]
	out := make([]store.Claim, ring.DefaultPartitions)
	for p := range out {
		out[p], _ = n.Owner(p)
	}
	return out
}
