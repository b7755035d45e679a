package ring_test

import (
	"fmt"

	"github.com/singlewriter/singlewriter/ring"
)

// Place predicts, from the member list alone, which node owns a key and which
// nodes replicate it: every node of a cluster computes the same table.
func Example() {
	members := []ring.Member{
		{Name: "node-a", RPCAddr: "10.0.0.1:9000"},
		{Name: "node-b", RPCAddr: "10.0.0.2:9000"},
		{Name: "node-c", RPCAddr: "10.0.0.3:9000"},
		{Name: "node-d", RPCAddr: "10.0.0.4:9000"},
	}
	table := ring.Place(members, ring.DefaultPartitions, 3)

	for _, key := range []string{"user-42", "order-7", "cart-19"} {
		p := ring.Partition([]byte(key), ring.DefaultPartitions)
		owner, _ := table.Member(table.Owners[p])
		fmt.Printf("%s: partition %d, owner %s at %s, replicas %v\n", key, p, owner.Name, owner.RPCAddr, table.Replicas[p])
	}

	load := map[string]int{}
	for _, o := range table.Owners {
		load[o]++
	}
	fmt.Println("partitions owned:", load)
	// Output:
	// user-42: partition 145, owner node-c at 10.0.0.3:9000, replicas [node-c node-d node-b]
	// order-7: partition 175, owner node-a at 10.0.0.1:9000, replicas [node-a node-c node-d]
	// cart-19: partition 253, owner node-b at 10.0.0.2:9000, replicas [node-b node-a node-d]
	// partitions owned: map[node-a:85 node-b:54 node-c:58 node-d:74]
}
