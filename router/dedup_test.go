package router

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/ring"
	"github.com/singlewriter/singlewriter/store"
)

// countingInc is counter that counts its runs and, while hold is set,
// signals started and waits for proceed before returning.
type countingInc struct {
	runs    atomic.Int64
	hold    atomic.Bool
	started chan struct{}
	proceed chan struct{}
}

func (h *countingInc) handle(ctx context.Context, req *Request) ([]byte, error) {
	h.runs.Add(1)
	out, err := counter(ctx, req)
	if h.hold.Load() {
		h.started <- struct{}{}
		<-h.proceed
	}
	return out, err
}

func TestRetryAfterLostReplyRunsOnceAndReturnsStoredResponse(t *testing.T) {
	h := &countingInc{started: make(chan struct{}), proceed: make(chan struct{})}
	c := newTestCluster(t, 2, func(n *Node) {
		n.Handle("inc", h.handle)
		n.Handle("get", get)
	})
	letGo := sync.OnceFunc(func() { close(h.proceed) })
	t.Cleanup(letGo) // before the cluster closes, should the test fail first
	// A key owned by n1, entered at n0: the reply crosses the network.
	key := keyOwnedBy(c.nodes[0], "n1")
	id := []byte("request-1")

	// The first attempt runs, but its caller gives up before the reply.
	h.hold.Store(true)
	lost, cancelLost := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.nodes[0].Call(lost, key, "inc", nil, RequestID(id))
		first <- err
	}()
	<-h.started
	cancelLost()
	require.ErrorIs(t, <-first, context.Canceled)
	h.hold.Store(false)
	letGo()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := c.nodes[0].Call(ctx, key, "inc", nil, RequestID(id))
	require.NoError(t, err)
	require.Equal(t, uint64(1), binary.BigEndian.Uint64(out), "the stored response of the first run")
	require.Equal(t, int64(1), h.runs.Load(), "the handler ran once")

	v, err := c.nodes[1].Call(ctx, key, "get", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), binary.BigEndian.Uint64(v))
}

