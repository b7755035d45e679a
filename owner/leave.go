package owner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/singlewriter/singlewriter/ring"
)

// Leave takes this node out of every partition's claim, as owner and as
// replica, and returns when no claim it knows names it or ctx ends. The
// node acquires nothing afterwards. It does not leave the ring: the caller
// does that after Leave returns.
//
// It first tells the members it is leaving (Ring.SetLeaving): their tables
// place nothing on it, so the owners of the partitions it backs up acquire
// them again without it, while it still answers as a replica (were it
// gone, a replica set of two, or of three with two leaving at once, would
// have no majority left). The partitions it owns it hands to the node that
// will own them once it is gone. Each round places them over the members
// then in the table, less this node and those that refused a handoff
// because they are leaving too (ErrLeaving), so that nodes leaving at
// once, or a successor that crashed, do not hold it up. An acquisition
// that began before Leave runs to its end first: a claim it makes this
// node's is handed off too. A node with no other member left to take its
// partitions (the last one, or one whose others all left or refused)
// returns an error naming how many it still holds: they stay in its data
// directory.
func (o *Owner) Leave(ctx context.Context) error {
	if o.ctx.Err() != nil {
		return ErrClosed
	}
	o.leaving.Store(true)
	if err := o.ring.SetLeaving(leaveAnnounceTimeout); err != nil {
		o.cfg.Logger.Warn("cannot gossip that this node is leaving yet", "err", err)
	}
	refused := map[string]bool{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		changed := o.claims.Changed()
		owned, held := o.named()
		if held == 0 && !o.attempting() {
			return nil
		}
		if len(o.others(refused)) == 0 {
			return fmt.Errorf("owner: leave: %d partitions still held (%d owned), kept in the data directory: every other member left or is leaving", held, len(owned))
		}
		if len(owned) > 0 {
			o.handOff(ctx, owned, refused)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("owner: leave: %d partitions still held (%d owned): %w", held, len(owned), ctx.Err())
		case <-o.ctx.Done():
			return ErrClosed
		case <-changed:
		case <-tick.C:
		}
	}
}

// leaveAnnounceTimeout bounds Leave's wait for the gossip of its
// announcement; push/pull carries it later if it ends.
const leaveAnnounceTimeout = time.Second

// handOff asks the node that will own each of the owned partitions once
// this one is gone to acquire it, placing them over the members less this
// node and those in refused (which it adds to when a member answers
// ErrLeaving).
func (o *Owner) handOff(ctx context.Context, owned []int, refused map[string]bool) {
	next := ring.Place(o.others(refused), o.cfg.Partitions, o.cfg.ReplicationFactor)
	for _, p := range owned {
		to := next.Owners[p]
		hctx, cancel := context.WithTimeout(ctx, o.cfg.RequestTimeout)
		err := o.cfg.Transport.Handoff(hctx, to, Handoff{P: p, Replicas: next.Replicas[p]})
		cancel()
		if errors.Is(err, ErrLeaving) {
			refused[to] = true
		}
		if err != nil {
			o.cfg.Logger.Debug("handoff request failed", "partition", p, "to", to, "err", err)
		}
	}
}

// attempting reports whether an attempt of any partition is running.
func (o *Owner) attempting() bool {
	return slices.ContainsFunc(o.parts, (*partition).running)
}

// others returns the members in the ring's table other than this node and
// those in refused, forgetting the refusals of names no longer in the
// table (one that left and came back under its name takes handoffs again).
func (o *Owner) others(refused map[string]bool) []ring.Member {
	members := o.ring.Table().Members
	for name := range refused {
		if !slices.ContainsFunc(members, func(m ring.Member) bool { return m.Name == name }) {
			delete(refused, name)
		}
	}
	var rest []ring.Member
	for _, m := range members {
		if m.Name != o.cfg.Self && !refused[m.Name] {
			rest = append(rest, m)
		}
	}
	return rest
}

// named returns the partitions whose newest known claim names this node
// as owner, and how many name it as owner or replica.
func (o *Owner) named() (owned []int, held int) {
	for p, c := range o.claims.Snapshot() {
		switch {
		case c.Owner == o.cfg.Self:
			owned = append(owned, p)
			held++
		case slices.Contains(c.Replicas, o.cfg.Self):
			held++
		}
	}
	return owned, held
}
