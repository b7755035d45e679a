package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
	"github.com/singlewriter/singlewriter/ring"
)

// convergeBound bounds the time the cluster may take to agree after the
// faults are healed.
const convergeBound = 45 * time.Second

// converge waits until every running node sees the same members (all the
// running nodes), the same claim of every partition, each claim names the
// partition's desired owner (ring.Place over the members) and that owner
// serves the partition at the claimed epoch. It returns the last
// statuses and an error if that does not happen within convergeBound.
func (c *cluster) converge() ([]api.Status, error) {
	deadline := time.Now().Add(convergeBound)
	for {
		statuses, err := c.agreement()
		if err == nil || time.Now().After(deadline) {
			return statuses, err
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
}

// agreement returns the running nodes' statuses and why they do not agree,
// if they do not.
func (c *cluster) agreement() ([]api.Status, error) {
	nodes := c.running()
	var names []string
	byName := map[string]api.Status{}
	var statuses []api.Status
	for _, n := range nodes {
		st, err := c.status(n, 2*time.Second)
		if err != nil {
			return statuses, err
		}
		names = append(names, n.name)
		byName[n.name] = st
		statuses = append(statuses, st)
	}
	slices.Sort(names)
	for _, st := range statuses {
		m := slices.Sorted(slices.Values(st.Members))
		if !slices.Equal(m, names) {
			return statuses, fmt.Errorf("%s sees members %v, want %v", st.Name, m, names)
		}
	}
	var members []ring.Member
	for _, name := range names {
		members = append(members, ring.Member{Name: name})
	}
	desired := ring.Place(members, partitions, 1)
	first := statuses[0]
	for p, cl := range first.Claims {
		if cl.Owner != desired.Owners[p] {
			return statuses, fmt.Errorf("partition %d: claimed by %s, desired owner %s", p, cl.Owner, desired.Owners[p])
		}
		for _, st := range statuses[1:] {
			if st.Claims[p] != cl {
				return statuses, fmt.Errorf("partition %d: %s knows claim %+v, %s knows %+v", p, first.Name, cl, st.Name, st.Claims[p])
			}
		}
		owner, ok := byName[cl.Owner]
		if !ok {
			return statuses, fmt.Errorf("partition %d is claimed by %q, not a running node", p, cl.Owner)
		}
		if e, ok := owner.Serving[p]; !ok || e != cl.Epoch {
			return statuses, fmt.Errorf("partition %d: owner %s does not serve it at epoch %d", p, cl.Owner, cl.Epoch)
		}
	}
	return statuses, nil
}