func TestRetryReachingNewOwnerAfterHandoffReturnsStoredResponse(t *testing.T) {
	h := &countingInc{}
	c := newTestCluster(t, 2, func(n *Node) { n.Handle("inc", h.handle) })
	// A key that moves to n2 when it joins.
	next := ring.Place([]ring.Member{{Name: "n0"}, {Name: "n1"}, {Name: "n2"}}, ring.DefaultPartitions, c.nodes[0].cfg.ReplicationFactor)
	var key []byte
	for i := 0; key == nil; i++ {
		k := fmt.Appendf(nil, "pay-%d", i)
		if next.Owners[c.nodes[0].Partition(k)] == "n2" {
			key = k
		}
	}
	p := c.nodes[0].Partition(key)
	before, _ := c.nodes[0].Owner(p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := []byte("request-2")
	out1, err := c.nodes[0].Call(ctx, key, "inc", nil, RequestID(id))
	require.NoError(t, err)

	c.add("n2", false)
	c.waitConverged()
	after, _ := c.nodes[0].Owner(p)
	require.Equal(t, "n2", after.Owner)
	require.Greater(t, after.Epoch, before.Epoch)

	out2, err := c.nodes[0].Call(ctx, key, "inc", nil, RequestID(id))
	require.NoError(t, err)
	require.Equal(t, out1, out2, "the retry gets the stored response")
	require.Equal(t, int64(1), h.runs.Load(), "the handler ran once, before the handoff")
}

func TestGeneratedRequestIDsAreUniqueAndSortByCreationTime(t *testing.T) {
	at := time.Unix(1700000000, 0)
	a, b := newRequestID(at), newRequestID(at)
	later := newRequestID(at.Add(time.Nanosecond))
	require.Len(t, a, 16)
	require.NotEqual(t, a, b, "same instant, different IDs")
	require.Negative(t, bytes.Compare(a, later))
	require.Negative(t, bytes.Compare(b, later))
}

// RequestID's promise is per key: the same ID on another key is another
// call, whichever partitions the two keys fall in (here the same one, where
// a dedup record named by the ID alone would answer for both).
func TestSameRequestIDOnAnotherKeyIsAnotherCall(t *testing.T) {
	h := &countingInc{}
	c := newReplicatedCluster(t, 1, 1, func(n *Node) { n.Handle("inc", h.handle); n.Handle("get", get) })
	n := c.nodes[0]
	debit := []byte("account-a")
	credit := keyInPartition(n, n.Partition(debit), "account-b")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := RequestID([]byte("transfer-42"))
	_, err := n.Call(ctx, debit, "inc", nil, id)
	require.NoError(t, err)
	_, err = n.Call(ctx, credit, "inc", nil, id)
	require.NoError(t, err)
	v, err := n.Call(ctx, credit, "get", nil)
	require.NoError(t, err)
	require.Len(t, v, 8, "the second key was never written: its call got the first key's stored response")
	require.Equal(t, int64(2), h.runs.Load())
	_, err = n.Call(ctx, credit, "inc", nil, id)
	require.NoError(t, err)
	require.Equal(t, int64(2), h.runs.Load(), "a repeat on the same key ran again")
}

// A repeat that arrives while the first call's commit is pending gets the
// first call's response once it commits, in a buffer of its own: two
// callers never share the bytes Call returns. The pending commit is staged
// directly (a real one lasts microseconds), already decided, so the
// repeat's run finds it and returns at once.
func TestRepeatWhileTheFirstCommitIsPendingGetsItsOwnCopy(t *testing.T) {
	c := newReplicatedCluster(t, 1, 1, func(n *Node) { n.Handle("inc", counter) })
	n := c.nodes[0]
	key, id := []byte("account-a"), []byte("transfer-43")
	pr := &pendingResponse{body: []byte("first response"), digest: callDigest(callRequest{Method: "inc"}), done: make(chan struct{})}
	close(pr.done)
	pe := n.exec.parts[n.Partition(key)]
	pe.mu.Lock()
	pe.responses[string(dedupID(callRequest{ID: id, Key: key}))] = pr
	pe.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := n.Call(ctx, key, "inc", nil, RequestID(id))
	require.NoError(t, err)
	require.Equal(t, "first response", string(got), "the repeat ran instead of waiting for the first call")
	got[0] = 'X'
	require.Equal(t, "first response", string(pr.body), "the repeat's caller got the first caller's buffer")

	_, err = n.Call(ctx, key, "inc", []byte("another payload"), RequestID(id))
	require.ErrorIs(t, err, ErrRequestIDReused, "a repeat with another payload got the pending call's response")
}

// A repeat that finds the first call's commit pending answers with a copy
// of the response the commit stores, never with the buffer the first call's
// caller gets, which that caller may change at once (here it clears it). The
// repeat queues behind the first call, so that
// it runs as soon as the first call's commit is submitted, mostly before
// that commit ends; 20 rounds make it all but certain that some do.
func TestRepeatOfAPendingCallSharesNoBufferWithItsCaller(t *testing.T) {
	h := &countingInc{started: make(chan struct{}), proceed: make(chan struct{})}
	c := newReplicatedCluster(t, 1, 1, func(n *Node) { n.Handle("inc", h.handle) })
	n := c.nodes[0]
	key := []byte("account-f")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 20 {
		id := RequestID(fmt.Appendf(nil, "transfer-%d", i))
		h.hold.Store(true)
		first := make(chan callResult, 1)
		go func() { body, err := n.Call(ctx, key, "inc", nil, id); first <- callResult{body, err} }()
		<-h.started
		h.hold.Store(false)
		repeat := make(chan callResult, 1)
		go func() { body, err := n.Call(ctx, key, "inc", nil, id); repeat <- callResult{body, err} }()
		waitQueued(t, n, key, 1)
		h.proceed <- struct{}{}
		f := <-first
		require.NoError(t, f.err)
		want := bytes.Clone(f.body)
		clear(f.body) // the caller's own buffer
		r := <-repeat
		require.NoError(t, r.err)
		require.Equal(t, want, r.body)
	}
	require.Equal(t, int64(20), h.runs.Load(), "a repeat ran")
}

// A call that reuses the request ID of a call whose commit is pending
// waits for it: had it been refused at once, and had that commit then
// failed, nothing of the first call would be kept and the ID would have
// been refused for no call. Once the commit fails, the reused ID is asked
// again, and runs.
func TestReusedIDOfACallWhoseCommitFailsRunsAfterIt(t *testing.T) {
	h := &countingInc{started: make(chan struct{}), proceed: make(chan struct{})}
	c := newReplicatedCluster(t, 1, 1, func(n *Node) { n.Handle("inc", h.handle) })
	n := c.nodes[0]
	key, id := []byte("account-d"), []byte("transfer-46")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reused, fail := callBehindPendingCommit(t, n, h, key, id, func() ([]byte, error) {
		return n.Call(ctx, key, "inc", []byte("another payload"), RequestID(id))
	})
	fail(fmt.Errorf("commit refused: %w", epoch.ErrStale))
	r := <-reused
	require.NoError(t, r.err, "the reused ID was refused, or failed with the first call's outcome")
	require.Equal(t, int64(3), h.runs.Load())
}

// A repeat that finds its call's commit pending, and sees it fenced, is
// asked again instead of answered ErrStaleEpoch, which says "nothing was
// written": another attempt of the same call may have been written since,
// at the owner the caller's retry reached while this one was pending. Here
// that attempt's record is stored, and the repeat gets its response.
func TestRepeatOfAFencedPendingCommitGetsTheStoredResponse(t *testing.T) {
	h := &countingInc{started: make(chan struct{}), proceed: make(chan struct{})}
	c := newReplicatedCluster(t, 1, 1, func(n *Node) { n.Handle("inc", h.handle) })
	n := c.nodes[0]
	key, id := []byte("account-e"), []byte("transfer-47")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := n.Call(ctx, key, "inc", nil, RequestID(id))
	require.NoError(t, err)
	repeat, fail := callBehindPendingCommit(t, n, h, key, id, func() ([]byte, error) {
		return n.Call(ctx, key, "inc", nil, RequestID(id))
	})
	fail(fmt.Errorf("commit refused: %w", epoch.ErrStale))
	r := <-repeat
	require.NoError(t, r.err, "a repeat was told that nothing of its call was written")
	require.Equal(t, first, r.body)
	require.Equal(t, int64(3), h.runs.Load(), "the repeat ran")
}

// callResult is one Call's outcome.
type callResult struct {
	body []byte
	err  error
}

// callBehindPendingCommit stages, in n's executor, a pending commit of an
// "inc" call on key with request ID id, and sends call once that commit is
// pending. The key's FIFO orders it: call queues behind a call h holds, a
// third call behind it, and the third one's answer shows that call's run
// has found the pending commit. It returns call's outcome and fail, which
// ends the pending commit with err as submit ends a failed one.
func callBehindPendingCommit(t *testing.T, n *Node, h *countingInc, key, id []byte, call func() ([]byte, error)) (<-chan callResult, func(err error)) {
	t.Helper()
	name := string(dedupID(callRequest{ID: id, Key: key}))
	pr := &pendingResponse{digest: callDigest(callRequest{Method: "inc"}), done: make(chan struct{})}
	pe := n.exec.parts[n.Partition(key)]
	pe.mu.Lock()
	pe.responses[name] = pr
	pe.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	h.hold.Store(true)
	held := make(chan error, 1)
	go func() { _, err := n.Call(ctx, key, "inc", nil); held <- err }()
	<-h.started
	h.hold.Store(false)
	result := make(chan callResult, 1)
	go func() { body, err := call(); result <- callResult{body, err} }()
	waitQueued(t, n, key, 1)
	third := make(chan error, 1)
	go func() { _, err := n.Call(ctx, key, "inc", nil); third <- err }()
	waitQueued(t, n, key, 2)
	close(h.proceed)
	require.NoError(t, <-held)
	require.NoError(t, <-third)
	return result, func(err error) {
		pe.mu.Lock()
		delete(pe.responses, name)
		pe.mu.Unlock()
		pr.err = err
		close(pr.done)
	}
}

// A request ID names one call: reused on the same key for another payload
// or method, the call is refused and does not run, while a true repeat
// still gets the stored response. The key is owned by the node the calls
// do not enter, so the refusal crosses the network.
func TestRequestIDReusedForAnotherCallIsRefused(t *testing.T) {
	h := &countingInc{}
	c := newTestCluster(t, 2, func(n *Node) { n.Handle("inc", h.handle); n.Handle("get", get) })
	key := keyOwnedBy(c.nodes[0], "n1")
	id := RequestID([]byte("order-7"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := c.nodes[0].Call(ctx, key, "inc", []byte("amount=5"), id)
	require.NoError(t, err)

	_, err = c.nodes[0].Call(ctx, key, "inc", []byte("amount=6"), id)
	require.ErrorIs(t, err, ErrRequestIDReused, "another payload")
	_, err = c.nodes[0].Call(ctx, key, "get", []byte("amount=5"), id)
	require.ErrorIs(t, err, ErrRequestIDReused, "another method")
	require.Equal(t, int64(1), h.runs.Load(), "a refused call ran")

	again, err := c.nodes[0].Call(ctx, key, "inc", []byte("amount=5"), id)
	require.NoError(t, err)
	require.Equal(t, first, again, "a true repeat gets the stored response")
	require.Equal(t, int64(1), h.runs.Load())
}

// Builds before protocol version 6 stored a dedup record under the
// request ID and the key's hash: version 5 as the call's digest and its
// response, earlier versions as the bare response. A retry after the
// upgrade still gets that response, and the handler does not run: with
// the record still in the memtable, and in the data file after a restart.
func TestRetryOfACallStoredByAnEarlierBuildGetsItsResponse(t *testing.T) {
	req := callRequest{Method: "inc", Payload: []byte("amount=5")}
	for name, record := range map[string][]byte{
		"version 5":        dedupRecord(callDigest(req), []byte("balance=105")),
		"before version 5": []byte("balance=105"),
	} {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/restart=%t", name, restart), func(t *testing.T) {
				h := &countingInc{}
				c := newReplicatedCluster(t, 1, 1, func(n *Node) { n.Handle("inc", h.handle) })
				n := c.nodes[0]
				key, id := []byte("account-b"), []byte("transfer-44")
				p := n.Partition(key)
				lease, err := n.owner.Lease(p)
				require.NoError(t, err)
				earlierName := binary.BigEndian.AppendUint64(bytes.Clone(id), xxhash.Sum64(key))
				commit := n.owner.Submit(lease, &store.Batch{Partition: p, RequestID: earlierName, Response: record})
				<-commit.Done()
				lease.Release()
				require.NoError(t, commit.Err())
				if restart { // Close flushes the memtable into the data file
					cfg := c.restartConfig(n)
					require.NoError(t, n.Close())
					n = c.start(cfg)
				}

				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				got, err := n.Call(ctx, key, req.Method, req.Payload, RequestID(id))
				require.NoError(t, err)
				require.Equal(t, "balance=105", string(got), "the retry ran, or got the record's digest, instead of the earlier build's response")
				require.Zero(t, h.runs.Load())
			})
		}
	}
}

