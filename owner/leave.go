package owner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/singlewriter/singlewriter/ring"
)

// Leave hands every partition this node owns to the node that will own it
// once this one is gone, and returns when none is left or ctx ends. The
// node acquires nothing afterwards. It does not leave the ring: the caller
// does that after Leave returns. Each round places the partitions over
// the members then in the table, less this node and those that refused a
// handoff because they are leaving too (ErrLeaving), so that nodes
// leaving at once, or a successor that crashed, do not hold it up. An
// acquisition that began before Leave runs to its end first: a claim it
// makes this node's is handed off too. A node
// alone in its table keeps its data for its next start and returns nil;
// one whose other members all left or refused returns an error: its
// partitions stay in its data directory.
func (o *Owner) Leave(ctx context.Context) error {
	if o.ctx.Err() != nil {
		return ErrClosed
	}
	o.leaving.Store(true)
	if len(o.others(nil)) == 0 {
		return nil // the last node keeps its data for its next start
	}
	refused := map[string]bool{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		changed := o.claims.Changed()
		owned := o.owned()
		if len(owned) == 0 && !o.attempting() {
			return nil
		}
		if len(owned) > 0 {
			if err := o.handOff(ctx, owned, refused); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("owner: leave: %d partitions still owned: %w", len(owned), ctx.Err())
		case <-o.ctx.Done():
			return ErrClosed
		case <-changed:
		case <-tick.C:
		}
	}
}

// handOff asks the node that will own each of the owned partitions once
// this one is gone to acquire it, placing them over the members less this
// node and those in refused (which it adds to when a member answers
// ErrLeaving). It fails when no such member is left.
func (o *Owner) handOff(ctx context.Context, owned []int, refused map[string]bool) error {
	rest := o.others(refused)
	if len(rest) == 0 {
		return fmt.Errorf("owner: leave: %d partitions still owned, kept in the data directory: every other member left or is leaving", len(owned))
	}
	next := ring.Place(rest, o.cfg.Partitions, o.cfg.ReplicationFactor)
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
	return nil
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

// owned lists the partitions whose newest known claim names this node.
func (o *Owner) owned() []int {
	var ps []int
	for p, c := range o.claims.Snapshot() {
		if c.Owner == o.cfg.Self {
			ps = append(ps, p)
		}
	}
	return ps
}
