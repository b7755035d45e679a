// Package ring is cluster membership and partition placement: who is in the
// cluster, and which members own and replicate each partition.
//
// Membership is hashicorp/memberlist (SWIM gossip and failure detection).
// Placement is buraksezer/consistent with an xxhash hasher and bounded load
// for each partition's desired owner, plus rendezvous hashing of
// (partition, member) for its backups. The package holds no data and serves no
// RPC; it publishes an immutable [Table] every time the membership changes and
// carries the consumer's replicated state (a [Delegate]) over gossip.
//
// The smallest use:
//
//	r, err := ring.New(ring.Config{
//		Name:        "node-1",
//		BindAddr:    "127.0.0.1",
//		RPCAddr:     "127.0.0.1:9000",
//		Fingerprint: ring.Fingerprint{Cluster: "orders", Partitions: ring.DefaultPartitions, RF: 3},
//		Seeds:       []string{"127.0.0.1:7946"},
//	})
//	if err != nil {
//		return err
//	}
//	defer r.Close()
//	if err := r.Join(ctx); err != nil {
//		return err
//	}
//	t := r.Table()
//	owner := t.Owners[ring.Partition([]byte("user-42"), ring.DefaultPartitions)]
//
// # Goroutines
//
// A Ring starts two goroutines of its own. The table goroutine (run in
// publish.go) owns the published table: it reads the kick channel, which
// memberlist's event callbacks signal without blocking, and the done channel,
// which Close closes. On each kick it reads the live members that the event
// callbacks recorded (copies: memberlist updates its own Node values in
// place), builds a table
// with Place and, if the checksum changed, publishes it and closes the Changed
// channel. The reconnect goroutine (reconnect.go), started by a successful
// Join, re-joins every 2s the seeds missing from the member list, under
// lifeMu. Close stops both and waits for them.
//
// memberlist runs its own goroutines (listeners, probe, gossip, push/pull);
// they call the hooks in hooks.go under memberlist's internal locks, so the
// hooks never block and never call back into memberlist. Shutdown stops them.
package ring
