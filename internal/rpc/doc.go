// Package rpc is the request/response transport between nodes: one
// persistent TCP connection per peer, many calls in flight on it at once,
// frames from package wire.
//
// A server answers every request with a Handler; a client calls by address:
//
//	srv, err := rpc.Serve(rpc.ServerConfig{
//		Listener: ln,
//		Hello:    rpc.Hello{Cluster: "prod", Node: "b"},
//		Accept:   func(h rpc.Hello) error { return sameCluster(h) },
//		Handler: func(ctx context.Context, typ uint8, body []byte) ([]byte, error) {
//			return body, nil // echo
//		},
//	})
//	...
//	c := rpc.NewClient(rpc.ClientConfig{Hello: rpc.Hello{Cluster: "prod", Node: "a"}})
//	defer c.Close()
//	resp, err := c.Call(ctx, srv.Addr().String(), 1, []byte("ping"))
//
// Every connection starts with a handshake: the client sends its Hello as a
// frame of type 0, the server checks it with ServerConfig.Accept and answers
// with its own Hello (or with the reason it refused), which the client checks
// with ClientConfig.Accept; then the client sends its proof of the shared
// secret. Each Hello frame also carries its sender's MaxFrame, so that
// neither end sends the other a larger frame, and a nonce; the server's
// also carries its proof of the secret (see transcript). After that,
// requests carry an id chosen by the client, responses echo it, and they
// may come back in any order.
//
// # Goroutines
//
// Client:
//   - one dial goroutine per connection being established; it owns the socket
//     until the handshake is done, then starts the two below;
//   - one writer per connection (link.writeLoop): reads the link's queue,
//     writes every frame queued, flushes once, repeats;
//   - one reader per connection (Client.readLoop): reads responses, hands each
//     to the waiting caller by id; when the connection breaks it fails every
//     call in flight with ErrConnClosed and forgets the connection.
//
// Server:
//   - one accept loop (Server.acceptLoop);
//   - one reader per connection (Server.serveConn): does the handshake, then
//     reads requests and starts one goroutine per request;
//   - one writer per connection (link.writeLoop), as on the client;
//   - one goroutine per request running the Handler and queuing its answer.
//
// Client.Close and Server.Close stop all of them and wait for them.
package rpc
