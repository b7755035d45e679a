// Command invoices runs one scheduled job on many instances: ten nodes each
// run a scheduler, and the invoice run of a billing period happens once.
// The run's owner crashes while a batch is in flight; the survivors detect
// it, the next owner resumes from the last checkpoint, and every customer
// gets exactly one invoice.
//
//	go run ./examples/invoices
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/singlewriter/singlewriter/examples/internal/cluster"
	"github.com/singlewriter/singlewriter/router"
	"github.com/singlewriter/singlewriter/store"
)

// The demo's size.
const (
	instances = 10
	period    = "2026-11"
	customers = 500
	batchSize = 20
	// pauseAt is the cursor of the batch in flight when the owner crashes.
	pauseAt = 200
	// replicas is the replication factor: each partition survives the
	// crash of one of its 3 replicas.
	replicas = 3
)

func main() {
	if _, err := run(os.Stdout, createInvoice); err != nil {
		fmt.Fprintln(os.Stderr, "invoices:", err)
		os.Exit(1)
	}
}

// outcome is what a run showed.
type outcome struct {
	// paused is the batch in flight when its owner crashed; resumed is the
	// next owner's first batch.
	paused, resumed batchRun
	// takeover is what the survivors of the crash did.
	takeover takeover
	// inbox is every customer's invoices, as sent.
	inbox map[string][]string
	// stored is every customer's invoice, as read back through Call.
	stored map[string]string
}

// run runs the demo with create as the invoices' create handler and
// returns what it showed; the error says which check failed, if one did.
func run(w io.Writer, create router.Handler) (*outcome, error) {
	out := &printer{w: w}
	ctx, cancel := context.WithTimeout(context.Background(), cluster.RunBudget)
	j := newJob(ctx, out, create)
	c, err := cluster.New("singlewriter-invoices-", j.handlers, cluster.ReplicationFactor(replicas))
	if err != nil {
		cancel()
		return nil, err
	}
	var running sync.WaitGroup
	defer c.Close()
	defer running.Wait()
	defer cancel()

	out.printf("Starting %d instances on loopback.\n", instances)
	if err := start(ctx, c); err != nil {
		return nil, err
	}
	if err := c.WaitSettled(ctx); err != nil {
		return nil, err
	}
	nodes := c.Nodes()
	p := nodes[0].Partition(j.key)
	claim, _ := nodes[0].Owner(p)
	out.printf("\n1. The %s invoice run: %d customers in batches of %d, under job key %q\n", period, customers, batchSize, j.key)
	out.printf("   (partition %d, owned by %s at epoch %d, with copies on %s). Every instance's\n", p, claim.Owner, claim.Epoch, others(claim.Replicas, claim.Owner))
	out.printf("   scheduler calls run-batch on the job key until the run is done; the calls queue on the owner.\n\n")
	out.printf(headFormat, "batch", "customers", "ran on", "epoch", "issued", "found")

	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		i := j.instance(n.Name())
		running.Go(func() { errs <- j.schedule(i) })
	}
	select {
	case <-j.pause.Paused():
	case <-ctx.Done():
		return nil, fmt.Errorf("no batch reached cursor %d: %w", pauseAt, ctx.Err())
	}
	o := &outcome{paused: j.pausedRun()}
	owner := j.instance(o.paused.node)
	out.printf("   -- %s crashes (Close without Leave) while its batch is in flight\n", owner.n.Name())
	crashed := time.Now()
	if err := owner.crash(c); err != nil {
		return nil, fmt.Errorf("crashing %s: %w", owner.n.Name(), err)
	}
	if o.takeover, err = watchTakeover(ctx, c.Nodes(), p, owner.n.Name(), crashed); err != nil {
		return nil, err
	}
	for range nodes {
		if err := <-errs; err != nil {
			return nil, err
		}
	}

	var ok bool
	if o.resumed, ok = j.firstRunAfter(o.paused.epoch); !ok {
		return nil, fmt.Errorf("no batch ran after epoch %d", o.paused.epoch)
	}
	if o.inbox, o.stored, err = j.readBack(c.Nodes()); err != nil {
		return nil, err
	}
	return o, report(out, j, o)
}

