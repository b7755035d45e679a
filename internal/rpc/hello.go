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
	// ClusterID is the ID of the sender's cluster, "" if it has none yet:
	// unlike Cluster, what it must match is for Accept to decide.
	ClusterID string
}

// withClusterID returns h with the ClusterID clusterID gives, if set.
func withClusterID(h Hello, clusterID func() string) Hello {
	if clusterID != nil {
		h.ClusterID = clusterID()
	}
	return h
}

// greeting is a handshake frame's body: the sender's Hello and MaxFrame,
// its nonce, and (from the server) its proof of the cluster's secret. Each
// end sends nothing larger than the other's MaxFrame, so that no frame one
// end accepts makes the other drop the connection.
type greeting struct {
	hello    Hello
	maxFrame uint64
	nonce    []byte
	proof    []byte
}

func (g greeting) encode() []byte {
	var e wire.Encoder
	e.String(g.hello.Cluster)
	e.String(g.hello.Node)
	e.String(g.hello.ClusterID)
	e.Uvarint(g.maxFrame)
	e.Bytes(g.nonce)
	e.Bytes(g.proof)
	return e.Out()
}

// decodeGreeting decodes what greeting.encode encoded. A MaxFrame that
// cannot hold a frame header is refused.
func decodeGreeting(b []byte) (greeting, error) {
	d := wire.NewDecoder(b)
	g := greeting{hello: Hello{Cluster: d.String(), Node: d.String(), ClusterID: d.String()}, maxFrame: d.Uvarint(), nonce: d.Bytes(), proof: d.Bytes()}
	if err := d.Finish(); err != nil {
		return g, err
	}
	if g.maxFrame != 0 && g.maxFrame < wire.HeaderSize {
		return g, fmt.Errorf("%w: max frame %d cannot hold a frame header", wire.ErrMalformed, g.maxFrame)
	}
	return g, nil
}

// frameLimit is the largest frame both ends accept: own, or the peer's
// MaxFrame if it is smaller. Zero (a peer that did not say) means own.
func frameLimit(own int, peer uint64) int {
	if peer > 0 && peer < uint64(own) {
		return int(peer)
	}
	return own
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

// clientHandshake sends hello, maxFrame and a nonce, reads the server's
// answer, checks it with accept and the server's proof of secret, and
// sends its own proof. It returns the largest frame both ends accept. It
// runs before the link's writer goroutine exists.
func clientHandshake(l *link, addr string, hello Hello, maxFrame int, secret []byte, accept func(Hello) error) (int, error) {
	own := greeting{hello: hello, maxFrame: uint64(maxFrame), nonce: newNonce()}
	if err := l.writeNow(wire.Frame{Type: helloType, Body: own.encode()}); err != nil {
		return 0, err
	}
	f, err := readHello(l, true)
	if err != nil {
		return 0, err
	}
	if f.Flags&wire.FlagError != 0 {
		return 0, fmt.Errorf("%w by %s: %s", ErrRefused, addr, f.Body)
	}
	peer, err := decodeGreeting(f.Body)
	if err != nil {
		return 0, fmt.Errorf("rpc: hello from %s: %w", addr, err)
	}
	if accept != nil {
		if err := accept(peer.hello); err != nil {
			return 0, fmt.Errorf("%w: server %s (%s/%s): %w", ErrRefused, addr, peer.hello.Cluster, peer.hello.Node, err)
		}
	}
	t := transcript{cluster: hello.Cluster, client: own, server: peer}
	if !t.verify(secret, serverRole, peer.proof) {
		return 0, fmt.Errorf("%w: server %s (%s) does not know the cluster's secret", ErrRefused, addr, peer.hello.Node)
	}
	if err := l.writeNow(wire.Frame{Type: helloType, Body: t.prove(secret, clientRole)}); err != nil {
		return 0, err
	}
	return frameLimit(maxFrame, peer.maxFrame), nil
}

// serverHandshake reads a client's hello, checks it with accept, answers
// with hello, maxFrame, a nonce and its proof of secret (or with the reason
// for refusing), and checks the client's proof. It returns the client's
// Hello and the largest frame both ends accept. It runs before the link's
// writer goroutine exists.
func serverHandshake(l *link, hello Hello, maxFrame int, secret []byte, accept func(Hello) error) (Hello, int, error) {
	f, err := readHello(l, false)
	if err != nil {
		return Hello{}, 0, err
	}
	peer, err := decodeGreeting(f.Body)
	if err != nil {
		return Hello{}, 0, fmt.Errorf("rpc: hello: %w", err)
	}
	if accept != nil {
		if err := accept(peer.hello); err != nil {
			// Best effort: the client learns why; the connection is dropped anyway.
			_ = l.writeNow(wire.Frame{Type: helloType, Flags: wire.FlagResponse | wire.FlagError, Body: errorText(err, maxHelloFrame)})
			return peer.hello, 0, fmt.Errorf("%w: client %s/%s: %w", ErrRefused, peer.hello.Cluster, peer.hello.Node, err)
		}
	}
	own := greeting{hello: hello, maxFrame: uint64(maxFrame), nonce: newNonce()}
	t := transcript{cluster: peer.hello.Cluster, client: peer, server: own}
	own.proof = t.prove(secret, serverRole)
	if err := l.writeNow(wire.Frame{Type: helloType, Flags: wire.FlagResponse, Body: own.encode()}); err != nil {
		return peer.hello, 0, err
	}
	f, err = readHello(l, false)
	if err != nil {
		return peer.hello, 0, err
	}
	if !t.verify(secret, clientRole, f.Body) {
		return peer.hello, 0, fmt.Errorf("%w: client %s/%s does not know the cluster's secret", ErrRefused, peer.hello.Cluster, peer.hello.Node)
	}
	return peer.hello, frameLimit(maxFrame, peer.maxFrame), nil
}
