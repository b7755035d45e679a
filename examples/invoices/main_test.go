package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/router"
)

func TestInvoiceRunSendsOneInvoicePerCustomerAcrossAnOwnerCrash(t *testing.T) {
	var out bytes.Buffer
	o, err := run(&out, createInvoice)
	require.NoError(t, err, out.String())

	require.Less(t, o.paused.epoch, o.resumed.epoch, "the job's epoch rose")
	require.NotEqual(t, o.paused.node, o.resumed.node, "another node took the job over")
	require.Equal(t, o.takeover.claim.Owner, o.resumed.node, "... the one that took its partition over")
	require.Len(t, o.takeover.claim.Replicas, replicas, "the partition is back to %d replicas", replicas)
	require.NotContains(t, o.takeover.claim.Replicas, o.paused.node, "... on the survivors")
	require.Equal(t, o.paused.from, o.resumed.from,
		"the next owner resumed at the last acknowledged checkpoint: the crashed batch's own checkpoint is nowhere")
	require.Greater(t, o.resumed.from, 0, "... not at 0")
	require.Less(t, o.resumed.from, customers)
	require.Equal(t, batchSize, o.resumed.found, "the redone batch found every invoice already issued")
	require.Zero(t, o.resumed.issued, "... and issued none again")

	require.Len(t, o.stored, customers)
	for i := range customers {
		c := fmt.Sprintf("cust-%03d", i)
		require.Len(t, o.inbox[c], 1, "invoices sent to %s", c)
		require.Equal(t, o.stored[c], o.inbox[c][0], "%s's invoice sent is the one stored", c)
	}
	require.Contains(t, out.String(), fmt.Sprintf("resumed at cursor %d of %d, not 0", pauseAt, customers))
	require.Contains(t, out.String(), "500 invoices stored (read back through Call), 500 sent, for 500 customers.")
}

// TestInvoiceRunWithoutNaturalKeySendsTwice is the control: with a create
// handler that ignores the invoice already stored, the batch redone after
// the owner's crash sends its invoices a second time, and the checks above
// must see it, or they prove nothing.
func TestInvoiceRunWithoutNaturalKeySendsTwice(t *testing.T) {
	overwrite := func(_ context.Context, req *router.Request) ([]byte, error) {
		req.State.Put(req.Payload)
		return fmt.Appendf(nil, "%s\n%s", created, req.Payload), nil
	}
	var out bytes.Buffer
	o, err := run(&out, overwrite)
	require.ErrorContains(t, err, fmt.Sprintf("%d customers did not get exactly one invoice", batchSize), out.String())

	for i := range customers {
		c := fmt.Sprintf("cust-%03d", i)
		want := 1
		if i >= o.paused.from && i < o.paused.to {
			want = 2 // the crashed batch's customers, once by each owner
		}
		require.Len(t, o.inbox[c], want, "invoices sent to %s", c)
	}
}