// start starts the instances' nodes: node-0, which bootstraps the
// cluster, then the others at once. Joining together, they spare the
// cluster the partition moves of every membership in between, which with
// 3 replicas are many.
func start(ctx context.Context, c *cluster.Cluster) error {
	if _, err := c.Start(ctx, "node-0"); err != nil {
		return err
	}
	errs := make([]error, instances)
	var wg sync.WaitGroup
	for i := 1; i < instances; i++ {
		wg.Go(func() { _, errs[i] = c.Start(ctx, fmt.Sprintf("node-%d", i)) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// report prints the outcome and checks it: the next owner resumed from
// the crashed batch's checkpoint, and every customer got exactly one
// invoice, the one stored under its natural key.
func report(out *printer, j *job, o *outcome) error {
	t := o.takeover
	out.printf("\n2. The owner crashed mid-run; the survivors took the job over from its last checkpoint.\n")
	out.printf("   %s crashed after sending batch %d's invoices and before writing its checkpoint\n", o.paused.node, o.paused.from/batchSize+1)
	out.printf("   (cursor %d -> %d): that write was never made, so no replica holds it.\n", o.paused.from, o.paused.to)
	out.printf("   Failure detection: %.2f s after the crash, every survivor had dropped %s.\n", t.detected.Seconds(), o.paused.node)
	out.printf("   Takeover: after %.2f s, %s served partition %d at epoch %d, with the data of its\n",
		t.served.Seconds(), t.claim.Owner, t.p, t.claim.Epoch)
	out.printf("   surviving replicas %s; its copies are now on %s.\n",
		others(t.claim.BaseReplicas, o.paused.node), others(t.claim.Replicas, t.claim.Owner))
	if o.resumed.from != o.paused.from {
		return fmt.Errorf("the next owner resumed at cursor %d, not at the crashed batch's checkpoint %d", o.resumed.from, o.paused.from)
	}
	out.printf("   %s resumed at cursor %d of %d, not 0: the last checkpoint acknowledged, which a\n",
		o.resumed.node, o.resumed.from, len(j.customers))
	out.printf("   majority of the replicas held. It found the %d invoices of the crashed batch already\n", o.resumed.found)
	out.printf("   issued and sent none of them again. %s's inbox:\n", j.customers[o.paused.from])
	for _, inv := range o.inbox[j.customers[o.paused.from]] {
		out.printf("     %s\n", inv)
	}

	out.printf("\n3. Every customer got exactly one invoice.\n")
	sent, bad := 0, 0
	for _, c := range j.customers {
		inbox, stored := o.inbox[c], o.stored[c]
		sent += len(inbox)
		if len(inbox) != 1 || inbox[0] != stored {
			if bad < 5 {
				out.printf("   %s: sent %q, stored %q\n", c, inbox, stored)
			}
			bad++
		}
	}
	out.printf("   %d invoices stored (read back through Call), %d sent, for %d customers.\n", len(o.stored), sent, len(j.customers))
	if bad > 0 {
		return fmt.Errorf("%d customers did not get exactly one invoice", bad)
	}
	out.printf("\nDone.\n")
	return nil
}

// readBack reads every customer's invoice through Call, entering at the
// nodes in turn, and returns the invoices sent and stored per customer.
func (j *job) readBack(nodes []*router.Node) (inbox map[string][]string, stored map[string]string, err error) {
	inbox, stored = map[string][]string{}, map[string]string{}
	for i, c := range j.customers {
		v, err := nodes[i%len(nodes)].Call(j.ctx, invoiceKey(c, period), "get-invoice", nil)
		if err != nil {
			return nil, nil, err
		}
		if len(v) > 0 {
			stored[c] = string(v)
		}
		inbox[c] = j.mail.inbox(c)
	}
	return inbox, stored, nil
}

// takeover is what the survivors of a crash did, timed from the crash.
type takeover struct {
	// detected is when every survivor had dropped the crashed node from
	// its membership.
	detected time.Duration
	// served is when a survivor served partition p, under claim.
	served time.Duration
	p      int
	claim  store.Claim
}

// watchTakeover polls the survivors of dead's crash until every one of
// them dropped it from its membership and one of them serves partition p.
func watchTakeover(ctx context.Context, survivors []*router.Node, p int, dead string, crashed time.Time) (takeover, error) {
	t := takeover{p: p}
	sees := func(n *router.Node) bool { return slices.Contains(n.Members(), dead) }
	for t.detected == 0 || t.served == 0 {
		if t.detected == 0 && !slices.ContainsFunc(survivors, sees) {
			t.detected = time.Since(crashed)
		}
		for _, n := range survivors {
			if c, ok := n.Serving(p); ok && t.served == 0 {
				t.claim, t.served = c, time.Since(crashed)
			}
		}
		select {
		case <-ctx.Done():
			return t, fmt.Errorf("no takeover of partition %d after %s crashed: %w", p, dead, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return t, nil
}

// others lists the nodes other than except.
func others(nodes []string, except string) string {
	return strings.Join(slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return n == except }), " and ")
}

// printer serializes the output of the handlers and the main goroutine.
type printer struct {
	// mu guards w.
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}
