package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/examples/internal/cluster"
	"github.com/singlewriter/singlewriter/router"
)

// done is run-batch's answer once every customer has been invoiced.
const done = "done"

// job is the invoice run of one billing period as every instance embeds
// it: each node registers the same handlers, and whichever node owns the
// job key runs the batches, one at a time.
type job struct {
	key       []byte
	customers []string
	// create is the invoice key's create handler: createInvoice, or a
	// broken one in the test that proves the natural key matters.
	create router.Handler
	// ctx is the program's. A batch makes its invoice calls with it, not
	// with the ctx of the call that triggered the batch: the owner finishes
	// a batch it started even if that caller gave up.
	ctx  context.Context
	out  *printer
	mail *mailbox
	// pause stops the first run of the batch at cursor pauseAt after it
	// sent its invoices and before it writes its checkpoint: the worst
	// moment for its owner to go away.
	pause *cluster.Pause

	// mu guards runs and paused.
	mu sync.Mutex
	// runs lists every run of run-batch as its handler saw it, in order,
	// fenced ones included.
	runs []batchRun
	// paused is the run that pause stopped.
	paused batchRun
}

// batchRun is one run of run-batch.
type batchRun struct {
	node  string
	epoch epoch.Epoch
	// from and to are the cursor the run read from the checkpoint and the
	// one it writes.
	from, to int
	// issued counts the invoices this run created and sent; found those
	// it found already created, and did not send.
	issued, found int
}

func newJob(ctx context.Context, out *printer, create router.Handler) *job {
	j := &job{
		create: create,
		key:    fmt.Appendf(nil, "invoice-run/%s", period),
		ctx:    ctx,
		out:    out,
		mail:   newMailbox(),
		pause:  cluster.NewPause(),
	}
	for i := range customers {
		j.customers = append(j.customers, fmt.Sprintf("cust-%03d", i))
	}
	return j
}

// handlers registers the job's handlers on n.
func (j *job) handlers(n *router.Node) {
	n.Handle("run-batch", j.runBatch(n))
	n.Handle("create-invoice", j.create)
	n.Handle("get-invoice", getInvoice)
}

// runBatch runs on the job key's owner. It reads the checkpoint (the
// cursor into the customer list), issues the next batch of invoices and
// writes the advanced cursor, which commits with the call at the
// partition's epoch. If the partition moved meanwhile, the store refuses
// the checkpoint and the next owner redoes the batch from the last one;
// the invoices' natural keys make that redo send nothing twice.
func (j *job) runBatch(n *router.Node) router.Handler {
	return func(_ context.Context, req *router.Request) ([]byte, error) {
		from := 0
		if v, ok := req.State.Get(); ok {
			from = int(binary.BigEndian.Uint64(v))
		}
		if from == len(j.customers) {
			return []byte(done), nil
		}
		to := min(from+batchSize, len(j.customers))
		r := batchRun{node: n.Name(), epoch: req.Epoch, from: from, to: to}
		var err error
		if r.issued, r.found, err = j.issueAll(n, req.Epoch, j.customers[from:to]); err != nil {
			return nil, err // nothing written: the next call redoes the batch
		}
		paused := from == pauseAt && j.pause.Due()
		j.record(r, paused)
		if paused {
			j.pause.Wait(j.ctx)
		}
		// The interleaving this defends against: the handler pauses here
		// (GC, a stalled VM) until its partition moves; the next owner
		// reads the last checkpoint, redoes this batch and goes on. Were
		// this write accepted, an old cursor could overwrite a newer one.
		// It commits at req.Epoch, which the store no longer accepts: the
		// call fails with router.ErrStaleEpoch, and only the invoices it
		// created stay, which the redo finds.
		req.State.Put(binary.BigEndian.AppendUint64(nil, uint64(to)))
		return fmt.Appendf(nil, "%d/%d", to, len(j.customers)), nil
	}
}

// issueAll issues the invoices of customers in parallel and counts those
// created and those found.
func (j *job) issueAll(n *router.Node, e epoch.Epoch, customers []string) (issued, found int, err error) {
	fresh := make([]bool, len(customers))
	errs := make([]error, len(customers))
	var wg sync.WaitGroup
	for i, c := range customers {
		wg.Go(func() { fresh[i], errs[i] = j.issue(n, e, c) })
	}
	wg.Wait()
	for _, f := range fresh {
		if f {
			issued++
		}
	}
	return issued, len(customers) - issued, errors.Join(errs...)
}

// issue creates customer's invoice unless it exists, and sends it only if
// this call created it: "insert the record, and only if the insert
// succeeded, send".
func (j *job) issue(n *router.Node, e epoch.Epoch, customer string) (bool, error) {
	invoice := fmt.Appendf(nil, "invoice %s for %s, issued by %s at epoch %d", period, customer, n.Name(), e)
	out, err := n.Call(j.ctx, invoiceKey(customer, period), "create-invoice", invoice)
	for errors.Is(err, router.ErrStaleEpoch) {
		// The invoice's partition moved while the create ran, and nothing
		// was written: creating is idempotent, so create again.
		out, err = n.Call(j.ctx, invoiceKey(customer, period), "create-invoice", invoice)
	}
	if err != nil {
		return false, err
	}
	status, stored := parseCreated(out)
	if status != created {
		return false, nil
	}
	j.mail.send(customer, stored)
	return true, nil
}

// rowFormat and headFormat print a run's line.
const (
	headFormat = "   %-6s %-10s %-7s %5s %6s %5s\n"
	rowFormat  = "   %-6s %-10s %-7s %5d %6d %5d%s\n"
)

// record logs a run and prints its line.
func (j *job) record(r batchRun, paused bool) {
	note := ""
	j.mu.Lock()
	j.runs = append(j.runs, r)
	if paused {
		j.paused = r
		note = "  <- pauses before writing its checkpoint"
	}
	j.mu.Unlock()
	batch := fmt.Sprintf("%d/%d", r.from/batchSize+1, (len(j.customers)+batchSize-1)/batchSize)
	span := fmt.Sprintf("%d-%d", r.from, r.to-1)
	j.out.printf(rowFormat, batch, span, r.node, r.epoch, r.issued, r.found, note)
}

// pausedRun returns the run that pause stopped.
func (j *job) pausedRun() batchRun {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.paused
}

// firstRunAfter returns the first run at an epoch above e.
func (j *job) firstRunAfter(e epoch.Epoch) (batchRun, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range j.runs {
		if r.epoch > e {
			return r, true
		}
	}
	return batchRun{}, false
}

// schedule is one instance's scheduler: it calls run-batch on the job key
// until the run is done or the instance stops. Calls from all instances
// queue on the key's owner, so each runs the next batch.
func (j *job) schedule(n *router.Node) error {
	for {
		out, err := n.Call(j.ctx, j.key, "run-batch", nil)
		switch {
		case err == nil && string(out) == done:
			return nil
		case err == nil, errors.Is(err, router.ErrStaleEpoch):
			// A fenced batch wrote no checkpoint: the next call redoes it.
		case errors.Is(err, router.ErrClosed):
			return nil // this instance stopped
		default:
			return fmt.Errorf("%s's scheduler: %w", n.Name(), err)
		}
	}
}
