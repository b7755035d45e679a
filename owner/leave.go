package owner

import (
	"context"
	"fmt"
	"time"

	"github.com/singlewriter/singlewriter/ring"
)

// Leave hands every partition this node owns to the node that will own it
// once this one is gone, and returns when none is left or ctx ends. The
// node acquires nothing afterwards. It does not leave the ring: the caller
// does that after Leave returns.
func (o *Owner) Leave(ctx context.Context) error {
	o.leaving.Store(true)
	t := o.ring.Table()
	rest := make([]ring.Member, 0, len(t.Members))
	for _, m := range t.Members {
		if m.Name != o.cfg.Self {
			rest = append(rest, m)
		}
	}
	if len(rest) == 0 {
		return nil // the last node keeps its data for its next start
	}
	next := ring.Place(rest, o.cfg.Partitions, o.cfg.ReplicationFactor)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		changed := o.claims.Changed()
		owned := o.owned()
		if len(owned) == 0 {
			return nil
		}
		for _, p := range owned {
			hctx, cancel := context.WithTimeout(ctx, o.cfg.RequestTimeout)
			if err := o.cfg.Transport.Handoff(hctx, next.Owners[p], Handoff{P: p, Replicas: next.Replicas[p]}); err != nil {
				o.cfg.Logger.Debug("handoff request failed", "partition", p, "to", next.Owners[p], "err", err)
			}
			cancel()
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
