package owner

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
)

// resume serves claim c of partition p again after a restart, if no higher
// epoch was promised meanwhile: the start marker at c's epoch is a fenced
// write, so it fails if anyone prepared a higher ballot. It never resumes a
// claim the store forgot (its data directory was lost): with other
// replicas, they hold p's data and a new claim must sync this node first
// (a marker written meanwhile would make its store look like a replica's
// that remembers); alone, p's only copy is lost, and p is served again
// only if Config.AcceptDataLoss says to serve it empty.
func (o *Owner) resume(p int, c store.Claim) bool {
	m, err := o.store.Meta(p)
	forgot := o.forgot(m, c)
	switch {
	case err != nil:
		return false
	case forgot && len(c.Replicas) > 1:
		o.cfg.Logger.Debug("not resuming a claim this node forgot: a new claim syncs it first", "partition", p, "epoch", c.Epoch)
		return false
	case forgot && !o.cfg.AcceptDataLoss:
		if o.parts[p].reportLost() {
			o.cfg.Logger.Error("not serving a partition whose only copy this node lost: restore its data directory, or restart it with AcceptDataLoss to serve the partition empty",
				"partition", p, "epoch", c.Epoch)
		}
		return false
	}
	if err := o.startServing(p, c); err != nil {
		o.cfg.Logger.Debug("resume failed", "partition", p, "epoch", c.Epoch, "err", err)
		return false
	}
	return true
}

// startServing commits the start marker of claim c (an empty batch at c's
// epoch) on a majority of c's replicas and begins serving. A claim served
// here already is left as it is: an attempt that started from an older
// claim (its claims table was read before this node's newer claim was
// merged) learns that the newer claim is ours and resumes it. A second
// marker would follow the store's position, behind the claim's batches
// still in flight, and take the number of one of them: a backup that
// holds that batch confirms the other one without applying it (only one
// batch is numbered so at an epoch, see HandleReplicate), and the next
// batches are numbered again from the marker. Attempts of a partition run
// one at a time (tryBusy), so nothing starts serving between the check
// and the marker.
func (o *Owner) startServing(p int, c store.Claim) error {
	if served, serving := o.parts[p].servedClaim(); serving && served.Epoch == c.Epoch {
		return nil
	}
	pos, err := o.commitMarker(p, c)
	if err != nil {
		return err
	}
	if !o.parts[p].start(c, pos, func() bool { return o.fenced(p, c) }) {
		return fmt.Errorf("owner: partition %d: a higher epoch than %d is being promised", p, c.Epoch)
	}
	o.claims.Merge(p, c)
	o.cfg.Logger.Info("serving partition", "partition", p, "epoch", c.Epoch, "base", c.Base, "replicas", c.Replicas, "position", pos)
	return nil
}

// fenced reports whether this node promised partition p an epoch above
// claim c's, so that c can no longer be served.
func (o *Owner) fenced(p int, c store.Claim) bool {
	m, err := o.store.Meta(p)
	return err != nil || m.Promised > c.Epoch
}

// acquire runs the acquire protocol for partition p from base, following
// newer claims while this node is still the one that should own p. It
// proposes the replica set want if it starts with this node (a handoff
// names the set the ring will have once the leaving node is gone), else
// the ring's if this node heads it, else this node alone. It reports
// success and the highest epoch seen.
func (o *Owner) acquire(p int, base store.Claim, t *ring.Table, want []string) (bool, epoch.Epoch) {
	seen := o.parts[p].seenEpoch()
	if m, err := o.store.Meta(p); err == nil {
		seen = max(seen, m.Promised)
	}
	replicas := []string{o.cfg.Self}
	switch {
	case len(want) > 0 && want[0] == o.cfg.Self:
		replicas = want
	case p < len(t.Replicas) && len(t.Replicas[p]) > 0 && t.Replicas[p][0] == o.cfg.Self:
		replicas = t.Replicas[p]
	}
	// A resync: this node serves base and acquires it again to catch a
	// replica up (the first Prepare drains it).
	served, serving := o.parts[p].servedClaim()
	resync := serving && served.Epoch == base.Epoch
	for o.ctx.Err() == nil {
		source := o.preCopy(p, base, replicas, resync)
		prop := NewProposer(p, o.cfg.Self, base, seen, replicas)
		prop.PreferSource(source)
		out := o.drive(prop, resync)
		seen = max(seen, prop.Ballot(), out.Rejected)
		switch {
		case out.Chosen != nil:
			return o.announce(p, base, *out.Chosen) == nil && out.Chosen.Owner == o.cfg.Self, seen
		case out.Newer != nil:
			newer := *out.Newer
			if !out.NewerFinal && o.drive(NewAnnouncer(p, newer), false).Chosen == nil {
				return false, seen
			}
			if err := o.learn(o.ctx, p, newer); err != nil {
				return false, seen
			}
			if newer.Owner == o.cfg.Self {
				return o.resume(p, newer), seen
			}
			base, resync = newer, false
		default:
			o.cfg.Logger.Debug("acquire attempt failed", "partition", p, "ballot", prop.Ballot(), "rejected", out.Rejected, "sync_failed", out.Failed)
			return false, seen
		}
	}
	return false, seen
}

