package main

import (
	"fmt"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
)

// checkEpochs checks the nodes' audits of epoch transitions: on each node
// a partition's epochs only grow, and across all nodes no epoch of a
// partition has two owners.
func checkEpochs(statuses []api.Status) []string {
	var v []string
	owners := map[int]map[uint64]string{}
	for _, st := range statuses {
		for p, records := range st.Audit {
			if owners[p] == nil {
				owners[p] = map[uint64]string{}
			}
			for i, r := range records {
				if i > 0 && r.Epoch <= records[i-1].Epoch {
					v = append(v, fmt.Sprintf("epochs: %s partition %d: epoch %d recorded after %d", st.Name, p, r.Epoch, records[i-1].Epoch))
				}
				if o, ok := owners[p][r.Epoch]; ok && o != r.Owner {
					v = append(v, fmt.Sprintf("epochs: partition %d epoch %d has two owners, %s and %s", p, r.Epoch, o, r.Owner))
				}
				owners[p][r.Epoch] = r.Owner
			}
		}
	}
	return v
}
