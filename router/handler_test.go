package router

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// A handler's error can be larger than a message between nodes; its call,
// forwarded, must still fail with ErrHandler after one run, its text cut,
// not have its response's send fail and be retried, running the handler
// again, until its deadline.
func TestHandlerErrorLargerThanAMessageFailsTheForwardedCallOnce(t *testing.T) {
	var runs atomic.Int64
	huge := "x" + strings.Repeat("é", 1<<20) // 2 MiB, two bytes a character: a character starts at every odd byte
	c := newTestCluster(t, 2, func(n *Node) {
		n.Handle("fail", func(context.Context, *Request) ([]byte, error) {
			runs.Add(1)
			return nil, errors.New(huge)
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.nodes[0].Call(ctx, keyOwnedBy(c.nodes[0], "n1"), "fail", nil)
	require.ErrorIs(t, err, ErrHandler)
	require.Equal(t, int64(1), runs.Load())
	require.Less(t, len(err.Error()), maxHandlerError+100)
	require.Contains(t, err.Error(), huge[:maxHandlerError-1])
	require.True(t, utf8.ValidString(err.Error()), "the text was cut inside a character")
}

// A handler that calls its own key with its ctx, directly or through the
// handler of another key, fails at once with ErrCallCycle: that call would
// wait behind the handler waiting for it, until its deadline. A handler
// calling another key is no cycle.
func TestHandlerCallingItsOwnKeyFailsAtOnce(t *testing.T) {
	var n *Node
	c := newReplicatedCluster(t, 1, 1, func(node *Node) {
		node.Handle("inc", counter)
		// call calls the key in its payload, or its own key, with method
		// inc, or with method call on the key after the "/".
		node.Handle("call", func(ctx context.Context, req *Request) ([]byte, error) {
			target, next, nested := strings.Cut(string(req.Payload), "/")
			if target == "" {
				target = string(req.Key)
			}
			if nested {
				return n.Call(ctx, []byte(target), "call", []byte(next))
			}
			return n.Call(ctx, []byte(target), "inc", nil)
		})
	})
	n = c.nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// The handler's Call fails, and so does the handler, with its text.
	_, err := n.Call(ctx, []byte("a"), "call", nil)
	require.ErrorIs(t, err, ErrHandler)
	require.ErrorContains(t, err, ErrCallCycle.Error(), "its own key")
	_, err = n.Call(ctx, []byte("a"), "call", []byte("b/a"))
	require.ErrorContains(t, err, ErrCallCycle.Error(), "its own key through b's handler")
	require.NoError(t, ctx.Err(), "a cycle waited for the deadline")

	v, err := n.Call(ctx, []byte("a"), "call", []byte("b/c"))
	require.NoError(t, err, "a to b to c is no cycle")
	require.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 1}, v)
}

// A ctx kept from a handler, or derived from it for a goroutine, marks no
// cycle once the handler has returned: a Call for its key then waits for
// nobody.
func TestCtxOfAHandlerThatReturnedMarksNoCycle(t *testing.T) {
	var kept context.Context
	c := newReplicatedCluster(t, 1, 1, func(n *Node) {
		n.Handle("inc", counter)
		n.Handle("keep", func(ctx context.Context, _ *Request) ([]byte, error) {
			kept = context.WithoutCancel(ctx)
			return nil, nil
		})
	})
	n := c.nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n.Call(ctx, []byte("a"), "keep", nil)
	require.NoError(t, err)
	later, cancelLater := context.WithTimeout(kept, 5*time.Second)
	defer cancelLater()
	_, err = n.Call(later, []byte("a"), "inc", nil)
	require.NoError(t, err)
}

// The cut never steps back more than one character's length, whatever
// the text's bytes: 5,000 bytes that are no character's start (invalid
// UTF-8, echoed from a payload, say) are cut at 4 KiB too.
func TestHandlerErrorTextOfInvalidUTF8IsCut(t *testing.T) {
	r := handlerFailed(strings.Repeat("\x80", 5000))
	require.Equal(t, strings.Repeat("\x80", maxHandlerError-utf8.UTFMax+1)+"... (907 more bytes)", string(r.Body))
}

// brokenError is an error type whose methods dereference their receiver,
// as many do: a nil one, returned where nil was meant, panics when read.
type brokenError struct{ msg string }

func (e *brokenError) Error() string { return e.msg }
func (e *brokenError) Unwrap() error { return errors.New(e.msg) }

// A handler that returns a nil *brokenError as its error (the typed-nil
// mistake) fails its call with ErrHandler; reading that error must not
// crash the node, which still serves the key afterwards.
func TestHandlerReturningATypedNilErrorFailsItsCallOnly(t *testing.T) {
	c := newReplicatedCluster(t, 1, 1, func(node *Node) {
		node.Handle("inc", counter)
		node.Handle("broken", func(context.Context, *Request) ([]byte, error) {
			var err *brokenError
			return nil, err
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.nodes[0].Call(ctx, []byte("a"), "broken", nil)
	require.ErrorIs(t, err, ErrHandler)
	_, err = c.nodes[0].Call(ctx, []byte("a"), "inc", nil)
	require.NoError(t, err, "the node stopped serving after the handler's error")
}
