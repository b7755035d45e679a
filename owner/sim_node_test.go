package owner_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/owner"
	"github.com/singlewriter/singlewriter/store"
)

// This file is one simulated node: its durable state (memAcceptor and the
// data logs), its volatile state (attempts, calls, serving, claims table,
// syncs) and the runtime's loops (Owner.acquire, finalize, announce,
// startServing, reconcile and Plan) over simulated messages. Protocol decisions are the library's own:
// owner.Proposer, owner.NewAnnouncer, owner.HandlePrepare, HandleAccept,
// HandleChoose and owner.Claims. The handlers in sim_handlers_test.go
// mirror the runtime's wrappers around them (Owner.HandlePrepare,
// HandleSync, HandleFetch, HandleChoose, learn).

var ctx = context.Background()

// memAcceptor is owner.Acceptor in memory with exactly the semantics of
// *store.Store (store/claims.go): Promise is never fenced off, Accept is
// fenced, Choose records a newer claim (or marks the known one final) and
// returns the Meta as it was before. It survives a node's crash.
type memAcceptor struct {
	node  *simNode
	metas []store.Meta
}

func cloneClaim(c store.Claim) store.Claim {
	c.Replicas = slices.Clone(c.Replicas)
	c.BaseReplicas = slices.Clone(c.BaseReplicas)
	return c
}

func cloneMeta(m store.Meta) store.Meta {
	m.Chosen = cloneClaim(m.Chosen)
	m.Accepted = cloneClaim(m.Accepted)
	return m
}

func (a *memAcceptor) Promise(_ context.Context, p int, e epoch.Epoch) (store.Meta, error) {
	m := &a.metas[p]
	if err := epoch.CheckPromise(m.Promised, e); err != nil {
		return cloneMeta(*m), err
	}
	m.Promised = e
	return cloneMeta(*m), nil
}

func (a *memAcceptor) Accept(_ context.Context, p int, c store.Claim) error {
	m := &a.metas[p]
	if err := epoch.CheckWrite(m.Promised, c.Epoch); err != nil {
		return err
	}
	a.node.s.chk.accepted(a.node.name, p, c, m.Promised)
	m.Promised = max(m.Promised, c.Epoch)
	m.Accepted = cloneClaim(c)
	return nil
}

func (a *memAcceptor) Choose(_ context.Context, p int, c store.Claim, final bool) (store.Meta, error) {
	m := &a.metas[p]
	prev := cloneMeta(*m)
	chk := a.node.s.chk
	chk.recorded(a.node.name, p, c, prev)
	switch {
	case m.HasChosen && c.Epoch < m.Chosen.Epoch:
		return prev, nil
	case m.HasChosen && c.Epoch == m.Chosen.Epoch:
		if !final || m.Final {
			return prev, nil
		}
		m.Final = true
		chk.markedFinal(a.node.name, p, m.Chosen)
		return prev, nil
	case !final && !m.RecordCounts(c):
		return prev, nil
	}
	m.Chosen = cloneClaim(c)
	m.HasChosen = true
	m.Final = final
	if m.Accepted.Owner != "" && m.Accepted.Epoch <= c.Epoch {
		m.Accepted = store.Claim{}
	}
	if final {
		chk.markedFinal(a.node.name, p, m.Chosen)
	}
	return prev, nil
}

func (a *memAcceptor) Meta(p int) (store.Meta, error) { return cloneMeta(a.metas[p]), nil }

var _ owner.Acceptor = (*memAcceptor)(nil)

// logEntry is one applied data batch: a client write or a start marker.
// Prev is the position it follows on the owner's copy.
type logEntry struct {
	ID     string
	Epoch  epoch.Epoch
	LSN    uint64
	Prev   store.Position
	Marker bool
}

