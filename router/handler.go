package router

import (
	"context"
	"fmt"
	"unicode/utf8"
)

// maxHandlerError bounds the text of a handler's error that a call's
// response carries. The response must fit a message between nodes, which
// a handler's error need not: a larger one would fail the response's
// send, and Call would run the handler again until its deadline.
const maxHandlerError = 4 << 10

// callHandler runs h, turning a panic into an error.
func callHandler(ctx context.Context, h Handler, req *Request) (body []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return h(ctx, req)
}

// handlerFailed is the response of a call whose handler failed with err,
// its text cut to maxHandlerError bytes (at a character's start).
func handlerFailed(err error) callResponse {
	text := err.Error()
	if len(text) > maxHandlerError {
		cut := maxHandlerError
		for !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = fmt.Sprintf("%s... (%d more bytes)", text[:cut], len(text)-cut)
	}
	return callResponse{Status: statusHandlerError, Body: []byte(text)}
}

// runningKey is the context key under which a handler's ctx holds the keys
// whose handlers run on node n, innermost first (see calledBack).
type runningKey struct{ n *Node }

// running is one key whose handler runs, and the handler call it is nested in.
type running struct {
	key   string
	outer *running
}

// handlerContext is the ctx a handler for key runs under on n: ctx, marked
// as running key there.
func handlerContext(ctx context.Context, n *Node, key []byte) context.Context {
	outer, _ := ctx.Value(runningKey{n}).(*running)
	return context.WithValue(ctx, runningKey{n}, &running{key: string(key), outer: outer})
}

// calledBack reports whether ctx is a handler's on n, or derived from one,
// that runs key or is nested in a handler that does: a Call for key would
// queue behind the handler waiting for it.
func calledBack(ctx context.Context, n *Node, key []byte) bool {
	r, _ := ctx.Value(runningKey{n}).(*running)
	for ; r != nil; r = r.outer {
		if r.key == string(key) {
			return true
		}
	}
	return false
}
