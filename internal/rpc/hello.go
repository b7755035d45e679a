package rpc

import (
	"fmt"

	"github.com/singlewriter/singlewriter/internal/wire"
)

// helloType is the message type of the handshake frames. It is only special
// as the first frame in each direction; later frames of any type go to the
// Handler.
const helloType uint8 = 0

// maxHelloFrame bounds the handshake frames, far below MaxFrame, so that a
// peer that is not speaking this protocol cannot make us allocate much.
const maxHelloFrame = 4 << 10

// Hello identifies a node to its peer at the start of every connection.
type Hello struct {
	// Cluster names the cluster, and whatever must match for two nodes to
	// talk (partition count, hash version).
	Cluster string
	// Node is the sender's name.
	Node string
}

func (h Hello) encode() []byte {
	var e wire.Encoder
	e.String(h.Cluster)
	e.String(h.Node)
	return e.Out()
}

func decodeHello(b []byte) (Hello, error) {
	d := wire.NewDecoder(b)
	h := Hello{Cluster: d.String(), Node: d.String()}
	return h, d.Finish()
}

// readHello reads the peer's handshake frame and checks its envelope: id 0,
// type 0, and flags as given (the error flag is allowed on responses only).
func readHello(l *link, response bool) (wire.Frame, error) {
	f, err := wire.ReadFrame(l.br, maxHelloFrame)
	if err != nil {
		return f, err
	}
	flagsOK := f.Flags == 0
	if response {
		flagsOK = f.Flags == wire.FlagResponse || f.Flags == wire.FlagResponse|wire.FlagError
	}
	if f.ID != 0 || f.Type != helloType || !flagsOK {
		return f, fmt.Errorf("rpc: expected a hello frame, got id %d type %d flags %#x", f.ID, f.Type, f.Flags)
	}
	return f, nil
}

// clientHandshake sends hello, reads the server's answer and checks it with
// accept. It runs before the link's writer goroutine exists.
func clientHandshake(l *link, addr string, hello Hello, accept func(Hello) error) error {
	if err := l.writeNow(wire.Frame{Type: helloType, Body: hello.encode()}); err != nil {
		return err
	}
	f, err := readHello(l, true)
	if err != nil {
		return err
	}
	if f.Flags&wire.FlagError != 0 {
		return fmt.Errorf("%w by %s: %s", ErrRefused, addr, f.Body)
	}
	peer, err := decodeHello(f.Body)
	if err != nil {
		return fmt.Errorf("rpc: hello from %s: %w", addr, err)
	}
	if accept != nil {
		if err := accept(peer); err != nil {
			return fmt.Errorf("%w: server %s (%s/%s): %w", ErrRefused, addr, peer.Cluster, peer.Node, err)
		}
	}
	return nil
}

// serverHandshake reads a client's hello, checks it with accept and answers
// with hello or with the reason for refusing. It runs before the link's
// writer goroutine exists.
func serverHandshake(l *link, hello Hello, accept func(Hello) error) (Hello, error) {
	f, err := readHello(l, false)
	if err != nil {
		return Hello{}, err
	}
	peer, err := decodeHello(f.Body)
	if err != nil {
		return Hello{}, fmt.Errorf("rpc: hello: %w", err)
	}
	if accept != nil {
		if err := accept(peer); err != nil {
			// Best effort: the client learns why; the connection is dropped anyway.
			_ = l.writeNow(wire.Frame{Type: helloType, Flags: wire.FlagResponse | wire.FlagError, Body: errorText(err, maxHelloFrame)})
			return peer, fmt.Errorf("%w: client %s/%s: %w", ErrRefused, peer.Cluster, peer.Node, err)
		}
	}
	return peer, l.writeNow(wire.Frame{Type: helloType, Flags: wire.FlagResponse, Body: hello.encode()})
}