// The messages of the simulation. Att ties an answer to the proposer
// (or announcer) that asked; Sync ties a fetch to the HandleSync that
// asked.
type (
	mPrepare struct {
		Att uint64
		Req owner.Prepare
	}
	mPromise struct {
		Att   uint64
		Reply owner.PromiseReply
	}
	mAccept struct {
		Att uint64
		Req owner.Accept
	}
	mAccepted struct {
		Att   uint64
		Reply owner.AcceptReply
	}
	mSync struct {
		Att uint64
		Req owner.Sync
	}
	mSynced struct {
		Att uint64
		OK  bool
	}
	// mChoose with Att 0 is a final announcement nobody waits for.
	mChoose struct {
		Att uint64
		Req owner.Choose
	}
	mChosen struct {
		Att   uint64
		Reply owner.ChooseReply
	}
	mFetch struct {
		Sync   uint64
		P      int
		Ballot epoch.Epoch
		Pos    store.Position
	}
	mFetched struct {
		Sync uint64
		OK   bool
		Log  []logEntry
	}
	mWrite struct {
		P     int
		Entry logEntry
	}
	mWriteAck struct {
		P      int
		ID     string
		OK     bool
		Fenced bool
	}
	// mGossip carries claims-table entries (the ring's broadcast and
	// push/pull of owner.Claims).
	mGossip struct {
		Claims []gossipClaim
	}
)

type gossipClaim struct {
	P     int
	Claim store.Claim
}

func fmtClaim(c store.Claim) string {
	return fmt.Sprintf("{e%d<-e%d %s %v}", c.Epoch, c.Base, c.Owner, c.Replicas)
}

func fmtMeta(m store.Meta) string {
	s := fmt.Sprintf("promised=%d pos=%d/%d", m.Promised, m.Position.Epoch, m.Position.LSN)
	if m.HasChosen {
		s += " chosen=" + fmtClaim(m.Chosen)
		if m.Final {
			s += "F"
		}
	}
	if m.Accepted.Owner != "" {
		s += " accepted=" + fmtClaim(m.Accepted)
	}
	return s
}

func (m mPrepare) String() string {
	return fmt.Sprintf("Prepare[a%d p%d ballot=%d base=%s]", m.Att, m.Req.P, m.Req.Ballot, fmtClaim(m.Req.Base))
}
func (m mPromise) String() string {
	return fmt.Sprintf("Promise[a%d ok=%v %s]", m.Att, m.Reply.OK, fmtMeta(m.Reply.Meta))
}
func (m mAccept) String() string {
	return fmt.Sprintf("Accept[a%d p%d %s]", m.Att, m.Req.P, fmtClaim(m.Req.Value))
}
func (m mAccepted) String() string {
	return fmt.Sprintf("Accepted[a%d ok=%v %s]", m.Att, m.Reply.OK, fmtMeta(m.Reply.Meta))
}
func (m mSync) String() string {
	return fmt.Sprintf("Sync[a%d p%d ballot=%d base=%s from %s to %d/%d]", m.Att, m.Req.P, m.Req.Ballot, fmtClaim(m.Req.Base), m.Req.Source, m.Req.Pos.Epoch, m.Req.Pos.LSN)
}
func (m mSynced) String() string { return fmt.Sprintf("Synced[a%d ok=%v]", m.Att, m.OK) }
func (m mChoose) String() string {
	return fmt.Sprintf("Choose[a%d p%d %s final=%v]", m.Att, m.Req.P, fmtClaim(m.Req.Claim), m.Req.Final)
}
func (m mChosen) String() string {
	return fmt.Sprintf("Chosen[a%d recorded=%v %s]", m.Att, m.Reply.Recorded, fmtMeta(m.Reply.Meta))
}
func (m mFetch) String() string {
	return fmt.Sprintf("Fetch[s%d p%d ballot=%d pos=%d/%d]", m.Sync, m.P, m.Ballot, m.Pos.Epoch, m.Pos.LSN)
}
func (m mFetched) String() string {
	return fmt.Sprintf("Fetched[s%d ok=%v %s]", m.Sync, m.OK, fmtLog(m.Log))
}
func (m mWrite) String() string {
	return fmt.Sprintf("Write[p%d %s e%d lsn%d]", m.P, m.Entry.ID, m.Entry.Epoch, m.Entry.LSN)
}
func (m mWriteAck) String() string {
	return fmt.Sprintf("WriteAck[p%d %s ok=%v fenced=%v]", m.P, m.ID, m.OK, m.Fenced)
}
func (m mGossip) String() string {
	s := "Gossip["
	for i, g := range m.Claims {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("p%d%s", g.P, fmtClaim(g.Claim))
	}
	return s + "]"
}

