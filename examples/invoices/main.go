// Command invoices runs one scheduled job on many instances: ten nodes each
// run a scheduler, and the invoice run of a billing period happens once.
// The run's owner is stopped while a batch is in flight; the next owner
// resumes from the last checkpoint, and every customer gets exactly one
// invoice.
//
//	go run ./examples/invoices
package main

import (
	"context"
	"fmt"
	"io"
	"os"
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
	// pauseAt is the cursor of the batch in flight when the owner stops.
	pauseAt = 200
)

// stop is how the demo stops the job's owner, and how it says so: Leave,
// as a deploy's SIGTERM handler does. For a crash, change this line to
// (*cluster.Cluster).Crash, "crashes (Close without Leave)". With
// replication factor 1 a crashed owner's partitions wait for it to restart,
// so the run would then stall at the stop: that switch needs RF >= 3.
var stop, stopping = (*cluster.Cluster).Leave, "leaves (Leave: hands its partitions off, then closes)"

func main() {
	if _, err := run(os.Stdout, createInvoice); err != nil {
		fmt.Fprintln(os.Stderr, "invoices:", err)
		os.Exit(1)
	}
}

// outcome is what a run showed.
type outcome struct {
	// paused is the batch in flight when its owner stopped; resumed is the
	// next owner's first batch.
	paused, resumed batchRun
	// fenced counts the stopped owner's refused commits: the paused
	// checkpoint write, and any invoice create still running when its
	// partition's drain gave up.
	fenced uint64
	// inbox is every customer's invoices, as sent.
	inbox map[string][]string
	// stored is every customer's invoice, as read back through Call.
	stored map[string]string
}

// run runs the demo with create as the invoices' create handler and
// returns what it showed; the error says which check failed, if one did.
func run(w io.Writer, create router.Handler) (*outcome, error) {
	out := &printer{w: w}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	j := newJob(ctx, out, create)
	c, err := cluster.New("singlewriter-invoices-", j.handlers)
	if err != nil {
		cancel()
		return nil, err
	}
	var running sync.WaitGroup
	defer c.Close()
	defer running.Wait()
	defer cancel()

	out.printf("Starting %d instances on loopback.\n", instances)
	for i := range instances {
		if _, err := c.Start(ctx, fmt.Sprintf("node-%d", i)); err != nil {
			return nil, err
		}
	}
	if err := c.WaitSettled(ctx); err != nil {
		return nil, err
	}
	nodes := c.Nodes()
	p := nodes[0].Partition(j.key)
	claim, _ := nodes[0].Owner(p)
	out.printf("\n1. The %s invoice run: %d customers in batches of %d, under job key %q\n", period, customers, batchSize, j.key)
	out.printf("   (partition %d, owned by %s at epoch %d). Every instance's scheduler calls\n", p, claim.Owner, claim.Epoch)
	out.printf("   run-batch on the job key until the run is done; the calls queue on the owner.\n\n")
	out.printf(headFormat, "batch", "customers", "ran on", "epoch", "issued", "found")

	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		running.Go(func() { errs <- j.schedule(n) })
	}
	select {
	case <-j.pause.Paused():
	case <-ctx.Done():
		return nil, fmt.Errorf("no batch reached cursor %d: %w", pauseAt, ctx.Err())
	}
	paused := j.pausedRun()
	owner := nodeNamed(nodes, paused.node)
	out.printf("   -- %s %s while its batch is in flight\n", owner.Name(), stopping)
	stopped := make(chan error, 1)
	running.Go(func() { stopped <- stop(c, ctx, owner) })
	next, err := waitServed(ctx, nodes, p, owner)
	if err != nil {
		return nil, err
	}
	out.printf("   -- %s serves partition %d at epoch %d; the paused handler is released\n", next.Owner, p, next.Epoch)
	j.pause.Release()
	if err := <-stopped; err != nil {
		return nil, fmt.Errorf("stopping %s: %w", owner.Name(), err)
	}
	for range nodes {
		if err := <-errs; err != nil {
			return nil, err
		}
	}

	o := &outcome{paused: paused, fenced: owner.Stats().FencedCommits}
	var ok bool
	if o.resumed, ok = j.firstRunAfter(paused.epoch); !ok {
		return nil, fmt.Errorf("no batch ran after epoch %d", paused.epoch)
	}
	if o.inbox, o.stored, err = j.readBack(c.Nodes()); err != nil {
		return nil, err
	}
	return o, report(out, j, o)
}

// report prints the outcome and checks it: the next owner resumed from
// the fenced batch's checkpoint, and every customer got exactly one
// invoice, the one stored under its natural key.
func report(out *printer, j *job, o *outcome) error {
	out.printf("\n2. The owner changed mid-run; the run went on from its last checkpoint.\n")
	out.printf("   The job's epoch went from %d (%s) to %d (%s).\n", o.paused.epoch, o.paused.node, o.resumed.epoch, o.resumed.node)
	if o.fenced == 0 || o.resumed.from != o.paused.from {
		return fmt.Errorf("the paused batch's checkpoint write (cursor %d -> %d) was not fenced: %d fenced commits, next owner resumed at %d",
			o.paused.from, o.paused.to, o.fenced, o.resumed.from)
	}
	out.printf("   %s's store refused the paused batch's checkpoint write at epoch %d (cursor %d -> %d);\n",
		o.paused.node, o.paused.epoch, o.paused.from, o.paused.to)
	out.printf("   %s counted %d fenced commit(s).\n", o.paused.node, o.fenced)
	out.printf("   %s resumed at cursor %d of %d, not 0. It found the %d invoices of the fenced\n",
		o.resumed.node, o.resumed.from, len(j.customers), o.resumed.found)
	out.printf("   batch already issued and sent none of them again. %s's inbox:\n", j.customers[o.paused.from])
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

// waitServed waits until a node other than old serves partition p, and
// returns its claim.
func waitServed(ctx context.Context, nodes []*router.Node, p int, old *router.Node) (store.Claim, error) {
	for {
		for _, n := range nodes {
			if c, ok := n.Serving(p); ok && n != old {
				return c, nil
			}
		}
		select {
		case <-ctx.Done():
			return store.Claim{}, fmt.Errorf("no node took partition %d over from %s: %w", p, old.Name(), ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func nodeNamed(nodes []*router.Node, name string) *router.Node {
	for _, n := range nodes {
		if n.Name() == name {
			return n
		}
	}
	return nil
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
