package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/singlewriter/singlewriter/internal/wire"
	"github.com/stretchr/testify/require"
)

func TestCallRoundTrip(t *testing.T) {
	requireNoLeaks(t)
	srv := startServer(t, nil, echo)
	c := newClient(t, ClientConfig{})

	resp, err := c.Call(context.Background(), srv.Addr().String(), 7, []byte("ping"))
	require.NoError(t, err)
	require.Equal(t, []byte("\x07ping"), resp)

	resp, err = c.Call(context.Background(), srv.Addr().String(), 200, nil)
	require.NoError(t, err)
	require.Equal(t, []byte{200}, resp)
}

// TestConcurrentCallsArePipelinedOnOneConnection holds every handler until
// all 1000 requests have arrived, so they are provably in flight together,
// and checks that the concurrent first callers shared one dial.
func TestConcurrentCallsArePipelinedOnOneConnection(t *testing.T) {
	requireNoLeaks(t)
	const calls = 1000
	var arrived atomic.Int64
	all := make(chan struct{})
	srv := startServer(t, nil, func(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
		if arrived.Add(1) == calls {
			close(all)
		}
		select {
		case <-all:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return echo(ctx, typ, body)
	})
	c := newClient(t, ClientConfig{})

	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			body := fmt.Appendf(nil, "call %d", i)
			resp, err := c.Call(context.Background(), srv.Addr().String(), uint8(i), body)
			switch {
			case err != nil:
				errs <- err
			case string(resp) != string(append([]byte{uint8(i)}, body...)):
				errs <- fmt.Errorf("call %d got %q", i, resp)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, srv.accepted.Load(), "calls must share one connection")
}

func TestHandlerErrorBecomesRemoteError(t *testing.T) {
	requireNoLeaks(t)
	srv := startServer(t, nil, func(context.Context, uint8, []byte) ([]byte, error) {
		return nil, errors.New("no such key")
	})
	c := newClient(t, ClientConfig{})

	_, err := c.Call(context.Background(), srv.Addr().String(), 1, nil)
	var re *RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "no such key", re.Msg)
	require.NotErrorIs(t, err, ErrConnClosed)
}

