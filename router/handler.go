package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unicode/utf8"

	"github.com/singlewriter/singlewriter/owner"
)

// maxHandlerError bounds the text of a handler's error that a call's
// response carries. The response must fit a message between nodes, which
// a handler's error need not: a larger one would fail the response's
// send, and Call would run the handler again until its deadline.
const maxHandlerError = 4 << 10

// handlerFailure is how a handler failed: the text its call's response
// carries, and whether it stopped on its ctx (its error matched
// context.Canceled or owner.ErrRevoked).
type handlerFailure struct {
	text    string
	stopped bool
}

// callHandler runs h and returns its body, or how it failed. A panic is a
// failure, and so is one while its error is read, which happens here, under
// the recover: a nil pointer of an error type whose methods dereference it
// (returned where nil was meant) must fail its call, not crash the node.
func callHandler(ctx context.Context, h Handler, req *Request) (body []byte, failed *handlerFailure) {
	defer func() {
		if r := recover(); r != nil {
			body, failed = nil, &handlerFailure{text: fmt.Sprintf("handler panicked: %v", r)}
		}
	}()
	body, err := h(ctx, req)
	if err != nil {
		return nil, &handlerFailure{text: fmt.Sprint(err), stopped: errors.Is(err, context.Canceled) || errors.Is(err, owner.ErrRevoked)}
	}
	return body, nil
}

// handlerFailed is the response of a call whose handler failed with the
// error text, cut to maxHandlerError bytes (before a character that would
// straddle the cut).
func handlerFailed(text string) callResponse {
	if len(text) > maxHandlerError {
		cut := maxHandlerError
		for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(text[cut]); i++ {
			cut--
		}
		text = fmt.Sprintf("%s... (%d more bytes)", text[:cut], len(text)-cut)
	}
	return callResponse{Status: statusHandlerError, Body: []byte(text)}
}

// handlerCtx is the ctx a handler runs under: its call's ctx, marked with
// the node and the key it runs, and the handler call it is nested in (the
// handler whose Call, with its ctx, ran this one on the same node).
type handlerCtx struct {
	context.Context
	n     *Node
	key   []byte
	outer *handlerCtx
	// returned is set once the handler returned: a ctx kept, or derived
	// for a goroutine, after that marks no wait.
	returned atomic.Bool
}

// runningKey is the key under which a handlerCtx on node n finds itself.
type runningKey struct{ n *Node }

// handlerContext returns the ctx a handler for key runs under on n.
func handlerContext(ctx context.Context, n *Node, key []byte) *handlerCtx {
	outer, _ := ctx.Value(runningKey{n}).(*handlerCtx)
	return &handlerCtx{Context: ctx, n: n, key: key, outer: outer}
}

// Value returns c itself for runningKey{c.n}, else ctx's value for k.
func (c *handlerCtx) Value(k any) any {
	if r, ok := k.(runningKey); ok && r.n == c.n {
		return c
	}
	return c.Context.Value(k)
}

// calledBack reports whether ctx is, or derives from, the ctx of a handler
// still running on n for key, or of one that a handler running for key
// waits for through nested Calls: a Call for key would queue behind the
// handler waiting for it.
func calledBack(ctx context.Context, n *Node, key []byte) bool {
	c, _ := ctx.Value(runningKey{n}).(*handlerCtx)
	for ; c != nil; c = c.outer {
		if !c.returned.Load() && bytes.Equal(c.key, key) {
			return true
		}
	}
	return false
}
