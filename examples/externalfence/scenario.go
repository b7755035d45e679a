package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/examples/internal/cluster"
	"github.com/singlewriter/singlewriter/router"
	"github.com/singlewriter/singlewriter/store"
)

// joiner is the node that joins while the owner's handler is paused.
const joiner = "node-3"

// The invoice the scenario writes, the first from invoice-42 on whose
// partition moves to joiner when it joins the three nodes run starts, and
// the copy of its row the counterfactual runs on.
var (
	invoiceID = cluster.MovingKey("invoice-%d", 42, []string{"node-0", "node-1", "node-2"}, joiner)
	copyID    = invoiceID + " (copy)"
)

// scenario: the invoice's owner writes it, then pauses in a handler; the
// partition moves to another node, which writes; the paused handler's
// write changes no row. Last, the same write without the predicate, on a
// copy of the row.
func (d *demo) scenario(ctx context.Context, c *cluster.Cluster) (*outcome, error) {
	key := []byte(invoiceID)
	nodes := c.Nodes()
	o := &outcome{Partition: nodes[0].Partition(key)}
	claim, _ := nodes[0].Owner(o.Partition)
	i := slices.IndexFunc(nodes, func(n *router.Node) bool { return n.Name() == claim.Owner })
	old, others := nodes[i], slices.Delete(slices.Clone(nodes), i, i+1)
	o.OldOwner, o.OldEpoch = old.Name(), claim.Epoch

	fmt.Fprintf(d.w, "\nThe table:\n  %s\nEvery handler's write, $4 being its req.Epoch:\n  %s\n",
		strings.ReplaceAll(schema, "\n", "\n  "), fencedUpdate)
	if _, err := d.db.Exec(ctx, `INSERT INTO invoices (id, status, written_by) VALUES ($1, 'draft', 'setup')`, invoiceID); err != nil {
		return nil, err
	}
	if err := d.printRow(ctx, "\n  row:", invoiceID); err != nil {
		return nil, err
	}

	fmt.Fprintf(d.w, "\n1. %s is in partition %d, owned by %s at epoch %d. The owner writes twice within its epoch (fence <= epoch):\n",
		invoiceID, o.Partition, o.OldOwner, o.OldEpoch)
	for _, s := range []string{"approved", "sent"} {
		if err := d.call(ctx, old, "set-status", s); err != nil {
			return nil, err
		}
	}

	fmt.Fprintf(d.w, "\n2. %s's next handler, to set \"cancelled\", reads its epoch and pauses before its UPDATE.\n", o.OldOwner)
	stale := make(chan error, 1)
	go func() {
		_, err := old.Call(ctx, key, "set-status-paused", []byte("cancelled"))
		stale <- err
	}()
	var staleEpoch epoch.Epoch
	select {
	case staleEpoch = <-d.paused:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	fmt.Fprintf(d.w, "   It holds epoch %d.\n", staleEpoch)

	// The old owner stays up: a node that left would end the paused call
	// with it, before its late UPDATE.
	joined, err := c.Start(ctx, joiner)
	if err != nil {
		return nil, err
	}
	if err := c.WaitSettled(ctx); err != nil {
		return nil, err
	}
	next, err := waitMoved(ctx, joined, o.Partition, o.OldOwner)
	if err != nil {
		return nil, err
	}
	o.NewOwner = next.Owner
	fmt.Fprintf(d.w, "\n3. Meanwhile %s joins (scaling out); %s's drain gives up on the paused call, and\n   %s takes partition %d at epoch %d and sets \"paid\":\n",
		joiner, o.OldOwner, o.NewOwner, o.Partition, next.Epoch)
	if err := d.call(ctx, others[0], "set-status", "paid"); err != nil {
		return nil, err
	}
	o.NewEpoch = d.lastAttempt().Epoch
	// Step 5 needs the row as the paused write finds it.
	if _, err := d.db.Exec(ctx, `INSERT INTO invoices (id, status, written_by, fence) SELECT $2, status, written_by, fence FROM invoices WHERE id = $1`, invoiceID, copyID); err != nil {
		return nil, err
	}

	fmt.Fprintf(d.w, "\n4. The paused handler on %s resumes and runs its UPDATE at epoch %d:\n", o.OldOwner, staleEpoch)
	close(d.release)
	o.StaleCall = <-stale
	a := d.lastAttempt()
	if o.StaleCall == nil || a.Node != o.OldOwner || a.Rows != 0 {
		return nil, fmt.Errorf("the paused owner's write was not fenced: %d rows, call error %v", a.Rows, o.StaleCall)
	}
	fmt.Fprintf(d.w, "  %s at epoch %d sets %-11q -> %d rows; the call fails:\n    %v\n", a.Node, a.Epoch, a.Status, a.Rows, o.StaleCall)
	if o.Row, err = readInvoice(ctx, d.db, invoiceID); err != nil {
		return nil, err
	}
	fmt.Fprintf(d.w, "  row: %v  (the new owner's write stands)\n", o.Row)

	fmt.Fprintf(d.w, "\n5. Without the fence predicate the stale write would have won. The same UPDATE minus\n"+
		"   \"AND fence <= $4\", with the paused handler's values, run by this demo on a copy of\n"+
		"   the row taken right after %s's write:\n  %s\n", o.NewOwner, unfencedUpdate)
	if o.UnfencedRows, err = setStatus(ctx, d.db, unfencedUpdate, copyID, a.Status, a.Node, a.Epoch); err != nil {
		return nil, err
	}
	if o.Copy, err = readInvoice(ctx, d.db, copyID); err != nil {
		return nil, err
	}
	fmt.Fprintf(d.w, "  -> %d row; %v\n  A paid invoice cancelled by a node that no longer owned it, and its fence moved back.\n",
		o.UnfencedRows, o.Copy)
	o.Attempts = d.allAttempts()
	fmt.Fprintln(d.w, "\nDone.")
	return o, nil
}

// call sets the invoice's status with a call entering at n, and prints the
// handler's UPDATE and the row.
func (d *demo) call(ctx context.Context, n *router.Node, method, status string) error {
	if _, err := n.Call(ctx, []byte(invoiceID), method, []byte(status)); err != nil {
		return err
	}
	a := d.lastAttempt()
	return d.printRow(ctx, fmt.Sprintf("  %s at epoch %d sets %-11q -> %d row;", a.Node, a.Epoch, a.Status, a.Rows), invoiceID)
}

// printRow prints prefix and the row id.
func (d *demo) printRow(ctx context.Context, prefix, id string) error {
	i, err := readInvoice(ctx, d.db, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.w, "%s %v\n", prefix, i)
	return nil
}

// waitMoved waits until n's view of partition p names an owner other than
// from, and returns that claim.
func waitMoved(ctx context.Context, n *router.Node, p int, from string) (store.Claim, error) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if c, ok := n.Owner(p); ok && c.Owner != from {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return store.Claim{}, fmt.Errorf("partition %d did not move away from %s: %w", p, from, ctx.Err())
		case <-t.C:
		}
	}
}
