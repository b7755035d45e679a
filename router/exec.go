package router

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/owner"
	"github.com/singlewriter/singlewriter/store"
)

// executor runs calls on the partitions this node serves: one FIFO queue
// per key, pipelined commits, and request dedup.
type executor struct {
	n     *Node
	parts []*partExec
	// pending counts the calls admitted by execute and not yet answered
	// (Config.MaxPendingCalls).
	pending atomic.Int64
	// idle hands a key that has work to a worker that waits for one (see
	// worker); unbuffered, so a send succeeds only if one waits.
	idle chan keyWork
}

// keyWork names a key whose queue needs a worker.
type keyWork struct {
	pe  *partExec
	key string
}

// workerIdleTime is how long a worker waits for another key before it
// exits (a variable for tests).
var workerIdleTime = 5 * time.Second

func newExecutor(n *Node) *executor {
	x := &executor{n: n, parts: make([]*partExec, n.cfg.Partitions), idle: make(chan keyWork)}
	for p := range x.parts {
		x.parts[p] = &partExec{
			p:         p,
			queues:    map[string][]*job{},
			overlay:   map[string]*pendingWrite{},
			responses: map[string]*pendingResponse{},
		}
	}
	return x
}

// partExec is the execution state of one partition.
//
// Pipelining: a call runs on the values its key's earlier calls wrote even
// before they are durable (the overlay), and its reply waits for its own
// commit. Commits apply in submission order and a refusal is permanent for
// an epoch (the promise only grows) while a failed transaction poisons the
// store, so a commit that succeeds implies every commit it read from
// succeeded: no reply ever leaves with state that was not made durable.
// That holds within one epoch only: a call of a later claim never reads a
// pending write of an earlier one (see state).
type partExec struct {
	p int
	// mu guards the maps below.
	mu sync.Mutex
	// queues holds each busy key's waiting jobs; a key is present while its
	// worker runs.
	queues map[string][]*job
	// overlay holds each key's newest value not yet committed, with the
	// epoch it commits at.
	overlay map[string]*pendingWrite
	// responses holds responses not yet committed, by request ID.
	responses map[string]*pendingResponse
}

type pendingWrite struct {
	value []byte
	epoch epoch.Epoch
}

type pendingResponse struct {
	body []byte
	// digest is the call's callDigest.
	digest uint64
	done   chan struct{}
	// err is the commit's outcome; set before done is closed.
	err error
}

// job is one call waiting in its key's queue.
type job struct {
	ctx  context.Context
	req  callRequest
	done chan callResponse
}

// answer gives job j its one response. The call stops counting as
// pending first: its caller, once answered, may send its next call at once.
func (x *executor) answer(j *job, r callResponse) {
	x.pending.Add(-1)
	j.done <- r
}

// execute runs a call that reached this node and returns its outcome.
// If ctx ends first, a call still queued behind its key's earlier calls
// is answered without running when its turn comes, and one already taken
// from the queue may still complete; a retry with the same request ID
// then returns its stored response.
//
// A node that does not serve the key's partition says so at once, not
// behind the key's queue, where a handler that outlived a handoff may
// still run; the owner's lease is checked again when the call's turn comes.
func (n *Node) execute(ctx context.Context, req callRequest) callResponse {
	n.closeMu.RLock()
	if n.closed {
		n.closeMu.RUnlock()
		return unavailable(ErrClosed)
	}
	p := n.Partition(req.Key)
	if _, serving := n.owner.Serving(p); !serving {
		n.closeMu.RUnlock()
		cl, _ := n.owner.Claims().Get(p)
		return callResponse{Status: statusNotOwner, Claim: cl}
	}
	if !n.exec.admit(n.cfg.MaxPendingCalls) {
		n.closeMu.RUnlock()
		return callResponse{Status: statusOverloaded, Body: fmt.Appendf(nil, "%s holds %d calls, its Config.MaxPendingCalls", n.cfg.Name, n.cfg.MaxPendingCalls)}
	}
	j := &job{ctx: ctx, req: req, done: make(chan callResponse, 1)}
	n.exec.parts[p].enqueue(n, j)
	n.closeMu.RUnlock()
	select {
	case r := <-j.done:
		return r
	case <-ctx.Done():
		return unavailable(ctx.Err())
	}
}

// admit counts one more pending call unless limit (if positive) calls are
// pending already.
func (x *executor) admit(limit int) bool {
	for {
		pending := x.pending.Load()
		if limit > 0 && pending >= int64(limit) {
			return false
		}
		if x.pending.CompareAndSwap(pending, pending+1) {
			return true
		}
	}
}

