package owner_test

import (
	"slices"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/owner"
	"github.com/singlewriter/singlewriter/store"
)

// handle delivers one message to the node, then runs the reconcile loop
// for the partitions whose claims changed (the runtime's Kick).
func (n *simNode) handle(from string, payload any) {
	switch m := payload.(type) {
	case mPrepare:
		n.onPrepare(from, m)
	case mAccept:
		n.onAccept(from, m)
	case mSync:
		n.onSync(from, m)
	case mFetch:
		n.onFetch(from, m)
	case mFetched:
		n.onFetched(m)
	case mChoose:
		n.onChoose(from, m)
	case mWrite:
		ok, fenced := n.applyWrite(m.P, m.Entry)
		n.send(from, mWriteAck{P: m.P, ID: m.Entry.ID, OK: ok, Fenced: fenced})
	case mWriteAck:
		n.onWriteAck(from, m)
	case mGossip:
		for _, g := range m.Claims {
			if n.mergeClaim(g.P, g.Claim, "gossip from "+from) {
				n.kick(g.P)
			}
		}
	default:
		n.onReply(from, payload)
	}
	n.reconcileKicked()
}

// reconcileKicked runs the reconcile loop (Resume and Release only: a
// desired acquire is the scheduler's choice) for the kicked partitions.
func (n *simNode) reconcileKicked() {
	for len(n.kicked) > 0 {
		p := n.kicked[0]
		n.kicked = n.kicked[1:]
		n.plan(p, false, nil)
	}
}

// learn mirrors Owner.learn: record the final claim c, put it in the
// claims table, stop serving an older claim, and drop the data if this
// node is not among c's replicas and promised nothing above c's epoch
// (keeping the protocol state).
func (n *simNode) learn(p int, c store.Claim) {
	if c.Owner == "" {
		return
	}
	prev, err := n.acc.Choose(ctx, p, c, true)
	if err != nil {
		panic(err)
	}
	if n.mergeClaim(p, c, "learn") {
		n.kick(p)
	}
	if prev.HasChosen && prev.Chosen.Epoch > c.Epoch {
		return
	}
	pt := n.parts[p]
	if (pt.serving || pt.starting != nil) && pt.claim.Epoch < c.Epoch {
		n.stopServing(p, "newer claim "+fmtClaim(c))
	}
	if !slices.Contains(c.Replicas, n.name) && prev.Position != (store.Position{}) && n.meta(p).Promised <= c.Epoch {
		// store.Drop(p, c.Epoch)
		n.s.logf("%s drops p%d: not a replica of %s", n.name, p, fmtClaim(c))
		n.meta(p).Position = store.Position{}
		n.logs[p] = nil
		n.s.logVersion++
	}
}

// refusal mirrors Owner.refusal: refused reports that the node takes no
// part in choosing base's successor (checkMemory); it then answers with
// its state (meta) if it knows a newer final claim, and otherwise not at
// all (the owner's handler fails).
func (n *simNode) refusal(p int, base store.Claim, kind string) (meta *store.Meta, refused bool) {
	if n.checkMemory(p, base) {
		return nil, false
	}
	n.s.logf("%s refuses %s for p%d: forgot %s", n.name, kind, p, fmtClaim(base))
	if m := n.meta(p); m.HasChosen && m.Final && m.Chosen.Epoch > base.Epoch {
		c := cloneMeta(*m)
		return &c, true
	}
	return nil, true
}

// onPrepare mirrors Owner.HandlePrepare: learn the base, drain if the
// replica will promise, then owner.HandlePrepare answers.
func (n *simNode) onPrepare(from string, m mPrepare) {
	req := m.Req
	if meta, refused := n.refusal(req.P, req.Base, "prepare"); refused {
		if meta != nil {
			n.send(from, mPromise{Att: m.Att, Reply: owner.PromiseReply{Meta: *meta}})
		}
		return
	}
	n.s.chk.acting(n.name, req.P, req.Base, "prepare base from "+from)
	n.learn(req.P, req.Base)
	meta := n.meta(req.P)
	newer := meta.HasChosen && meta.Chosen.Epoch > req.Base.Epoch
	if !newer && epoch.CheckPromise(meta.Promised, req.Ballot) == nil {
		n.stopServing(req.P, "drained for a prepare")
	}
	r, err := owner.HandlePrepare(ctx, n.acc, req)
	if err != nil {
		panic(err)
	}
	n.send(from, mPromise{Att: m.Att, Reply: r})
}

// onAccept mirrors Owner.HandleAccept.
func (n *simNode) onAccept(from string, m mAccept) {
	if meta, refused := n.refusal(m.Req.P, m.Req.Base, "accept"); refused {
		if meta != nil {
			n.send(from, mAccepted{Att: m.Att, Reply: owner.AcceptReply{Meta: *meta}})
		}
		return
	}
	n.s.chk.acting(n.name, m.Req.P, m.Req.Base, "accept base from "+from)
	n.learn(m.Req.P, m.Req.Base)
	r, err := owner.HandleAccept(ctx, n.acc, m.Req)
	if err != nil {
		panic(err)
	}
	n.send(from, mAccepted{Att: m.Att, Reply: r})
}

// onChoose mirrors Owner.HandleChoose: a replica that forgot the claim's
// base records nothing but a final claim, owner.HandleChoose records, and
// a final claim is acted on (learn).
func (n *simNode) onChoose(from string, m mChoose) {
	if !m.Req.Final {
		base := store.Claim{Epoch: m.Req.Claim.Base, Replicas: m.Req.Claim.BaseReplicas}
		if meta, refused := n.refusal(m.Req.P, base, "choose"); refused {
			if meta != nil && m.Att != 0 {
				n.send(from, mChosen{Att: m.Att, Reply: owner.ChooseReply{Meta: *meta}})
			}
			return
		}
	}
	r, err := owner.HandleChoose(ctx, n.acc, m.Req)
	if err != nil {
		panic(err)
	}
	if m.Req.Final {
		n.learn(m.Req.P, m.Req.Claim)
	}
	if m.Att != 0 {
		n.send(from, mChosen{Att: m.Att, Reply: r})
	}
}

