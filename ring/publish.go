package ring

// run is the table goroutine: it rebuilds the table on every kick until done
// is closed.
func (r *Ring) run() {
	defer r.wg.Done()
	for {
		select {
		case <-r.done:
			return
		case <-r.kick:
			r.rebuild()
		}
	}
}

// rebuild builds the table from the live members (as memberlist's events
// reported them) and publishes it if
// its checksum differs from the current one's. Only New (before the table
// goroutine starts) and the table goroutine call it, so there is one
// publisher and Version grows by one per publication.
//
// Members whose metadata does not decode or carries another fingerprint are
// left out. memberlist's AliveDelegate already refuses them; this covers a
// node that changed its metadata in an update. Members of another cluster
// ID are left out too, and logged at error level once per ID. Members
// that announced they are leaving are placed nowhere: the table lists
// them in Leaving.
func (r *Ring) rebuild() {
	nodes, self := r.hooks.liveMembers(), r.hooks.selfMeta()
	members := make([]Member, 0, len(nodes))
	var leaving []Member
	for _, n := range nodes {
		m, err := decodeMeta(n.Meta)
		if err != nil || m.Fingerprint != r.cfg.Fingerprint {
			continue
		}
		if otherCluster(self.ClusterID, m.ClusterID) {
			if r.leftOut[n.Name] != m.ClusterID {
				r.logger.Error("ring: a member belongs to another cluster ID; leaving it out (a data directory of another cluster, or two nodes that each created a cluster)",
					"node", n.Name, "addr", n.Address(), "theirs", m.ClusterID, "ours", self.ClusterID)
				r.leftOut[n.Name] = m.ClusterID
			}
			continue
		}
		delete(r.leftOut, n.Name)
		if m.Leaving {
			leaving = append(leaving, Member{Name: n.Name, RPCAddr: m.RPCAddr})
			continue
		}
		members = append(members, Member{Name: n.Name, RPCAddr: m.RPCAddr})
	}
	t := Place(members, r.cfg.Fingerprint.Partitions, r.cfg.Fingerprint.RF)
	t.Leaving = leaving
	t.Checksum = t.checksum()
	cur := r.table.Load()
	if t.Checksum == cur.Checksum {
		return
	}
	t.Version = cur.Version + 1
	r.publish(t)
	r.logger.Debug("ring: table published", "node", r.cfg.Name, "version", t.Version,
		"members", len(t.Members), "checksum", t.Checksum)
}

// publish makes t the current table and wakes everyone waiting on Changed.
func (r *Ring) publish(t *Table) {
	r.changedMu.Lock()
	defer r.changedMu.Unlock()
	r.table.Store(t)
	close(r.changed)
	r.changed = make(chan struct{})
}