// enqueue appends j to its key's queue and starts the key's worker if the
// key was idle.
func (pe *partExec) enqueue(n *Node, j *job) {
	key := string(j.req.Key)
	pe.mu.Lock()
	q, busy := pe.queues[key]
	pe.queues[key] = append(q, j)
	pe.mu.Unlock()
	if !busy {
		n.exec.start(keyWork{pe, key})
	}
}

// start gives k to a waiting worker, or to a new one if none waits.
func (x *executor) start(k keyWork) {
	select {
	case x.idle <- k:
	default:
		x.n.wg.Add(1)
		go x.worker(k)
	}
}

// worker runs the queue of k's key, then of each key it is handed next,
// until it waited workerIdleTime for one or the node closes. Reusing
// workers spares each call that finds its key idle a new goroutine, whose
// stack grew again in the store's B-tree search: 4-5% of the bench's CPU
// on Zipf at 64 clients.
func (x *executor) worker(k keyWork) {
	defer x.n.wg.Done()
	wait := time.NewTimer(workerIdleTime)
	defer wait.Stop()
	for {
		k.pe.work(x.n, k.key)
		wait.Reset(workerIdleTime)
		select {
		case k = <-x.idle:
		case <-wait.C:
			return
		case <-x.n.ctx.Done():
			return
		}
	}
}

// work runs key's jobs one at a time until its queue is empty.
func (pe *partExec) work(n *Node, key string) {
	for {
		pe.mu.Lock()
		q := pe.queues[key]
		if len(q) == 0 {
			delete(pe.queues, key)
			pe.mu.Unlock()
			return
		}
		j := q[0]
		pe.queues[key] = q[1:]
		pe.mu.Unlock()
		if err := j.ctx.Err(); err != nil {
			// Its caller gave up (execute answered already) before it
			// started: running it would only delay the calls behind it.
			n.exec.answer(j, unavailable(err))
			continue
		}
		pe.run(n, j)
	}
}

// run executes one job: lease, dedup, handler, submit. It returns once the
// commit is submitted; complete replies after it is durable.
func (pe *partExec) run(n *Node, j *job) {
	lease, err := n.owner.Lease(pe.p)
	if err != nil {
		n.exec.answer(j, notServed(err))
		return
	}
	id, digest := dedupID(j.req), callDigest(j.req)
	if pe.answerRepeat(n, j, lease, id, digest) {
		return
	}
	// After the lease and the dedup check: only the owner says that no
	// handler ran, and not of a call that ran already.
	h := n.handler(j.req.Method)
	if h == nil {
		lease.Release()
		n.exec.answer(j, callResponse{Status: statusUnknownMethod, Body: []byte(j.req.Method)})
		return
	}
	st, err := pe.state(n, j.req.Key, lease.Epoch)
	if err != nil {
		lease.Release()
		n.exec.answer(j, committed(nil, err))
		return
	}
	req := &Request{Key: j.req.Key, Method: j.req.Method, Payload: j.req.Payload, Partition: pe.p, Epoch: lease.Epoch, State: st, ID: j.req.ID}
	// The handler's ctx also ends when the lease is revoked: the partition
	// moved on while it ran, and the new owner may run the key's next calls.
	leased, cancel := context.WithCancelCause(j.ctx)
	defer cancel(nil)
	defer context.AfterFunc(lease.Context(), func() { cancel(context.Cause(lease.Context())) })()
	ctx := handlerContext(leased, n, j.req.Key)
	defer func() {
		if !ctx.returned.Swap(true) {
			// The handler ended this goroutine (runtime.Goexit): its call
			// fails, and another worker takes the rest of the key's queue.
			lease.Release()
			n.exec.answer(j, handlerFailed("the handler ended its goroutine (runtime.Goexit)"))
			n.exec.start(keyWork{pe, string(j.req.Key)})
		}
	}()
	body, failed := callHandler(ctx, h, req)
	ctx.returned.Store(true)
	if failed != nil {
		lease.Release()
		if revoked := context.Cause(lease.Context()); revoked != nil && failed.stopped {
			// It stopped because its lease was revoked: nothing was
			// written, and the call runs again at the new owner.
			n.exec.answer(j, unavailable(revoked))
			return
		}
		n.exec.answer(j, handlerFailed(failed.text))
		return
	}
	if size := len(body) + len(st.value); size > n.cfg.MaxPayload {
		lease.Release()
		n.exec.answer(j, callResponse{Status: statusTooLarge, Body: fmt.Appendf(nil, "response and value of %d bytes, limit %d", size, n.cfg.MaxPayload)})
		return
	}
	pe.submit(n, j, lease, id, digest, st, body)
}

