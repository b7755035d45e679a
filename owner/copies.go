package owner

import (
	"context"
	"time"

	"github.com/singlewriter/singlewriter/ring"
)

// askForCopies asks, for every partition whose claim names this node as a
// backup but of which it holds nothing (forgot: its data directory was
// lost, or the claim's copy never arrived), the claim's owner to acquire
// the partition again (a Handoff to the owner itself): the new claim's
// Sync gives this node a copy. The owner learns of a backup without a
// copy only when a write to it fails, so a partition without traffic would
// otherwise stay one copy short until its replica set changes, and a
// second lost disk could lose it. It asks only where the ring agrees with
// the claim (otherwise the next acquisition syncs the replicas anyway),
// and at most once per resyncInterval per partition, never while a copy
// of it is being fetched here (the owner's new claim would make that
// copy's fetches fail, and a copy slower than the interval would never
// complete). It runs on the reconcile loop's goroutine, the only one that
// touches copyAsked.
func (o *Owner) askForCopies(t *ring.Table, now time.Time) {
	if !o.synced.Load() {
		return
	}
	for p, c := range o.claims.Snapshot() {
		if c.Owner == "" || c.Owner == o.cfg.Self || p >= len(t.Owners) || c.Owner != t.Owners[p] ||
			!sameMembers(c.Replicas, t.Replicas[p]) || now.Before(o.copyAsked[p].Add(resyncInterval)) {
			continue
		}
		if m, err := o.store.Meta(p); err != nil || !o.forgot(m, c) || o.parts[p].copying() {
			continue
		}
		o.copyAsked[p] = now
		req := Handoff{P: p, Replicas: t.Replicas[p]}
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			ctx, cancel := context.WithTimeout(o.ctx, o.cfg.RequestTimeout)
			defer cancel()
			if err := o.cfg.Transport.Handoff(ctx, c.Owner, req); err != nil {
				o.cfg.Logger.Debug("asking for a copy failed", "partition", p, "owner", c.Owner, "err", err)
			} else {
				o.cfg.Logger.Info("asked for a copy", "partition", p, "owner", c.Owner, "epoch", c.Epoch)
			}
		}()
	}
}
