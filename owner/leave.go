package owner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/singlewriter/singlewriter/ring"
)

// Leave hands every partition this node owns to the node that will own it
// once this one is gone, and returns when none is left or ctx ends. The
// node acquires nothing afterwards. It does not leave the ring: the caller
// does that after Leave returns. Each round places the partitions over
// the members then in the table, less this node and those that refused a
// handoff because they are leaving too (ErrLeaving), so that nodes
// leaving at once, or a successor that crashed, do not hold it up.
func (o *Owner) Leave(ctx context.Context) error {
	o.leaving.Store(true)
	leaving := map[string]bool{o.cfg.Self: true}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		changed := o.claims.Changed()
		owned := o.owned()
		if len(owned) == 0 {
			return nil
		}
		var rest []ring.Member
		for _, m := range o.ring.Table().Members {
			if !leaving[m.Name] {
				rest = append(rest, m)
			}
		}
		if len(rest) == 0 {
			return nil // the last nodes keep their data for their next start
		}
		next := ring.Place(rest, o.cfg.Partitions, o.cfg.ReplicationFactor)
		for _, p := range owned {
			to := next.Owners[p]
			hctx, cancel := context.WithTimeout(ctx, o.cfg.RequestTimeout)
			err := o.cfg.Transport.Handoff(hctx, to, Handoff{P: p, Replicas: next.Replicas[p]})
			cancel()
			if errors.Is(err, ErrLeaving) {
				leaving[to] = true
			}
			if err != nil {
				o.cfg.Logger.Debug("handoff request failed", "partition", p, "to", to, "err", err)
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