func fmtLog(l []logEntry) string {
	ids := make([]string, len(l))
	for i, e := range l {
		ids[i] = e.ID
	}
	return fmt.Sprint(ids)
}

// simNode is one node. acc and logs are durable; the rest is lost in a
// crash.
type simNode struct {
	s    *sim
	name string
	up   bool

	acc  *memAcceptor
	logs [][]logEntry

	claims *owner.Claims
	parts  []*nodePart
	// unfinal holds the chosen claims the store held at load without
	// knowing them final (Owner.unfinal).
	unfinal map[int]store.Claim
	// calls are the admitted calls not yet committed.
	calls []*call
	// syncs are the HandleSyncs waiting for their fetch, by ID.
	syncs map[uint64]*syncState
	// kicked are the partitions whose claims changed during the message
	// being handled: the reconcile loop looks at them afterwards.
	kicked []int
}

// nodePart is a node's volatile state for one partition (owner's
// partition struct plus the running acquire loop).
type nodePart struct {
	// at is the running acquire (the partition is busy), nil if none.
	at *attempt
	// seen is the highest epoch that refused this node (partition.seen).
	seen epoch.Epoch

	// serving is true once the start marker of claim is on a majority of
	// claim.Replicas; starting is set while that marker is in flight (the
	// partition is busy).
	serving  bool
	claim    store.Claim
	starting *pendingWrite
	// pending are the owner's writes waiting for acks.
	pending []*pendingWrite
}

// attempt is one run of Owner.acquire: a chain of proposers, following
// newer claims, and announcers that make a newer claim final.
type attempt struct {
	id       uint64
	prop     *owner.Proposer
	base     store.Claim
	replicas []string
	// seen is acquire's local seen.
	seen epoch.Epoch
	// newer is set while prop is an announcer making *newer final.
	newer *store.Claim
	// finalize: the attempt is Owner.finalize, not Owner.acquire.
	finalize bool
}

// call is a client's call holding a lease on partition p under claim.
type call struct {
	p     int
	id    string
	claim store.Claim
}

type pendingWrite struct {
	entry    logEntry
	claim    store.Claim
	acks     map[string]bool
	majority bool
}

type syncState struct {
	att      uint64
	proposer string
	req      owner.Sync
}

func newSimNode(s *sim, name string) *simNode {
	n := &simNode{s: s, name: name, up: true, logs: make([][]logEntry, s.cfg.partitions)}
	n.acc = &memAcceptor{node: n, metas: make([]store.Meta, s.cfg.partitions)}
	n.resetVolatile()
	return n
}

// resetVolatile is what a restart starts from: the final claims the store
// knows (as owner.New loads them) and nothing running.
func (n *simNode) resetVolatile() {
	n.claims = owner.NewClaims(n.s.cfg.partitions)
	n.parts = make([]*nodePart, n.s.cfg.partitions)
	n.syncs = map[uint64]*syncState{}
	n.calls = nil
	n.unfinal = map[int]store.Claim{}
	n.kicked = nil
	for p := range n.parts {
		n.parts[p] = &nodePart{}
		switch m := n.acc.metas[p]; {
		case m.HasChosen && m.Final:
			n.mergeClaim(p, m.Chosen, "load")
		case m.HasChosen:
			n.unfinal[p] = cloneClaim(m.Chosen)
		}
	}
}

func (n *simNode) meta(p int) *store.Meta { return &n.acc.metas[p] }

// wipe loses the node's durable state: its data directory is gone.
func (n *simNode) wipe() {
	n.acc.metas = make([]store.Meta, n.s.cfg.partitions)
	n.logs = make([][]logEntry, n.s.cfg.partitions)
	n.s.logVersion++
}

// blank reports whether the node holds no promise, no accepted proposal
// and no data of p.
func (n *simNode) blank(p int) bool {
	m := n.meta(p)
	return m.Promised == 0 && m.Position == (store.Position{}) && m.Accepted.Owner == ""
}

