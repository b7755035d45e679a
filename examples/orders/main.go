// Command orders runs a per-key state machine on a small cluster: an order
// goes created -> paid -> shipped, every transition sent through a
// different instance, invalid ones refused by the handler. Then a writer
// paused mid-call loses the order's partition to a joining node, and its
// late write is fenced.
//
//	go run ./examples/orders
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/singlewriter/singlewriter/examples/internal/cluster"
	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/router"
)

// step is one transition a client sends.
type step struct {
	key, method, payload string
}

// script is the first part's traffic: three orders, with a ship before pay
// and a second pay, which the state machine refuses.
var script = []step{
	{"order-1", "create", ""},
	{"order-1", "pay", "pay-1001"},
	{"order-1", "ship", "trk-1001"},
	{"order-2", "create", ""},
	{"order-2", "ship", "trk-1002"},
	{"order-2", "pay", "pay-1002"},
	{"order-2", "ship", "trk-1002"},
	{"order-3", "create", ""},
	{"order-3", "pay", "pay-1003"},
	{"order-3", "pay", "pay-1003"},
	{"order-3", "ship", "trk-1003"},
}

func main() {
	if _, err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

// outcome is what a run showed.
type outcome struct {
	// steps are the script's results, in order.
	steps []stepResult
	// fenced is the second part: the paused write and what became of it.
	fenced fenceResult
}

// stepResult is one transition's result.
type stepResult struct {
	step
	entered string
	// err is the call's error: a refusal matches router.ErrHandler.
	err error
	// before and after are the order as read through Call around the step.
	before, after order
}

// fenceResult is what the second part showed.
type fenceResult struct {
	key string
	// paused is the write the paused handler computed; err is what its
	// call returned.
	paused order
	err    error
	// drainTimeouts counts the old owner's drains that gave up on calls
	// in flight.
	drainTimeouts uint64
	// retried is the retry's write on the new owner; final is the order
	// as read at the end.
	retried, final order
}

// demo is the running program.
type demo struct {
	w    io.Writer
	c    *cluster.Cluster
	shop *shop
	// running tracks the goroutines the demo starts.
	running sync.WaitGroup
}

func run(w io.Writer) (*outcome, error) {
	// The order whose partition moves once node-3 joins: the first after
	// the script's.
	key := cluster.MovingKey("order-%d", 4, []string{"node-0", "node-1", "node-2"}, "node-3")
	ctx, cancel := context.WithTimeout(context.Background(), cluster.RunBudget)
	d := &demo{w: w, shop: &shop{ctx: ctx, pause: cluster.NewPause(), pauseMethod: "pay", pauseKey: key}}
	// One copy of each partition, not the default three: the paused
	// writer's refused commit then reaches its caller as
	// router.ErrStaleEpoch, and the control test, with the store's epoch
	// check off, sees the write acknowledged. With replicas, Call retries a
	// refused commit on the new owner under the same request ID, and the
	// backups refuse the paused batch by its position even with the epoch
	// check off.
	c, err := cluster.New("singlewriter-orders-", d.shop.handlers, cluster.ReplicationFactor(1))
	if err != nil {
		cancel()
		return nil, err
	}
	d.c = c
	defer c.Close()
	defer d.running.Wait()
	defer cancel() // first: it releases a paused handler, so that Close can wait for it

	fmt.Fprintln(w, "Starting 3 instances on loopback.")
	for i := range 3 {
		if _, err := c.Start(ctx, fmt.Sprintf("node-%d", i)); err != nil {
			return nil, err
		}
	}
	if err := c.WaitSettled(ctx); err != nil {
		return nil, err
	}
	o := &outcome{}
	if o.steps, err = d.transitions(ctx); err != nil {
		return nil, err
	}
	o.fenced, err = d.fencing(ctx, key)
	return o, err
}

// transitions runs the script, each step entering the next node.
func (d *demo) transitions(ctx context.Context) ([]stepResult, error) {
	w, nodes := d.w, d.c.Nodes()
	fmt.Fprintln(w, "\n1. Orders move created -> paid -> shipped; each transition enters another instance,")
	fmt.Fprintln(w, "   runs on the order's owner, and is written at its partition's epoch.")
	fmt.Fprintf(w, "   %-8s %-7s %-8s %s\n", "order", "call", "entered", "result")
	var results []stepResult
	for i, st := range script {
		entry := nodes[i%len(nodes)]
		r := stepResult{step: st, entered: entry.Name()}
		var err error
		if r.before, err = get(ctx, entry, st.key); err != nil {
			return nil, err
		}
		_, r.err = entry.Call(ctx, []byte(st.key), st.method, []byte(st.payload))
		if r.err != nil && !errors.Is(r.err, router.ErrHandler) {
			return nil, r.err
		}
		if r.after, err = get(ctx, entry, st.key); err != nil {
			return nil, err
		}
		if r.err != nil {
			if r.after != r.before {
				return nil, fmt.Errorf("refused %s on %s wrote %v", st.method, st.key, r.after)
			}
			fmt.Fprintf(w, "   %-8s %-7s %-8s refused, nothing written (still %s):\n     %v\n", st.key, st.method, r.entered, r.after.Status, r.err)
		} else {
			fmt.Fprintf(w, "   %-8s %-7s %-8s %s, written on %s at epoch %d\n", st.key, st.method, r.entered, r.after, r.after.Node, r.after.Epoch)
		}
		results = append(results, r)
	}
	return results, nil
}

// fencing pauses a pay on key's owner, moves key's partition to a joining
// node, applies the pay and a ship there, and releases the paused call,
// whose write must be refused.
func (d *demo) fencing(ctx context.Context, key string) (fenceResult, error) {
	w, c, s := d.w, d.c, d.shop
	r := fenceResult{key: key}
	nodes := c.Nodes()
	p := ring.Partition([]byte(key), ring.DefaultPartitions)
	old, _ := nodes[0].Owner(p)
	fmt.Fprintf(w, "\n2. A paused writer is fenced. %s (partition %d) is owned by %s at epoch %d.\n", key, p, old.Owner, old.Epoch)
	if _, err := nodes[0].Call(ctx, []byte(key), "create", nil); err != nil {
		return r, err
	}
	var oldOwner *router.Node
	var rest []*router.Node
	for _, n := range nodes {
		if n.Name() == old.Owner {
			oldOwner = n
		} else {
			rest = append(rest, n)
		}
	}
	payEntry, retryEntry := rest[0], rest[1]
	payID := router.RequestID(fmt.Appendf(nil, "checkout-%s", key))
	paused := make(chan error, 1)
	d.running.Go(func() {
		_, err := payEntry.Call(ctx, []byte(key), "pay", []byte("pay-2001"), payID)
		paused <- err
	})
	select {
	case <-s.pause.Paused():
	case <-ctx.Done():
		return r, ctx.Err()
	}
	r.paused = s.paused
	fmt.Fprintf(w, "   A pay enters %s; on %s the handler computes %q at epoch %d and pauses.\n", payEntry.Name(), old.Owner, r.paused.Status, r.paused.Epoch)

	joined, err := c.Start(ctx, "node-3")
	if err != nil {
		return r, err
	}
	if err := c.WaitSettled(ctx); err != nil {
		return r, err
	}
	moved, _ := joined.Owner(p)
	if r.drainTimeouts = oldOwner.Stats().DrainTimeouts; r.drainTimeouts == 0 {
		return r, fmt.Errorf("%s's drain did not wait for the paused call", old.Owner)
	}
	fmt.Fprintf(w, "   node-3 joins; partition %d moves to %s at epoch %d. %s's drain gave up on the\n", p, moved.Owner, moved.Epoch, old.Owner)
	fmt.Fprintf(w, "   paused call after %s.\n", cluster.DrainTimeout)

	out, err := retryEntry.Call(ctx, []byte(key), "pay", []byte("pay-2001"), payID)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(out, &r.retried); err != nil {
		return r, err
	}
	fmt.Fprintf(w, "   The client retries the pay through %s, same request ID: %s, written on %s at epoch %d.\n",
		retryEntry.Name(), r.retried.Status, r.retried.Node, r.retried.Epoch)
	if _, err := oldOwner.Call(ctx, []byte(key), "ship", []byte("trk-2001")); err != nil {
		return r, err
	}
	fmt.Fprintf(w, "   Then it is shipped through %s, the old owner, which forwards the call to %s.\n", oldOwner.Name(), moved.Owner)

	s.pause.Release()
	r.err = <-paused
	if r.final, err = get(ctx, joined, key); err != nil {
		return r, err
	}
	if !errors.Is(r.err, router.ErrStaleEpoch) {
		return r, fmt.Errorf("the paused write was not fenced: %v", r.err)
	}
	fmt.Fprintf(w, "   The paused handler wakes and commits %q at epoch %d: refused.\n     %v\n", r.paused.Status, r.paused.Epoch, r.err)
	fmt.Fprintf(w, "   %s = %s, written on %s at epoch %d: the new owner's state.\n", key, r.final, r.final.Node, r.final.Epoch)
	fmt.Fprintln(w, "\nDone.")
	return r, nil
}

// get reads key's order through n.
func get(ctx context.Context, n *router.Node, key string) (order, error) {
	var o order
	v, err := n.Call(ctx, []byte(key), "get", nil)
	if err != nil || len(v) == 0 {
		return o, err
	}
	return o, json.Unmarshal(v, &o)
}
