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
//
// # Goroutines
//
// The pure core starts none. An Owner starts, and Close cancels and waits
// for: the reconcile loop (Owner.run, from Start), which waits for a ring
// view stable for SettleTime and reads the ring's and the claims' Changed
// channels, the kicks channel and a timer; one attempt per partition being
// acquired, resumed, released or finalized (Owner.attempt, from the loop
// or HandleHandoff; at most 16 run at once); one goroutine per protocol
// message an attempt sends (in drive), which the attempt waits for; for
// each batch sent to other replicas (a call's batch from Submit, a start
// marker from commitMarker), a collector (replicate) that completes the
// Commit at a majority (or once none is possible), marking the partition
// lagging if a replica refused the batch by then, and exits; and, per
// replica, a sender (stream.go: send) while batches are queued for it,
// which sends them, many to a message, one message at a time, marks the
// partition lagging for each queued batch the replica failed, and exits
// when the queue is empty. HandleReplicate starts none: it
// runs on its caller's goroutine (the router's RPC handler). See
// docs/ARCHITECTURE.md for every goroutine of the library.
package owner
