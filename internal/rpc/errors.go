package rpc

import "errors"

var (
	// ErrClosed is returned by Client.Call after Client.Close, and is wrapped
	// (with ErrConnClosed) into the error of calls that were in flight when
	// the client or the server closed.
	ErrClosed = errors.New("rpc: closed")
	// ErrConnClosed is returned (wrapped with the address and the cause) by
	// Client.Call when the connection carrying the call broke before the
	// response arrived: the request may or may not have been handled.
	ErrConnClosed = errors.New("rpc: connection closed")
	// ErrRefused is returned (wrapped with the reason) by Client.Call when the
	// handshake was rejected, by the server's Accept or by the client's.
	ErrRefused = errors.New("rpc: handshake refused")
)

// RemoteError is returned by Client.Call when the server's Handler returned
// an error; Msg is that error's text. The request was handled.
type RemoteError struct {
	// Msg is the text of the handler's error.
	Msg string
}

// Error implements error.
func (e *RemoteError) Error() string {
	return "rpc: remote error: " + e.Msg
}
