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
	// ctx is the program's; every instance's context derives from it.
	ctx  context.Context
	out  *printer
	mail *mailbox
	// pause holds the first run of the batch at cursor pauseAt after it
	// sent its invoices and before it writes its checkpoint, until its
	// instance crashes: the worst moment for a crash.
	pause *cluster.Pause

	// mu guards instances, runs and paused.
	mu sync.Mutex
	// instances are the running instances, by node name.
	instances map[string]*instance
	// runs lists every run of run-batch as its handler saw it, in order,
	// fenced ones included.
	runs []batchRun
	// paused is the run that pause stopped.
	paused batchRun
}

// errCrashed ends the context of an instance that crashed.
var errCrashed = errors.New("the instance crashed")

// instance is one instance of the billing service: its node, and the
// context of its process. A crash cannot stop goroutines in one process,
// so the instance's own work (its scheduler, its run-batch handler and the
// calls that handler makes) runs under ctx, which crash ends first: that
// work stops where it is, as it would with the process.
type instance struct {
	n    *router.Node
	ctx  context.Context
	kill context.CancelCauseFunc
}

// crash stops i as a crash would: its work stops, then its node closes
// without handing its partitions off. A run-batch call that the node
// runs, paused or queued, writes nothing (see runBatch).
func (i *instance) crash(c *cluster.Cluster) error {
	i.kill(errCrashed)
	return c.Crash(i.n)
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
		create:    create,
		key:       fmt.Appendf(nil, "invoice-run/%s", period),
		ctx:       ctx,
		out:       out,
		mail:      newMailbox(),
		pause:     cluster.NewPause(),
		instances: map[string]*instance{},
	}
	for i := range customers {
		j.customers = append(j.customers, fmt.Sprintf("cust-%03d", i))
	}
	return j
}

// handlers makes n an instance of the service: it registers the job's
// handlers on n.
func (j *job) handlers(n *router.Node) {
	i := &instance{n: n}
	i.ctx, i.kill = context.WithCancelCause(j.ctx)
	j.mu.Lock()
	j.instances[n.Name()] = i
	j.mu.Unlock()
	n.Handle("run-batch", j.runBatch(i))
	n.Handle("create-invoice", j.create)
	n.Handle("get-invoice", getInvoice)
}

// instance returns the instance running on the node named name.
func (j *job) instance(name string) *instance {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.instances[name]
}

// runBatch runs on the job key's owner. It reads the checkpoint (the
// cursor into the customer list), issues the next batch of invoices and
// writes the advanced cursor, which commits with the call at the
// partition's epoch. If the partition moved meanwhile, the store refuses
// the checkpoint and the next owner redoes the batch from the last one;
// the invoices' natural keys make that redo send nothing twice.
//
// On a crashed instance it does nothing (see unanswered), whether the
// call was queued or paused when the crash came.
func (j *job) runBatch(i *instance) router.Handler {
	return func(ctx context.Context, req *router.Request) ([]byte, error) {
		if i.ctx.Err() != nil {
			return unanswered(ctx)
		}
		from := 0
		if v, ok := req.State.Get(); ok {
			from = int(binary.BigEndian.Uint64(v))
		}
		if from == len(j.customers) {
			return []byte(done), nil
		}
		to := min(from+batchSize, len(j.customers))
		r := batchRun{node: i.n.Name(), epoch: req.Epoch, from: from, to: to}
		var err error
		if r.issued, r.found, err = j.issueAll(i, req.Epoch, j.customers[from:to]); err != nil {
			return nil, err // nothing written: the next call redoes the batch
		}
		paused := from == pauseAt && j.pause.Due()
		j.record(r, paused)
		if paused {
			// The instance crashes here, its invoices sent and its
			// checkpoint not written: nothing releases the pause.
			j.pause.Wait(i.ctx)
			return unanswered(ctx)
		}
		// The interleaving this defends against: the handler pauses here
		// (GC, a stalled VM) until its partition moves; the next owner
		// reads the last checkpoint, redoes this batch and goes on. Were
		// this write accepted, an old cursor could overwrite a newer one.
		// It commits at req.Epoch, which the replicas no longer accept:
		// nothing of it is acknowledged, Call retries it on the new owner
		// under the same request ID, and only the invoices it created
		// stay, which the redo finds.
		req.State.Put(binary.BigEndian.AppendUint64(nil, uint64(to)))
		return fmt.Appendf(nil, "%d/%d", to, len(j.customers)), nil
	}
}

// unanswered is run-batch on a crashed instance: it writes nothing and
// holds the call until its caller is gone, as a dead process never
// answers. The caller is either the instance's own scheduler, whose
// context the crash ended, or another node, whose connection Close drops.
func unanswered(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// issueAll issues the invoices of customers in parallel and counts those
// created and those found.
func (j *job) issueAll(i *instance, e epoch.Epoch, customers []string) (issued, found int, err error) {
	fresh := make([]bool, len(customers))
	errs := make([]error, len(customers))
	var wg sync.WaitGroup
	for k, c := range customers {
		wg.Go(func() { fresh[k], errs[k] = j.issue(i, e, c) })
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
// succeeded, send". It calls with the instance's context, not with that of
// the call that triggered the batch: the owner finishes a batch it
// started even if that caller gave up.
func (j *job) issue(i *instance, e epoch.Epoch, customer string) (bool, error) {
	invoice := fmt.Appendf(nil, "invoice %s for %s, issued by %s at epoch %d", period, customer, i.n.Name(), e)
	out, err := i.n.Call(i.ctx, invoiceKey(customer, period), "create-invoice", invoice)
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
		note = "  <- its owner crashes before writing its checkpoint"
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
// until the run is done or the instance crashes. Calls from all instances
// queue on the key's owner, so each runs the next batch.
func (j *job) schedule(i *instance) error {
	for {
		out, err := i.n.Call(i.ctx, j.key, "run-batch", nil)
		switch {
		case errors.Is(context.Cause(i.ctx), errCrashed):
			return nil
		case err == nil && string(out) == done:
			return nil
		case err == nil:
		default:
			return fmt.Errorf("%s's scheduler: %w", i.n.Name(), err)
		}
	}
}
