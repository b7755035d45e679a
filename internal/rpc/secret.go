package rpc

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"

	"github.com/singlewriter/singlewriter/internal/wire"
)

// nonceSize is the length of each end's handshake nonce.
const nonceSize = 16

// Roles in a handshake proof: a proof made by one end cannot be replayed
// as the other's.
const (
	serverRole = "singlewriter rpc server"
	clientRole = "singlewriter rpc client"
)

// newNonce returns a fresh random nonce.
func newNonce() []byte {
	b := make([]byte, nonceSize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// transcript is what a handshake's proofs of secret bind: the cluster, both
// ends' names and both nonces. Each end proves it knows the secret by a MAC
// over the other's fresh nonce, so a recorded handshake cannot be replayed,
// and a client that does not know the secret never gets a request handled
// on a connection it opened. It authenticates the connection's setup
// only: frames after the handshake carry no MAC, so an attacker on the
// network path can pass a member's handshake through and then inject or
// change frames. Against such an attacker the cluster's links need a
// tunnel (TLS, a VPN) or a trusted network.
// With no secret, the proofs are MACs under an empty key: every end
// without a secret accepts every other one, and refuses an end with one.
type transcript struct {
	cluster        string
	client, server greeting
}

// prove returns the proof of secret of the end playing role.
func (t transcript) prove(secret []byte, role string) []byte {
	var e wire.Encoder
	e.String(role)
	e.String(t.cluster)
	e.String(t.client.hello.Node)
	e.String(t.server.hello.Node)
	e.String(t.client.hello.ClusterID)
	e.String(t.server.hello.ClusterID)
	e.Bytes(t.client.nonce)
	e.Bytes(t.server.nonce)
	mac := hmac.New(sha256.New, secret)
	mac.Write(e.Out())
	return mac.Sum(nil)
}

// verify reports whether proof is role's proof of secret.
func (t transcript) verify(secret []byte, role string, proof []byte) bool {
	return hmac.Equal(proof, t.prove(secret, role))
}