// answerRepeat answers j, and reports that it did, when j's request ID
// names a call that ran already: with that call's response, or with
// statusReusedID when that call asked for another method or payload (its
// digest differs, or its record is too short to hold one). Either answer
// waits until the first call is known durable: a pending call's commit
// must succeed, and a stored record is acted on only after confirm (a
// record this node committed without a majority, or holds as a deposed
// owner, fails it). Otherwise j is answered statusUnavailable, and Call
// asks again. Not even a repeat of the same call gets a failed commit's
// own outcome: a fenced one says "nothing was written", but another
// attempt of the call may have been written since, at the owner the
// caller's retry reached while this one was pending.
func (pe *partExec) answerRepeat(n *Node, j *job, lease owner.Lease, id []byte, digest uint64) bool {
	pe.mu.Lock()
	pr := pe.responses[string(id)]
	pe.mu.Unlock()
	if pr != nil {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			<-pr.done
			lease.Release()
			switch {
			case pr.err != nil:
				// Asked again, j finds the call's record, or runs if
				// nothing of the call was kept.
				n.exec.answer(j, unavailable(pr.err))
			case pr.digest == digest:
				// A copy: every repeat owns its answer.
				n.exec.answer(j, committed(bytes.Clone(pr.body), nil))
			default:
				n.exec.answer(j, reusedID(j))
			}
		}()
		return true
	}
	record, ok, err := pe.storedRecord(n, id, digest)
	if err == nil && !ok {
		return false
	}
	if err == nil {
		err = confirm(n, lease)
	}
	lease.Release()
	switch was, body, ok := splitDedupRecord(record); {
	case err != nil:
		// Not ErrStaleEpoch's "nothing was written": the first call may
		// well have been. Call asks again, at the new owner if any.
		n.exec.answer(j, unavailable(err))
	case ok && was == digest:
		n.exec.answer(j, committed(body, nil))
	default:
		n.exec.answer(j, reusedID(j))
	}
	return true
}

// storedRecord returns the dedup record named id in dedupRecord's format,
// if the partition holds one. Earlier builds stored records under the name
// without dedupFormat: looking there too lets a retry across an upgrade get
// its response (see earlierRecord, which digest is for).
func (pe *partExec) storedRecord(n *Node, id []byte, digest uint64) (record []byte, ok bool, err error) {
	record, ok, err = n.store.Response(pe.p, id)
	if err != nil || ok {
		return record, ok, err
	}
	record, ok, err = n.store.Response(pe.p, id[:len(id)-1])
	if ok {
		record = earlierRecord(record, digest)
	}
	return record, ok, err
}

// reusedID is the answer to j when its request ID named another call.
func reusedID(j *job) callResponse {
	return callResponse{Status: statusReusedID, Body: fmt.Appendf(nil, "request ID %q on this key named a call with another method or payload", j.req.ID)}
}

// submit records the call's writes in the overlay and sends its commit,
// with its response stored as dedup record dedup (after the call's digest).
// A write the store would refuse as invalid is refused first: that refusal
// is not permanent for the epoch, so it must never reach the overlay (see
// partExec).
func (pe *partExec) submit(n *Node, j *job, lease owner.Lease, dedup []byte, digest uint64, st *State, body []byte) {
	b := &store.Batch{Partition: pe.p, RequestID: dedup, Response: dedupRecord(digest, body)}
	// Copies of the write: the handler may have returned st.value or
	// req.Key as body, which a local caller gets and may change while the
	// batch is still to be sent to a backup (or sent again).
	value := bytes.Clone(st.value)
	if st.changed {
		b.Writes = []store.KV{{Key: bytes.Clone(j.req.Key), Value: value}}
	}
	if err := b.Validate(); err != nil {
		lease.Release()
		n.exec.answer(j, callResponse{Status: statusInvalid, Body: []byte(err.Error())})
		return
	}
	key, id := string(j.req.Key), string(dedup)
	var w *pendingWrite
	// Not body, which the call's caller gets and may change while a repeat
	// copies pr.body.
	_, stored, _ := splitDedupRecord(b.Response)
	pr := &pendingResponse{body: stored, digest: digest, done: make(chan struct{})}
	pe.mu.Lock()
	if st.changed {
		w = &pendingWrite{value: value, epoch: lease.Epoch}
		pe.overlay[key] = w
	}
	pe.responses[id] = pr
	pe.mu.Unlock()
	pending := n.owner.Submit(lease, b)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		<-pending.Done()
		pr.err = pending.Err()
		pe.mu.Lock()
		if w != nil && pe.overlay[key] == w {
			delete(pe.overlay, key)
		}
		delete(pe.responses, id)
		pe.mu.Unlock()
		close(pr.done)
		lease.Release()
		switch {
		case errors.Is(pr.err, epoch.ErrStale):
			n.fenced.Add(1)
		case pr.err != nil:
			n.failedCommits.Add(1)
		}
		n.exec.answer(j, committed(body, pr.err))
	}()
}