// finalize makes claim c of partition p final, c being a chosen claim the
// store held at load without knowing it final (its announcement was lost),
// and acts on it, or on the newer final claim a replica reports instead.
// Without it, a claim whose announcement a restart of every node lost
// would be in no claims table, and its partition never served again.
func (o *Owner) finalize(p int, c store.Claim) bool {
	out := o.drive(NewAnnouncer(p, c), false)
	switch {
	case out.Chosen != nil:
	case out.Newer != nil && out.NewerFinal:
		c = *out.Newer
	default:
		return false
	}
	return o.learn(o.ctx, p, c) == nil
}

// reply is one answer fed back to a Proposer.
type reply struct {
	from    string
	promise *PromiseReply
	accept  *AcceptReply
	synced  *bool
	chosen  *ChooseReply
}

// drive sends the proposer's messages, feeds the answers back and returns
// its outcome. A message that fails counts as no answer; the attempt ends
// when the proposer is done or no answer can arrive any more
// (Proposer.GiveUp). resync says the proposal is a resync of a claim this
// node served (see the wait below).
func (o *Owner) drive(prop *Proposer, resync bool) Outcome {
	replies := make(chan reply)
	// finished lets the answers that come too late go (see below).
	finished := make(chan struct{})
	defer close(finished)
	pending := 0
	syncs := map[string]int{}  // Syncs on their way, by target
	heard := map[string]bool{} // who answered a Prepare, an Accept or a Choose, if only with an error
	send := func(msgs []Message) {
		for _, m := range msgs {
			pending++
			if m.Sync != nil {
				syncs[m.To]++
			}
			o.wg.Add(1)
			go func() {
				defer o.wg.Done()
				r := o.deliver(m)
				select {
				case replies <- r:
				case <-finished:
				}
			}()
		}
	}
	count := func(r reply) {
		pending--
		if r.synced != nil {
			syncs[r.from]--
		} else {
			heard[r.from] = true
		}
	}
	feed := func(r reply) {
		count(r)
		switch {
		case r.promise != nil:
			send(prop.OnPromise(r.from, *r.promise))
		case r.synced != nil:
			send(prop.OnSynced(r.from, *r.synced))
		case r.accept != nil:
			send(prop.OnAccepted(r.from, *r.accept))
		case r.chosen != nil:
			prop.OnChosen(r.from, *r.chosen)
		}
	}
	msgs := prop.Start()
	// The base's owner drains before it promises (HandlePrepare), so that
	// its calls in flight commit first. Its backups promise at once, and
	// two of them are a majority that would choose the next claim
	// meanwhile and fence those calls. So while the owner is a member, it
	// is asked first, and the others once it answered or its drain's time
	// (and a quarter more, for its promise) is up. An owner that left is
	// not waited for.
	if i := o.ownerFirst(prop.base, msgs); i >= 0 {
		send(msgs[i : i+1])
		msgs = slices.Delete(msgs, i, i+1)
		t := time.NewTimer(o.cfg.DrainTimeout * 5 / 4)
		defer t.Stop()
		select {
		case r := <-replies:
			feed(r)
		case <-t.C:
		case <-o.ctx.Done():
			return Outcome{Failed: true}
		}
	}
	if prop.Phase() != Done {
		send(msgs)
	}
	for prop.Phase() != Done && pending > 0 {
		select {
		case r := <-replies:
			feed(r)
		case <-o.ctx.Done():
			return Outcome{Failed: true}
		}
	}
	// Wait for the Syncs still on their way, to replicas outside the
	// majority: once the claim is announced, a replica refuses its Sync (it
	// knows a final claim newer than the proposal's base), and its copy's
	// source moves on with the owner's first write, so it lags until a
	// resync. An owner taking a partition over waits at most half a
	// RequestTimeout: nobody serves the partition meanwhile. A resync (the
	// partition was served, and is drained for the attempt) waits for
	// every copy that makes progress (each answer within RequestTimeout):
	// one cut short would fail the same way at every resync, and the
	// replica would never catch up. It gives its attempt slot back first,
	// so that takeovers do not wait behind resyncs waiting for copies.
	// Neither waits for the other answers. A resync waits at most
	// DrainTimeout for a Sync to a replica of the base from which no other
	// answer came back yet, not even an error: one that is paused, down or
	// cut off would hold the partition unserved for a RequestTimeout, and
	// its copy would make no progress either, where one that is only slow
	// (a slow disk delays all its answers) is heard from meanwhile.
	copying := func(silentToo bool) bool {
		for to, n := range syncs {
			if n > 0 && (silentToo || heard[to] || !slices.Contains(prop.base.Replicas, to)) {
				return true
			}
		}
		return false
	}
	var bound, patience <-chan time.Time
	if !resync {
		t := time.NewTimer(o.cfg.RequestTimeout / 2)
		defer t.Stop()
		bound = t.C
	} else if copying(true) {
		o.parts[prop.p].yieldSlot()
		t := time.NewTimer(o.cfg.DrainTimeout)
		defer t.Stop()
		patience = t.C
	}
	silentToo := true
drain:
	for copying(silentToo) {
		select {
		case r := <-replies:
			count(r)
		case <-patience:
			silentToo = false
		case <-bound:
			break drain
		case <-o.ctx.Done():
			return Outcome{Failed: true}
		}
	}
	prop.GiveUp()
	return prop.Outcome()
}