// TestCancelReturnsWhileHandlerBlocks cancels a call whose handler never
// answers in time; the call returns at once, the late answer is discarded,
// and the connection keeps working.
func TestCancelReturnsWhileHandlerBlocks(t *testing.T) {
	requireNoLeaks(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	answered := make(chan struct{})
	srv := startServer(t, nil, func(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
		if typ == 1 {
			close(entered)
			<-release
			defer close(answered)
		}
		return echo(ctx, typ, body)
	})
	c := newClient(t, ClientConfig{})
	addr := srv.Addr().String()

	ctx, cancel := context.WithCancel(context.Background())
	done := goCall(ctx, c, addr, 1)
	<-entered
	cancel()
	require.ErrorIs(t, waitResult(t, done), context.Canceled)

	close(release)
	<-answered
	resp, err := c.Call(context.Background(), addr, 2, []byte("next"))
	require.NoError(t, err)
	require.Equal(t, []byte("\x02next"), resp)
	require.EqualValues(t, 1, srv.accepted.Load())
}

// A call its caller cancels cancels its handler's context on the server,
// which can then stop working for nobody. One that reaches its deadline
// does not: a server that needs the caller's deadline is sent it in the
// request (the router's calls are), and the others' handlers run on as
// they did before cancellations were sent.
func TestCancelledCallCancelsItsHandlersContextAndADeadlineDoesNot(t *testing.T) {
	requireNoLeaks(t)
	entered := make(chan context.Context, 1)
	release := make(chan struct{})
	srv := startServer(t, nil, func(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
		if typ == 1 {
			entered <- ctx
			select {
			case <-ctx.Done():
			case <-release:
			}
		}
		return echo(ctx, typ, body)
	})
	c := newClient(t, ClientConfig{})
	addr := srv.Addr().String()

	ctx, cancel := context.WithCancel(context.Background())
	done := goCall(ctx, c, addr, 1)
	handler := <-entered
	cancel()
	require.ErrorIs(t, waitResult(t, done), context.Canceled)
	select {
	case <-handler.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context was not cancelled 10 s after its caller cancelled")
	}

	// Long enough for the request to reach the handler on a slow machine.
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done = goCall(ctx, c, addr, 1)
	handler = <-entered
	require.ErrorIs(t, waitResult(t, done), context.DeadlineExceeded)
	// The server reads a connection's frames in order: once this call is
	// answered, a cancel sent before it has been read.
	_, err := c.Call(context.Background(), addr, 2, nil)
	require.NoError(t, err)
	require.NoError(t, handler.Err(), "the caller's deadline cancelled the handler")
	close(release)
}

func TestCancelledContextBeforeCallReturnsCtxErr(t *testing.T) {
	requireNoLeaks(t)
	srv := startServer(t, nil, echo)
	c := newClient(t, ClientConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Call(ctx, srv.Addr().String(), 1, nil)
	require.ErrorIs(t, err, context.Canceled)
}

// TestServerCloseFailsInFlightCallsAndClientRedials closes a server under a
// call in flight, which must fail with ErrConnClosed (its outcome is
// unknown), then starts a new server on the same address: the next call
// dials it.
func TestServerCloseFailsInFlightCallsAndClientRedials(t *testing.T) {
	requireNoLeaks(t)
	entered := make(chan struct{})
	srv := startServer(t, nil, func(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	addr := srv.Addr().String()
	c := newClient(t, ClientConfig{})

	done := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), addr, 1, nil)
		done <- err
	}()
	<-entered
	require.NoError(t, srv.Close())
	require.ErrorIs(t, waitResult(t, done), ErrConnClosed)

	ln, err := netListen(addr)
	require.NoError(t, err)
	srv2 := startServer(t, ln, echo)
	resp, err := c.Call(context.Background(), addr, 3, []byte("again"))
	require.NoError(t, err)
	require.Equal(t, []byte("\x03again"), resp)
	require.EqualValues(t, 1, srv2.accepted.Load())
}

func TestDialFailureIsNotCached(t *testing.T) {
	requireNoLeaks(t)
	ln := listen(t)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c := newClient(t, ClientConfig{})

	_, err := c.Call(context.Background(), addr, 1, nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrConnClosed, "nothing was sent")

	ln, err = netListen(addr)
	require.NoError(t, err)
	startServer(t, ln, echo)
	_, err = c.Call(context.Background(), addr, 1, nil)
	require.NoError(t, err)
}

func TestRequestLargerThanMaxFrameFailsBeforeSending(t *testing.T) {
	requireNoLeaks(t)
	srv := startServer(t, nil, echo)
	c := newClient(t, ClientConfig{MaxFrame: 64})

	_, err := c.Call(context.Background(), srv.Addr().String(), 1, make([]byte, 64-wire.HeaderSize+1))
	require.ErrorIs(t, err, wire.ErrFrameTooLarge)
	require.Zero(t, srv.accepted.Load(), "nothing may be sent")

	_, err = c.Call(context.Background(), srv.Addr().String(), 1, make([]byte, 64-wire.HeaderSize-1))
	require.NoError(t, err)
}

func TestResponseLargerThanMaxFrameBecomesRemoteError(t *testing.T) {
	requireNoLeaks(t)
	ln := listen(t)
	srv, err := Serve(ServerConfig{Listener: ln, Handler: echo, MaxFrame: 64})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	c := newClient(t, ClientConfig{})

	_, err = c.Call(context.Background(), ln.Addr().String(), 1, make([]byte, 64-wire.HeaderSize))
	var re *RemoteError
	require.ErrorAs(t, err, &re)
	require.Contains(t, re.Msg, "frame too large")

	_, err = c.Call(context.Background(), ln.Addr().String(), 1, []byte("fits"))
	require.NoError(t, err, "the connection survives")
}

// TestLongErrorTextIsCutToFitMaxFrame checks that an error answer never
// exceeds the max frame both ends share, which would drop the connection.
func TestLongErrorTextIsCutToFitMaxFrame(t *testing.T) {
	requireNoLeaks(t)
	ln := listen(t)
	srv, err := Serve(ServerConfig{Listener: ln, MaxFrame: 64, Handler: func(context.Context, uint8, []byte) ([]byte, error) {
		return nil, errors.New(strings.Repeat("x", 100))
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	c := newClient(t, ClientConfig{MaxFrame: 64})

	_, err = c.Call(context.Background(), ln.Addr().String(), 1, nil)
	var re *RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, strings.Repeat("x", 64-wire.HeaderSize), re.Msg)
}
