// Package owner decides who serves each partition and moves ownership safely.
//
// Ownership of a partition is a chain of claims. Each claim names an epoch,
// an owner and a replica set; its successor is chosen by a majority of its
// replicas with single-decree Paxos, the epoch being the ballot. The
// protocol's decisions are pure and tested without sockets:
//
//   - Proposer drives one acquire attempt: Prepare, data sync, Accept.
//   - HandlePrepare, HandleAccept and HandleChoose are a replica's side,
//     applied to its durable state through the Acceptor interface.
//   - Claims is the table of the latest chosen claim per partition, merged
//     by "higher epoch wins" and spread by gossip.
//   - Plan compares the ring's desired placement with the claims and says
//     which partitions this node should acquire.
//
// Owner is the runtime around that core: it serves partitions, drains them
// when another node prepares a higher epoch, and runs acquisitions through a
// Transport supplied by the router.
package owner