// state returns key's value as the next call, at epoch e, must see it: the
// newest pending write of the same epoch, else the stored value.
//
// A pending write of an earlier epoch is ignored: it will be refused. The
// dangerous interleaving: a handler at epoch 1 computes its write and
// pauses; the partition moves to another node (epoch 2), which writes the
// key, and comes back (epoch 3). Serving epoch 3 means the store promised
// 3, so the paused commit at epoch 1 is fenced when it is submitted; a call
// at epoch 3 that read it from the overlay would both resurrect the fenced
// write and hide epoch 2's acknowledged one.
func (pe *partExec) state(n *Node, key []byte, e epoch.Epoch) (*State, error) {
	pe.mu.Lock()
	w := pe.overlay[string(key)]
	pe.mu.Unlock()
	if w != nil && w.epoch == e {
		// A copy: the pending batch still commits w.value, and the handler
		// owns what Get returns.
		return &State{old: bytes.Clone(w.value), found: w.value != nil}, nil
	}
	v, ok, err := n.store.Get(pe.p, key)
	return &State{old: v, found: ok}, err
}

// dedupFormat ends the name of every dedup record since protocol version
// 6 (see dedupRecord). Earlier builds stored their records under the name
// without it (see earlierRecord).
const dedupFormat = 1

// dedupID names req's dedup record: its request ID, then the 64-bit hash
// of its key, since the same ID on another key is another call, then
// dedupFormat. The ID comes first, so records of time-ordered IDs stay at
// the end of the partition's B-tree (see newRequestID).
func dedupID(req callRequest) []byte {
	id := binary.BigEndian.AppendUint64(append(make([]byte, 0, len(req.ID)+9), req.ID...), xxhash.Sum64(req.Key))
	return append(id, dedupFormat)
}

// callDigest is a 64-bit hash of what req asks for, its method and
// payload. A dedup record keeps it, so that a request ID reused for another
// call is refused instead of answered with the first call's response.
func callDigest(req callRequest) uint64 {
	var d xxhash.Digest
	d.Reset()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(req.Method)))
	d.Write(n[:])
	d.WriteString(req.Method)
	d.Write(req.Payload)
	return d.Sum64()
}

// dedupRecord is what a call's dedup record stores: its digest, then its
// response.
func dedupRecord(digest uint64, body []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(body)), digest), body...)
}

// earlierRecord returns, in dedupRecord's format, a record that an
// earlier build stored, for a repeat whose digest is digest. Protocol
// version 5 stored the digest first; earlier versions stored the bare
// response, which answers any repeat, as those versions did. The two
// cannot be told apart, so a version 5 record whose digest differs is
// taken for a bare response too: a reused ID then gets that record whole
// instead of ErrRequestIDReused, until DedupRetention prunes it.
func earlierRecord(record []byte, digest uint64) []byte {
	if was, _, ok := splitDedupRecord(record); ok && was == digest {
		return record
	}
	return dedupRecord(digest, record)
}

// splitDedupRecord is the inverse of dedupRecord; ok is false for a record
// too short to hold a digest. body aliases record.
func splitDedupRecord(record []byte) (digest uint64, body []byte, ok bool) {
	if len(record) < 8 {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(record), record[8:], true
}

// confirm commits an empty batch under lease and waits for it: once a
// majority of the replicas hold it they hold every earlier batch too
// (replicas apply in order), so a stored response found here may be
// returned. Without it, a retry could return the response of a commit that
// only this node holds (its replication failed): an acknowledgement that a
// takeover can lose.
func confirm(n *Node, lease owner.Lease) error {
	c := n.owner.Submit(lease, &store.Batch{Partition: lease.P})
	<-c.Done()
	return c.Err()
}

// committed maps a commit's outcome to a call response.
func committed(body []byte, err error) callResponse {
	switch {
	case err == nil:
		return callResponse{Status: statusOK, Body: body}
	case errors.Is(err, epoch.ErrStale):
		return callResponse{Status: statusStale, Body: []byte(err.Error())}
	default:
		return unavailable(err)
	}
}

// unavailable is the response of a call this node cannot answer now, for
// err: Call asks again after a backoff.
func unavailable(err error) callResponse {
	return callResponse{Status: statusUnavailable, Body: []byte(err.Error())}
}

// notServed maps a refused lease to a call response.
func notServed(err error) callResponse {
	var ne *owner.NotOwnerError
	if errors.As(err, &ne) {
		return callResponse{Status: statusNotOwner, Claim: ne.Claim}
	}
	return unavailable(err)
}