// forgot mirrors Owner.forgot: the node is one of c's replicas but its
// store is blank for p (for a root claim, also without the claim itself).
func (n *simNode) forgot(p int, c store.Claim) bool {
	if !slices.Contains(c.Replicas, n.name) || !n.blank(p) {
		return false
	}
	return c.Epoch != 0 || !n.meta(p).HasChosen
}

// checkMemory mirrors Owner.checkMemory: the node takes no part in
// choosing base's successor if it forgot base or was given a copy again,
// after losing its data, under base or a newer claim.
func (n *simNode) checkMemory(p int, base store.Claim) bool {
	return !n.forgot(p, base) && base.Epoch >= n.meta(p).Amnesia
}

func (n *simNode) send(to string, payload any) { n.s.send(n.name, to, payload) }

// mergeClaim puts c in the claims table (only final claims may go there)
// and reports whether it was newer.
func (n *simNode) mergeClaim(p int, c store.Claim, how string) bool {
	n.s.chk.acting(n.name, p, c, "claims table ("+how+")")
	return n.claims.Merge(p, cloneClaim(c))
}

// kick asks for a reconcile of p once the current message is handled.
func (n *simNode) kick(p int) {
	if !slices.Contains(n.kicked, p) {
		n.kicked = append(n.kicked, p)
	}
}

func (n *simNode) sendAll(att uint64, msgs []owner.Message) {
	for _, m := range msgs {
		switch {
		case m.Prepare != nil:
			req := *m.Prepare
			req.Base = cloneClaim(req.Base)
			n.send(m.To, mPrepare{Att: att, Req: req})
		case m.Accept != nil:
			req := *m.Accept
			req.Base, req.Value = cloneClaim(req.Base), cloneClaim(req.Value)
			n.send(m.To, mAccept{Att: att, Req: req})
		case m.Sync != nil:
			req := *m.Sync
			req.Base = cloneClaim(req.Base)
			n.send(m.To, mSync{Att: att, Req: req})
		case m.Choose != nil:
			req := *m.Choose
			req.Claim = cloneClaim(req.Claim)
			n.send(m.To, mChoose{Att: att, Req: req})
		}
	}
}

// plan is Owner.reconcile and owner.Plan for one partition: make a claim
// loaded without being known final final, release a served claim older
// than the newest known, resume our newest claim if it names no other
// replica (Plan acquires a replicated one) unless a higher epoch was
// promised here, or acquire if desired. Nothing starts while the partition
// is busy (an attempt runs or a start marker is in flight).
func (n *simNode) plan(p int, desired bool, replicas []string) {
	pt := n.parts[p]
	if pt.at != nil || pt.starting != nil {
		return
	}
	if u, ok := n.unfinal[p]; ok {
		if known, ok := n.claims.Get(p); !ok || known.Epoch < u.Epoch {
			pt.at = &attempt{finalize: true}
			n.announceNewer(p, u)
			return
		}
		delete(n.unfinal, p)
	}
	c, ok := n.claims.Get(p)
	if !ok {
		return
	}
	if pt.serving {
		if pt.claim.Epoch < c.Epoch {
			n.s.logf("%s release p%d e%d for %s", n.name, p, pt.claim.Epoch, fmtClaim(c))
			n.learn(p, c)
		}
		return
	}
	switch {
	case c.Owner == n.name && len(c.Replicas) <= 1 && !n.fenced(p, c) && !n.forgot(p, c):
		n.s.logf("%s resume p%d %s", n.name, p, fmtClaim(c))
		n.startServing(p, c)
	case desired:
		n.acquire(p, c, replicas)
	}
}

// fenced is Owner.fenced: this node promised p an epoch above c's.
func (n *simNode) fenced(p int, c store.Claim) bool { return n.meta(p).Promised > c.Epoch }

// acquire starts Owner.acquire for p from base.
func (n *simNode) acquire(p int, base store.Claim, replicas []string) {
	pt := n.parts[p]
	pt.at = &attempt{replicas: replicas, seen: max(pt.seen, n.meta(p).Promised)}
	n.propose(p, base)
}

