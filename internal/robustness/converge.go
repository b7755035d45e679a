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
	var statuses []api.Status
	err := await(convergeBound, func() (err error) {
		statuses, err = c.agreement()
		return err
	})
	return statuses, err
}

// await polls cond until it returns nil or bound has passed, and returns
// its last error.
func await(bound time.Duration, cond func() error) error {
	deadline := time.Now().Add(bound)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
}

// settled returns why the cluster has not settled, if it has not: the
// nodes agree (agreement) and each reports itself settled
// (router.Node.Settled: every claim it knows has the owner and replicas
// placement gives, and the node holds a copy of every partition whose
// claim names it).
func (c *cluster) settled() error {
	statuses, err := c.agreement()
	if err != nil {
		return err
	}
	for _, st := range statuses {
		if !st.Settled {
			return fmt.Errorf("%s is not settled: a claim it knows differs from placement, or it lacks a copy", st.Name)
		}
	}
	return nil
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
