// Package faultnet is a fault-injecting network for one node: the sockets
// of a router.Node (its RPC listener, its RPC dials and its gossip
// transport) bound to the node's own loopback IP, with rules that cut,
// delay and drop its links to chosen peers.
//
// Every node of a test cluster gets its own IP in 127.0.0.0/8 (Linux routes
// the whole range to lo) and its own Net. Dials bind their local address to
// that IP, so a peer knows who is calling by the source IP, and rules name
// peers by IP:
//
//	fn := faultnet.New(net.ParseIP("127.0.0.2"), seed)
//	n, _ := router.New(router.Config{..., Network: fn,
//		GossipAddr: "127.0.0.2:7946", RPCAddr: "127.0.0.2:7947"})
//	fn.Block(net.ParseIP("127.0.0.3")) // cut the link to 127.0.0.3, both ways
//	fn.Heal()                           // remove every rule
//
// A blocked peer's open connections are cut at once, dials to it are
// refused, connections it opens are closed on accept, gossip packets to and
// from it are dropped and gossip streams refused. A split between two
// groups is every node of one group blocking every node of the other.
// Silence blocks a peer but leaves the open connections open and silent,
// as a frozen process would: a frozen node is silenced by every other node
// and silences them all.
// SetDelay holds every outgoing write and packet for a time; SetDrop loses
// gossip packets with a probability and, on TCP, where a loss shows as
// latency, holds a write back for a retransmission timeout instead.
package faultnet