// propose starts one proposer of the running acquire from base.
func (n *simNode) propose(p int, base store.Claim) {
	at := n.parts[p].at
	at.base, at.newer = cloneClaim(base), nil
	at.prop = owner.NewProposer(p, n.name, base, at.seen, at.replicas)
	n.s.attempts++
	at.id = n.s.attempts
	n.s.logf("%s acquire p%d a%d ballot=%d base=%s replicas=%v", n.name, p, at.id, at.prop.Ballot(), fmtClaim(base), at.replicas)
	n.sendAll(at.id, at.prop.Start())
}

// announceNewer runs owner.NewAnnouncer to make the chosen claim c final.
func (n *simNode) announceNewer(p int, c store.Claim) {
	at := n.parts[p].at
	c = cloneClaim(c)
	at.newer = &c
	at.prop = owner.NewAnnouncer(p, c)
	n.s.attempts++
	at.id = n.s.attempts
	n.s.logf("%s announcer p%d a%d for %s", n.name, p, at.id, fmtClaim(c))
	n.sendAll(at.id, at.prop.Start())
}

// endAttempt ends the running acquire (partition.done).
func (n *simNode) endAttempt(p int) {
	pt := n.parts[p]
	if pt.at != nil {
		pt.seen = max(pt.seen, pt.at.seen)
		pt.at = nil
	}
}

// abandon ends a running acquire as drive does when no answer can arrive
// any more (every request timed out): the proposer gives up, and its
// outcome is acted on.
func (n *simNode) abandon(p int) {
	at := n.parts[p].at
	if at == nil {
		return
	}
	n.s.logf("%s timeout p%d a%d in phase %d", n.name, p, at.id, at.prop.Phase())
	if at.newer == nil {
		at.seen = max(at.seen, at.prop.Ballot())
	}
	at.prop.GiveUp()
	n.afterProposer(p)
}

// attemptOf returns the partition whose running proposer is att.
func (n *simNode) attemptOf(att uint64) (int, *attempt) {
	for p, pt := range n.parts {
		if pt.at != nil && pt.at.id == att {
			return p, pt.at
		}
	}
	return 0, nil
}

// afterProposer acts on a finished proposer or announcer as
// Owner.acquire does.
func (n *simNode) afterProposer(p int) {
	at := n.parts[p].at
	if at == nil || at.prop.Phase() != owner.Done {
		return
	}
	out := at.prop.Outcome()
	if at.finalize {
		c := *at.newer
		switch {
		case out.Chosen != nil:
		case out.Newer != nil && out.NewerFinal:
			c = cloneClaim(*out.Newer)
		default:
			n.s.logf("%s a%d p%d could not finalize %s", n.name, at.id, p, fmtClaim(c))
			n.endAttempt(p)
			return
		}
		n.s.logf("%s a%d p%d finalized %s", n.name, at.id, p, fmtClaim(c))
		n.endAttempt(p)
		n.learn(p, c)
		return
	}
	if at.newer != nil {
		newer := *at.newer
		if out.Chosen == nil {
			n.s.logf("%s a%d p%d could not make %s final", n.name, at.id, p, fmtClaim(newer))
			n.endAttempt(p)
			return
		}
		n.actOnNewer(p, newer)
		return
	}
	at.seen = max(at.seen, at.prop.Ballot(), out.Rejected)
	switch {
	case out.Chosen != nil:
		c := cloneClaim(*out.Chosen)
		n.s.logf("%s a%d p%d chose %s", n.name, at.id, p, fmtClaim(c))
		base := at.base
		n.endAttempt(p)
		n.announce(p, base, c)
	case out.Newer != nil:
		c := cloneClaim(*out.Newer)
		n.s.logf("%s a%d p%d newer %s final=%v", n.name, at.id, p, fmtClaim(c), out.NewerFinal)
		if !out.NewerFinal {
			n.announceNewer(p, c)
			return
		}
		n.actOnNewer(p, c)
	default:
		n.s.logf("%s a%d p%d ended rejected=%d failed=%v", n.name, at.id, p, out.Rejected, out.Failed)
		n.endAttempt(p)
	}
}

