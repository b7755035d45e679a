// Command quickstart runs a small cluster in one process and shows what
// the library guarantees: every call runs on its key's owner, partitions
// move with rising epochs when a node joins, and a paused owner's late
// write is refused instead of overwriting the new owner's.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

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
	// paused and release drive the handler that pauses mid-call.
	paused  chan struct{}
	release chan struct{}
}

func run() error {
	d := &demo{paused: make(chan struct{}), release: make(chan struct{})}
	c, err := cluster.New("singlewriter-quickstart-", d.handlers)
	if err != nil {
		return err
	}
	defer c.Close()
	d.c = c

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	fmt.Println("Starting 3 nodes on loopback, data under", c.Dir())
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
	n.Handle("put", func(_ context.Context, req *router.Request) ([]byte, error) {
		req.State.Put(req.Payload)
		return nil, nil
	})
	n.Handle("slow-put", func(_ context.Context, req *router.Request) ([]byte, error) {
		req.State.Put(req.Payload)
		close(d.paused) // the write is computed; now a long pause
		<-d.release
		return nil, nil
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
			var node string
			var epoch, value uint64
			fmt.Sscanf(string(out), "%s %d %d", &node, &epoch, &value)
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
		fmt.Printf("   %s = %d (3 increments before the move, none lost)\n", key, binary.BigEndian.Uint64(v))
	}
	return nil
}

func (d *demo) fencing(ctx context.Context) error {
	fmt.Println("\n3. A paused owner wakes up after losing its partition: its write is fenced.")
	nodes := d.c.Nodes()
	leaving := nodes[3]
	var key []byte
	for i := 0; key == nil; i++ {
		k := fmt.Appendf(nil, "invoice-%d", i)
		if c, _ := leaving.Owner(leaving.Partition(k)); c.Owner == leaving.Name() {
			key = k
		}
	}
	p := leaving.Partition(key)
	c, _ := leaving.Owner(p)
	fmt.Printf("   %s owns %s (partition %d) at epoch %d; its handler computes a write and pauses.\n", leaving.Name(), key, p, c.Epoch)
	zombie := make(chan error, 1)
	go func() {
		_, err := leaving.Call(ctx, key, "slow-put", []byte("written by the paused owner"))
		zombie <- err
	}()
	<-d.paused
	left := make(chan error, 1)
	go func() { left <- d.c.Leave(ctx, leaving) }()
	var next store.Claim
	for next.Owner == "" || next.Owner == leaving.Name() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		next, _ = nodes[0].Owner(p)
	}
	fmt.Printf("   Meanwhile %s leaves: %s takes partition %d at epoch %d and writes.\n", leaving.Name(), next.Owner, p, next.Epoch)
	if _, err := nodes[1].Call(ctx, key, "put", []byte("written by the new owner")); err != nil {
		return err
	}
	close(d.release)
	err := <-zombie
	if !errors.Is(err, router.ErrStaleEpoch) {
		return fmt.Errorf("the paused owner's write was not fenced: %v", err)
	}
	fmt.Printf("   The paused handler resumes and commits at epoch %d: refused.\n     %v\n", c.Epoch, err)
	if err := <-left; err != nil {
		return err
	}
	v, err := nodes[1].Call(ctx, key, "get", nil)
	if err != nil {
		return err
	}
	fmt.Printf("   %s = %q: only the new owner's write is there.\n", key, v)
	fmt.Println("\nDone.")
	return nil
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
