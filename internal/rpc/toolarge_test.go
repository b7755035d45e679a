package rpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/stretchr/testify/require"
)

// TestRequestThatWasSentIsNotReportedAsTooLargeToSend has a server (one
// that does not cap its answers at the client's MaxFrame: another
// version, or a bug) answer a request that it received and handled with a
// frame larger than the client's MaxFrame. Call documents
// wire.ErrFrameTooLarge as "nothing is sent", and the router turns it into
// a final ErrPayloadTooLarge without retry, so the error of a call that
// was sent, and may have run, must not match it: it is ErrConnClosed.
func TestRequestThatWasSentIsNotReportedAsTooLargeToSend(t *testing.T) {
	ln := listen(t)
	t.Cleanup(func() { ln.Close() })
	handled := make(chan struct{})
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		l := newLink(nc, time.Minute)
		if _, _, err := serverHandshake(l, Hello{Cluster: "test", Node: "server"}, 1<<20, nil, nil); err != nil {
			return
		}
		f, err := wire.ReadFrame(l.br, 1<<20)
		if err != nil {
			return
		}
		close(handled)
		_ = l.writeNow(wire.Frame{ID: f.ID, Type: f.Type, Flags: wire.FlagResponse, Body: make([]byte, 4096)})
		_, _ = wire.ReadFrame(l.br, 1<<20) // until the client drops it
	}()

	c := newClient(t, ClientConfig{MaxFrame: 1024})
	_, err := c.Call(context.Background(), ln.Addr().String(), 1, []byte("ran"))
	<-handled
	require.ErrorIs(t, err, ErrConnClosed)
	require.False(t, errors.Is(err, wire.ErrFrameTooLarge), "a request that was sent and handled is reported as too large to send: %v", err)
}
