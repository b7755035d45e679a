package main

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/singlewriter/singlewriter/router"
)

// The answers of createInvoice, before the stored invoice.
const (
	created = "created"
	exists  = "exists"
)

// invoiceKey is the natural key of a customer's invoice for a billing
// period: the unique constraint that makes issuing it twice impossible.
func invoiceKey(customer, period string) []byte {
	return fmt.Appendf(nil, "invoice/%s/%s", customer, period)
}

// createInvoice stores the payload as the key's invoice unless one is
// stored already, like an INSERT under a unique constraint. It answers
// "created" or "exists", a newline, and the stored invoice.
func createInvoice(_ context.Context, req *router.Request) ([]byte, error) {
	if v, ok := req.State.Get(); ok {
		return fmt.Appendf(nil, "%s\n%s", exists, v), nil
	}
	req.State.Put(req.Payload)
	return fmt.Appendf(nil, "%s\n%s", created, req.Payload), nil
}

// getInvoice answers the key's invoice, empty if there is none.
func getInvoice(_ context.Context, req *router.Request) ([]byte, error) {
	v, _ := req.State.Get()
	return v, nil
}

// parseCreated splits createInvoice's answer.
func parseCreated(out []byte) (status string, invoice []byte) {
	s, inv, _ := bytes.Cut(out, []byte("\n"))
	return string(s), inv
}

// mailbox stands for the world outside the cluster: the customers'
// inboxes. It records every invoice sent, per customer.
type mailbox struct {
	// mu guards sent.
	mu   sync.Mutex
	sent map[string][]string
}

func newMailbox() *mailbox { return &mailbox{sent: map[string][]string{}} }

// send delivers invoice to customer.
func (m *mailbox) send(customer string, invoice []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent[customer] = append(m.sent[customer], string(invoice))
}

// inbox returns the invoices customer received.
func (m *mailbox) inbox(customer string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent[customer]
}