// actOnNewer is acquire's handling of a newer final claim: learn it, then
// resume it if it is ours (unless this node forgot it, as Owner.resume),
// else go on from it.
func (n *simNode) actOnNewer(p int, c store.Claim) {
	n.learn(p, c)
	if c.Owner == n.name {
		n.endAttempt(p)
		if !n.forgot(p, c) {
			n.startServing(p, c)
		}
		return
	}
	n.propose(p, c)
}

// announce is Owner.announce: tell self, the base's replicas and c's
// replicas that c is final, gossip it, and serve it if it is ours. The
// runtime waits for each answer but ignores failures, so the simulation
// does not wait.
func (n *simNode) announce(p int, base, c store.Claim) {
	told := append(append([]string{n.name}, base.Replicas...), c.Replicas...)
	for _, r := range slices.Compact(slices.Sorted(slices.Values(told))) {
		req := owner.Choose{P: p, Claim: cloneClaim(c), Final: true}
		if r == n.name {
			n.onChoose(n.name, mChoose{Req: req})
			continue
		}
		n.send(r, mChoose{Req: req})
	}
	if cur, ok := n.claims.Get(p); ok {
		n.broadcast(mGossip{Claims: []gossipClaim{{p, cloneClaim(cur)}}})
	}
	if c.Owner == n.name {
		n.startServing(p, c)
	}
}

// broadcast sends a gossip message to every other node.
func (n *simNode) broadcast(g mGossip) {
	for _, o := range n.s.nodes {
		if o != n {
			n.send(o.name, g)
		}
	}
}

// gossipTable sends the whole claims table to node to (push/pull).
func (n *simNode) gossipTable(to string) {
	var g mGossip
	for p, c := range n.claims.Snapshot() {
		if c.Owner != "" {
			g.Claims = append(g.Claims, gossipClaim{p, cloneClaim(c)})
		}
	}
	if len(g.Claims) > 0 {
		n.send(to, g)
	}
}

// stopServing ends serving (a drain, a newer claim, a fenced write).
func (n *simNode) stopServing(p int, why string) {
	pt := n.parts[p]
	if pt.serving || pt.starting != nil {
		n.s.logf("%s stops serving p%d e%d: %s", n.name, p, pt.claim.Epoch, why)
		n.s.servingVersion++
	}
	pt.serving = false
	pt.starting = nil
}

// startServing mirrors Owner.startServing: a start marker at c's epoch,
// applied locally first (a fenced write), then on the other replicas; the
// node serves once a majority of c.Replicas has it and no higher epoch was
// promised here (partition.start).
func (n *simNode) startServing(p int, c store.Claim) {
	pt := n.parts[p]
	if (pt.serving || pt.starting != nil) && pt.claim.Epoch >= c.Epoch {
		return
	}
	n.s.chk.acting(n.name, p, c, "start serving")
	pt.serving = false
	pt.claim = cloneClaim(c)
	w := n.ownWrite(p, c, fmt.Sprintf("start:%s@e%d", n.name, c.Epoch), true)
	if w == nil {
		n.s.logf("%s start marker p%d e%d fenced locally", n.name, p, c.Epoch)
		pt.starting = nil
		return
	}
	pt.starting = w
	n.s.logf("%s starts p%d %s lsn%d", n.name, p, fmtClaim(c), w.entry.LSN)
	n.checkMajority(p, w)
}

// admit is a client's call admitted at the owner (Owner.Lease): it will
// commit at the served claim's epoch, even if serving stops meanwhile (a
// call that outlives a drain is refused by the store: the fence).
func (n *simNode) admit(p int) *call {
	pt := n.parts[p]
	if !pt.serving {
		return nil
	}
	n.s.writes++
	c := &call{p: p, id: fmt.Sprintf("w%d", n.s.writes), claim: cloneClaim(pt.claim)}
	n.calls = append(n.calls, c)
	return c
}

// commit commits an admitted call: its write at the lease's epoch.
func (n *simNode) commit(c *call) {
	i := slices.Index(n.calls, c)
	if i < 0 {
		return
	}
	n.calls = slices.Delete(n.calls, i, i+1)
	pt := n.parts[c.p]
	w := n.ownWrite(c.p, c.claim, c.id, false)
	if w == nil {
		n.s.logf("%s write p%d %s e%d fenced locally", n.name, c.p, c.id, c.claim.Epoch)
		if pt.serving && pt.claim.Epoch == c.claim.Epoch {
			n.stopServing(c.p, "own write fenced")
		}
		return
	}
	n.s.logf("%s write p%d %s e%d lsn%d", n.name, c.p, w.entry.ID, w.entry.Epoch, w.entry.LSN)
	n.checkMajority(c.p, w)
}

