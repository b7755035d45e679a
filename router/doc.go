// Package router is the library's public face: a Node joins the cluster,
// serves the partitions it owns, and routes every Call to the owner of its
// key's partition.
//
// Smallest use, one node of a new cluster:
//
//	n, err := router.New(router.Config{Name: "a", DataDir: dir, Bootstrap: true})
//	if err != nil { ... }
//	n.Handle("inc", func(ctx context.Context, req *router.Request) ([]byte, error) {
//		v, _ := req.State.Get()
//		next := append(v, '+')
//		req.State.Put(next)
//		return next, nil
//	})
//	if err := n.Start(ctx); err != nil { ... }
//	defer n.Close()
//	out, err := n.Call(ctx, []byte("key"), "inc", nil)
//
// Calls for one key run one at a time, in arrival order, on the key's
// owner; their writes commit with the call's response at the partition's
// epoch, and the store refuses the commit if the partition moved to a newer
// epoch meanwhile (with replicas, Call retries it on the new owner with the
// same request ID; with replication factor 1 it returns ErrStaleEpoch).
// With Config.ReplicationFactor 3, the default, or 5 a call is answered
// once a majority of the partition's replicas hold its commit; a cluster
// of fewer nodes keeps a copy on every node. A Call entering a node that
// does not own the key goes to the owner over one persistent, pipelined
// TCP connection per peer, and is retried with the same request ID until
// an owner answers or ctx ends (ErrUnavailable).
//
// Goroutines: one per key with queued calls (once the queue is empty it
// waits up to 5 s for another key's calls, then exits), one per call
// waiting for its commit, one pruning stored responses, one closing the
// RPC connections of departed members, one watching the store (a node
// whose store fails leaves the cluster and closes: see Node.Err), plus
// those of the owner, ring, rpc and store packages. Close waits for all of
// them.
package router
