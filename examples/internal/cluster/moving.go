package cluster

import (
	"fmt"

	"github.com/singlewriter/singlewriter/ring"
)

// MovingKey returns the first key fmt.Sprintf(format, i), for i = first,
// first+1, ..., that the ring places on node joining once it joins the
// nodes named members: a key whose partition moves when joining starts.
func MovingKey(format string, first int, members []string, joining string) string {
	var ms []ring.Member
	for _, name := range append(members, joining) {
		ms = append(ms, ring.Member{Name: name})
	}
	after := ring.Place(ms, ring.DefaultPartitions, 1) // owners do not depend on the replication factor
	for i := first; ; i++ {
		key := fmt.Sprintf(format, i)
		if after.Owners[ring.Partition([]byte(key), ring.DefaultPartitions)] == joining {
			return key
		}
	}
}