// A repeat that reaches an owner deposed without knowing it finds the
// first call's record, but the record's confirm is refused, and the owner
// answers nothing from it. Not ErrStaleEpoch, which with one replica is
// final and says "nothing was written", of a call that was written; nor
// ErrRequestIDReused for another call, an answer from the record too:
// both are asked again, here until their deadline. The node's store is
// made to promise a newer epoch behind its owner's back: this stands for
// a lease taken before a successor's Prepare, whose drain gave up on it,
// and a confirm committed after the promise.
func TestDeposedOwnerAnswersNoRepeatFromItsRecord(t *testing.T) {
	h := &countingInc{}
	c := newReplicatedCluster(t, 1, 1, func(n *Node) { n.Handle("inc", h.handle) })
	n := c.nodes[0]
	key, id := []byte("account-c"), RequestID([]byte("transfer-45"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := n.Call(ctx, key, "inc", nil, id)
	require.NoError(t, err)

	p := n.Partition(key)
	served, ok := n.Serving(p)
	require.True(t, ok)
	_, err = n.store.Promise(ctx, p, served.Epoch+1)
	require.NoError(t, err)

	for _, payload := range []string{"", "another payload"} {
		short, cancelShort := context.WithTimeout(ctx, time.Second)
		_, err = n.Call(short, key, "inc", []byte(payload), id)
		cancelShort()
		require.ErrorIs(t, err, ErrUnavailable, "payload %q: a deposed owner answered from its record", payload)
	}
	require.Equal(t, int64(1), h.runs.Load())
}

func TestCallDigestSeparatesMethodFromPayload(t *testing.T) {
	require.NotEqual(t, callDigest(callRequest{Method: "ab", Payload: []byte("c")}), callDigest(callRequest{Method: "a", Payload: []byte("bc")}))
	require.NotEqual(t, callDigest(callRequest{Method: "inc"}), callDigest(callRequest{Method: "inc", Payload: []byte{0}}))
	require.NotEqual(t, callDigest(callRequest{Method: "inc", Payload: []byte("x")}), callDigest(callRequest{Method: "get", Payload: []byte("x")}))
	_, _, ok := splitDedupRecord(make([]byte, 7))
	require.False(t, ok, "a record too short for a digest")
	d, body, ok := splitDedupRecord(dedupRecord(42, []byte("resp")))
	require.True(t, ok)
	require.Equal(t, uint64(42), d)
	require.Equal(t, "resp", string(body))
}

// Call retries for at most half of Config.DedupRetention: once the owner
// pruned the record of an attempt that ran but whose answer was lost, a
// retry would run the call again.
func TestCallStopsRetryingBeforeTheFirstAttemptsRecordCanBePruned(t *testing.T) {
	h := &countingInc{started: make(chan struct{}), proceed: make(chan struct{})}
	c := newFaultyCluster(t, 2, 1, func(n *Node) {
		n.cfg.DedupRetention = 500 * time.Millisecond
		n.Handle("inc", h.handle)
	})
	entry, owner := c.nodes[0], c.nodes[1]
	key := keyOwnedBy(entry, owner.Name())
	id := []byte("r1")
	record := func() bool {
		_, ok, err := owner.store.Response(owner.Partition(key), dedupID(callRequest{ID: id, Key: key}))
		require.NoError(t, err)
		return ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	defer cancel()
	h.hold.Store(true)
	called := make(chan error, 1)
	go func() {
		_, err := entry.Call(ctx, key, "inc", nil, RequestID(id))
		called <- err
	}()
	<-h.started
	c.isolate(entry.Name()) // the answer is lost; the owner commits alone
	h.hold.Store(false)
	h.proceed <- struct{}{}
	waitFor(t, 30*time.Second, func() error {
		if !record() {
			return errors.New("the attempt's record is not stored yet")
		}
		return nil
	})
	waitFor(t, 30*time.Second, func() error {
		if record() {
			return errors.New("the attempt's record is not pruned yet")
		}
		return nil
	})
	c.heal()
	err := <-called
	require.ErrorIs(t, err, ErrUnavailable)
	require.Equal(t, int64(1), h.runs.Load(), "the call ran again after its record was pruned")
}

// A handler sees its call's request ID, the caller's or the one Call drew,
// from which it can derive the IDs of the calls it makes in turn.
func TestHandlerSeesItsCallsRequestID(t *testing.T) {
	c := newTestCluster(t, 2, func(n *Node) {
		n.Handle("id", func(_ context.Context, req *Request) ([]byte, error) { return req.ID, nil })
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		id, err := n.Call(ctx, []byte("k"), "id", nil, RequestID([]byte("order-42")))
		require.NoError(t, err)
		require.Equal(t, "order-42", string(id))
		drawn, err := n.Call(ctx, []byte("k"), "id", nil)
		require.NoError(t, err)
		require.Len(t, drawn, 16, "Call draws a 16-byte ID")
	}
}