// ownWrite applies a write at c's epoch to the local replica and sends it
// to the others; nil if the local replica refused it.
func (n *simNode) ownWrite(p int, c store.Claim, id string, marker bool) *pendingWrite {
	prev := n.meta(p).Position
	e := logEntry{ID: id, Epoch: c.Epoch, LSN: prev.LSN + 1, Prev: prev, Marker: marker}
	if ok, _ := n.applyWrite(p, e); !ok {
		return nil
	}
	w := &pendingWrite{entry: e, claim: cloneClaim(c), acks: map[string]bool{n.name: true}}
	n.parts[p].pending = append(n.parts[p].pending, w)
	for _, r := range c.Replicas {
		if r != n.name {
			n.send(r, mWrite{P: p, Entry: e})
		}
	}
	return w
}

// failStart ends a start marker still waiting for a majority, as the
// runtime's commit fails once too many replicas refused it or did not
// answer (Owner.replicate); the node may then acquire again.
func (n *simNode) failStart(p int) {
	if n.parts[p].starting != nil {
		n.stopServing(p, "start marker not confirmed by a majority")
	}
}

// retransmit sends the writes of a served partition again to the replicas
// that did not acknowledge them.
func (n *simNode) retransmit(p int) {
	pt := n.parts[p]
	if !pt.serving && pt.starting == nil {
		return
	}
	for _, w := range pt.pending {
		for _, r := range w.claim.Replicas {
			if !w.acks[r] {
				n.send(r, mWrite{P: p, Entry: w.entry})
			}
		}
	}
}

// applyWrite is a replica applying a data batch with the store's rules
// (fenced at the batch's epoch unless the control run disabled the fence,
// position advancing by one) plus the replication rule of finding G: the
// batch must follow the replica's exact position (epoch and LSN). A batch
// already applied is acknowledged again.
func (n *simNode) applyWrite(p int, e logEntry) (ok, fenced bool) {
	m := n.meta(p)
	if err := epoch.CheckWrite(m.Fence(), e.Epoch); err != nil && !n.s.cfg.noFence {
		return false, true
	}
	if m.Position != e.Prev {
		for _, have := range n.logs[p] {
			if have.ID == e.ID {
				return have.Epoch == e.Epoch && have.LSN == e.LSN, false
			}
		}
		return false, false
	}
	n.s.chk.applied(n.name, p, "write "+e.ID, e.Epoch, m.Fence())
	m.Promised = max(m.Promised, e.Epoch)
	m.Position = store.Position{Epoch: e.Epoch, LSN: e.LSN}
	n.logs[p] = append(n.logs[p], e)
	n.s.logVersion++
	return true, false
}

// checkMajority acts on a write that may have reached a majority of its
// claim's replicas: the client's write is acknowledged, a start marker
// starts serving unless a higher epoch was promised here meanwhile.
func (n *simNode) checkMajority(p int, w *pendingWrite) {
	if w.majority || len(w.acks) < len(w.claim.Replicas)/2+1 {
		return
	}
	w.majority = true
	pt := n.parts[p]
	if !w.entry.Marker {
		n.s.logf("%s acked p%d %s e%d", n.name, p, w.entry.ID, w.entry.Epoch)
		n.s.chk.acked(p, w.entry.ID, w.entry.Epoch)
		return
	}
	if pt.starting != w {
		return
	}
	pt.starting = nil
	if n.fenced(p, pt.claim) {
		n.s.logf("%s start p%d e%d fenced: promised %d", n.name, p, pt.claim.Epoch, n.meta(p).Promised)
		return
	}
	pt.serving = true
	n.mergeClaim(p, pt.claim, "serving")
	n.s.logf("%s serving p%d %s", n.name, p, fmtClaim(pt.claim))
	n.s.servingVersion++
}