// onReply feeds an answer to the proposer that asked, if it still runs.
func (n *simNode) onReply(from string, payload any) {
	var att uint64
	switch m := payload.(type) {
	case mPromise:
		att = m.Att
	case mAccepted:
		att = m.Att
	case mSynced:
		att = m.Att
	case mChosen:
		att = m.Att
	default:
		panic("unknown message")
	}
	p, at := n.attemptOf(att)
	if at == nil {
		return
	}
	switch m := payload.(type) {
	case mPromise:
		n.sendAll(att, at.prop.OnPromise(from, m.Reply))
	case mAccepted:
		n.sendAll(att, at.prop.OnAccepted(from, m.Reply))
	case mSynced:
		n.sendAll(att, at.prop.OnSynced(from, m.OK))
	case mChosen:
		at.prop.OnChosen(from, m.Reply)
	}
	n.afterProposer(p)
}

// onSync mirrors Owner.HandleSync: a Sync whose base is older than a final
// claim in the claims table is refused; a blank replica is readmitted
// (Meta.Amnesia), then the base claim is learned; a copy already at the
// position is kept
// (the promise raised to the ballot);
// a replica that knows a claim newer than the base (a successor of the base
// only if final), or holds data written after it, refuses, and so does the
// source itself; otherwise the whole
// copy is fetched, then installed in one fenced step (onFetched).
func (n *simNode) onSync(from string, m mSync) {
	req := m.Req
	if c, ok := n.claims.Get(req.P); ok && c.Epoch > req.Base.Epoch { // a newer final claim is known
		n.send(from, mSynced{Att: m.Att})
		return
	}
	meta := n.meta(req.P)
	if n.blank(req.P) { // store.Readmit
		meta.Amnesia = max(meta.Amnesia, req.Base.Epoch+1)
	}
	n.learn(req.P, req.Base)
	switch {
	case meta.Position == req.Pos:
		if meta.Promised < req.Ballot {
			if _, err := n.acc.Promise(ctx, req.P, req.Ballot); err != nil {
				panic(err)
			}
		}
		n.send(from, mSynced{Att: m.Att, OK: true})
		return
	case meta.HasChosen && meta.Chosen.Epoch > req.Base.Epoch && (meta.Final || meta.Chosen.Base != req.Base.Epoch),
		meta.Position.Epoch > req.Base.Epoch,
		req.Source == n.name:
		n.send(from, mSynced{Att: m.Att})
		return
	}
	n.s.syncs++
	n.syncs[n.s.syncs] = &syncState{att: m.Att, proposer: from, req: req}
	n.send(req.Source, mFetch{Sync: n.s.syncs, P: req.P, Ballot: req.Ballot, Pos: req.Pos})
}

// onFetch mirrors Owner.HandleFetch: refused once a higher ballot was
// promised here, or when the data is not at the expected position.
func (n *simNode) onFetch(from string, m mFetch) {
	r := mFetched{Sync: m.Sync}
	meta := n.meta(m.P)
	if epoch.CheckWrite(meta.Promised, m.Ballot) == nil && meta.Position == m.Pos {
		r.OK, r.Log = true, slices.Clone(n.logs[m.P])
	}
	n.send(from, r)
}

// onFetched completes a sync with store.Copy.Install: fenced at the ballot
// (raising the promise) and refused if data was written at the ballot's
// epoch or later, it replaces the data and sets the position.
func (n *simNode) onFetched(m mFetched) {
	st := n.syncs[m.Sync]
	if st == nil {
		return
	}
	delete(n.syncs, m.Sync)
	p := st.req.P
	meta := n.meta(p)
	newerData := meta.Position != (store.Position{}) && meta.Position.Epoch >= st.req.Ballot
	if !m.OK || epoch.CheckWrite(meta.Promised, st.req.Ballot) != nil || newerData {
		n.send(st.proposer, mSynced{Att: st.att})
		return
	}
	n.s.chk.applied(n.name, p, "sync install", st.req.Ballot, meta.Promised)
	n.logs[p] = slices.Clone(m.Log)
	meta.Promised = max(meta.Promised, st.req.Ballot)
	meta.Position = st.req.Pos
	n.s.logVersion++
	n.s.logf("%s installed p%d at %d/%d: %s", n.name, p, st.req.Pos.Epoch, st.req.Pos.LSN, fmtLog(n.logs[p]))
	n.send(st.proposer, mSynced{Att: st.att, OK: true})
}

// onWriteAck counts a replica's answer to a write; a fenced answer means
// the owner lost the partition (or must re-acquire it).
func (n *simNode) onWriteAck(from string, m mWriteAck) {
	pt := n.parts[m.P]
	i := slices.IndexFunc(pt.pending, func(w *pendingWrite) bool { return w.entry.ID == m.ID })
	if i < 0 {
		return
	}
	w := pt.pending[i]
	if !m.OK {
		if m.Fenced && pt.claim.Epoch == w.claim.Epoch {
			n.stopServing(m.P, "write fenced by "+from)
		}
		return
	}
	w.acks[from] = true
	n.checkMajority(m.P, w)
	if len(w.acks) == len(w.claim.Replicas) {
		pt.pending = slices.Delete(pt.pending, i, i+1)
	}
}