// ownerFirst returns the index in msgs of the Prepare to base's owner if
// it is to go before the others (see drive): there are others, and the
// owner is this node or a member of the ring's table (leaving or not).
// Otherwise -1.
func (o *Owner) ownerFirst(base store.Claim, msgs []Message) int {
	if len(msgs) < 2 {
		return -1
	}
	if base.Owner != o.cfg.Self && o.ring != nil {
		if _, member := o.ring.Table().Member(base.Owner); !member { // a leaving owner drains too
			return -1
		}
	}
	return slices.IndexFunc(msgs, func(m Message) bool { return m.Prepare != nil && m.To == base.Owner })
}

// deliver sends one message, to this node directly or through the
// transport, and turns the answer into a reply (an empty one on error).
func (o *Owner) deliver(m Message) reply {
	ctx, cancel := context.WithTimeout(o.ctx, o.cfg.RequestTimeout)
	defer cancel()
	local := m.To == o.cfg.Self
	r := reply{from: m.To}
	switch {
	case m.Prepare != nil:
		var pr PromiseReply
		var err error
		if local {
			pr, err = o.HandlePrepare(ctx, *m.Prepare)
		} else {
			pr, err = o.cfg.Transport.Prepare(ctx, m.To, *m.Prepare)
		}
		if err != nil {
			o.cfg.Logger.Debug("prepare failed", "to", m.To, "partition", m.Prepare.P, "err", err)
			return reply{from: m.To}
		}
		r.promise = &pr
	case m.Accept != nil:
		var ar AcceptReply
		var err error
		if local {
			ar, err = o.HandleAccept(ctx, *m.Accept)
		} else {
			ar, err = o.cfg.Transport.Accept(ctx, m.To, *m.Accept)
		}
		if err != nil {
			o.cfg.Logger.Debug("accept failed", "to", m.To, "partition", m.Accept.P, "err", err)
			return reply{from: m.To}
		}
		r.accept = &ar
	case m.Sync != nil:
		err := o.syncReplica(m.To, *m.Sync)
		if err != nil {
			o.cfg.Logger.Debug("sync failed", "to", m.To, "partition", m.Sync.P, "err", err)
		}
		ok := err == nil
		r.synced = &ok
	case m.Choose != nil:
		cr, err := o.choose(ctx, m.To, *m.Choose)
		if err != nil {
			o.cfg.Logger.Debug("choose failed", "to", m.To, "partition", m.Choose.P, "err", err)
			return reply{from: m.To}
		}
		r.chosen = &cr
	}
	return r
}

// announce acts on claim c of partition p, chosen and made final by this
// node: it records it as final here, tells c's owner and replicas and the
// base's replicas that it is (in the background: a paused one must not
// hold the partition unserved for a RequestTimeout, and gossip carries the
// claim too), gossips it, and serves it if it is ours.
func (o *Owner) announce(p int, base, c store.Claim) error {
	final := Choose{P: p, Claim: c, Final: true}
	if _, err := o.HandleChoose(o.ctx, final); err != nil {
		o.cfg.Logger.Debug("recording a final claim failed", "partition", p, "err", err)
	}
	told := append(slices.Clone(base.Replicas), c.Replicas...)
	for _, r := range slices.Compact(slices.Sorted(slices.Values(told))) {
		if r == o.cfg.Self {
			continue
		}
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			if _, err := o.choose(o.ctx, r, final); err != nil {
				o.cfg.Logger.Debug("telling a final claim failed; gossip carries it too", "to", r, "partition", p, "err", err)
			}
		}()
	}
	if o.ring != nil {
		o.ring.Broadcast(o.claims.Encode(p))
	}
	if c.Owner != o.cfg.Self {
		return nil
	}
	return o.startServing(p, c)
}

// choose sends req to node to, or handles it here.
func (o *Owner) choose(ctx context.Context, to string, req Choose) (ChooseReply, error) {
	if to == o.cfg.Self {
		return o.HandleChoose(ctx, req)
	}
	ctx, cancel := context.WithTimeout(ctx, o.cfg.RequestTimeout)
	defer cancel()
	return o.cfg.Transport.Choose(ctx, to, req)
}
