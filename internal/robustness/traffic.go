package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
)

const (
	// attemptTimeout bounds one attempt of a call. It is longer than
	// handlerPause and bouncePause, so that a paused call's outcome reaches its client: a
	// client that gave up and retried elsewhere would never see a zombie
	// write acknowledged.
	attemptTimeout = 4 * time.Second
	// retryWindow is how long after traffic stops a client keeps retrying
	// an operation with an unknown outcome (same request ID) to learn it.
	retryWindow = 15 * time.Second
	// reuseShare is the share of a client's operations, once it has an
	// acknowledged put or cas, that are puts sent under the request ID of
	// one of them (see op.Reused), taken from the other kinds' shares; as
	// many are repeats of one of them (see op.Repeat), besides the repeat
	// that follows each reuse.
	reuseShare = 0.02
)

// keyset is the keys of a run: registers take put, get and cas; counters
// take inc and get.
type keyset struct {
	registers, counters []string
}

func (k keyset) all() []string { return append(append([]string(nil), k.registers...), k.counters...) }

func (k keyset) isCounter(key string) bool { return slices.Contains(k.counters, key) }

// traffic runs clients, one request at a time each, until stop.
type traffic struct {
	c    *cluster
	h    *history
	keys keyset
	// stop is closed to end the traffic; deadline is then when clients give
	// up learning an unknown outcome.
	stop     chan struct{}
	deadline time.Time
	wg       sync.WaitGroup
}

func startTraffic(c *cluster, h *history, keys keyset, clients int, seed uint64) *traffic {
	t := &traffic{c: c, h: h, keys: keys, stop: make(chan struct{})}
	for i := range clients {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		t.wg.Add(1)
		go t.client(i, rng)
	}
	return t
}

// finish stops the clients and waits for their last operations.
func (t *traffic) finish() {
	t.deadline = time.Now().Add(retryWindow)
	close(t.stop)
	t.wg.Wait()
}

func (t *traffic) stopped() bool {
	select {
	case <-t.stop:
		return true
	default:
		return false
	}
}

// client issues operations with unique written values, and now and then
// a put under the request ID of one of its acknowledged puts and CAS
// calls, or a repeat of one. A reused ID's call is followed by a repeat of
// the call whose ID it reused, which finds whether the refusal left that
// call's answer alone.
func (t *traffic) client(id int, rng *rand.Rand) {
	defer t.wg.Done()
	keys := t.keys.all()
	last := map[string]string{} // the value this client last saw per key
	var written []op            // this client's acknowledged puts and CAS calls
	var reused *op              // the call whose ID the last operation reused
	for seq := 0; !t.stopped(); seq++ {
		key := keys[rng.IntN(len(keys))]
		o := op{Client: id, Key: key, Method: api.MethodGet, ID: fmt.Sprintf("c%d-%d", id, seq)}
		r := rng.Float64()
		switch {
		case reused != nil:
			o = repeatOf(*reused)
			reused = nil
		case r < reuseShare && len(written) > 0:
			earlier := written[rng.IntN(len(written))]
			o.Key, o.Method, o.Arg, o.ID, o.Reused = earlier.Key, api.MethodPut, fmt.Sprintf("v%d.%d", id, seq), earlier.ID, true
			reused = &earlier
		case r < 2*reuseShare && len(written) > 0:
			o = repeatOf(written[rng.IntN(len(written))])
		case t.keys.isCounter(key):
			if r < 0.7 {
				o.Method = api.MethodInc
			}
		case r < 0.4:
			o.Method, o.Arg = api.MethodPut, fmt.Sprintf("v%d.%d", id, seq)
		case r < 0.6:
			o.Method, o.Old, o.Arg = api.MethodCAS, last[key], fmt.Sprintf("v%d.%d", id, seq)
		}
		o = t.run(o, rng)
		switch {
		case o.Unknown || o.Kind != api.KindOK:
		case o.Method == api.MethodGet:
			last[key] = o.Out
		case !o.Reused && !o.Repeat && !t.keys.isCounter(o.Key):
			written = append(written, o)
		}
	}
}

// repeatOf is acknowledged call earlier sent again (op.Repeat).
func repeatOf(earlier op) op {
	return op{Client: earlier.Client, ID: earlier.ID, Key: earlier.Key, Method: earlier.Method, Arg: earlier.Arg, Old: earlier.Old, Repeat: true, Want: earlier.Out}
}

// run performs o through random running nodes, retrying with its request
// ID while the outcome is unknown, until the traffic stopped and its
// deadline passed.
func (t *traffic) run(o op, rng *rand.Rand) op {
	req := api.CallRequest{Key: o.Key, Method: o.Method, Payload: o.Arg, RequestID: o.ID, Timeout: attemptTimeout}
	if o.Method == api.MethodCAS {
		req.Payload = string(api.CASPayload(o.Old, o.Arg))
	}
	o.Call = t.h.now()
	for {
		nodes := t.c.running()
		if len(nodes) == 0 {
			time.Sleep(50 * time.Millisecond) // every node is being restarted
			continue
		}
		from := t.h.now()
		res := t.c.call(nodes[rng.IntN(len(nodes))], req)
		o.Attempts++
		if res.Definite() {
			o.Return, o.Kind, o.Out = t.h.now(), res.Kind, res.Body
			t.h.add(o)
			return o
		}
		t.h.outage(from, t.h.now())
		time.Sleep(20 * time.Millisecond) // pacing, so a refused dial does not spin
		if t.stopped() && time.Now().After(t.deadline) {
			o.Kind, o.Unknown, o.Out = res.Kind, true, strings.TrimSpace(res.Error)
			o.Return = t.h.now()
			t.h.add(o)
			return o
		}
	}
}
