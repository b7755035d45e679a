package main

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/singlewriter/singlewriter/internal/robustness/api"
	"github.com/singlewriter/singlewriter/router"
)

// pauser makes write handlers sleep after computing their write: a pause of
// one goroutine inside its critical section, like a long GC pause. A
// partition that moves meanwhile (its drain times out) fences the write.
type pauser struct {
	// mu guards armed, sleep and untilMoved.
	mu sync.Mutex
	// armed holds the keys whose next write pauses.
	armed      map[string]bool
	sleep      time.Duration
	untilMoved bool
	// now and total count handlers paused now and since start.
	now, total atomic.Int64
}

// arm makes the next write handler of each of the keys pause as p says.
func (p *pauser) arm(pause api.Pause) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sleep, p.untilMoved = pause.Sleep, pause.UntilMoved
	p.armed = map[string]bool{}
	for _, k := range pause.Keys {
		p.armed[k] = true
	}
}

// maybePause pauses req's handler on n if its key's next write is to
// pause.
func (p *pauser) maybePause(n *router.Node, req *router.Request) {
	p.mu.Lock()
	armed, d, untilMoved := p.armed[string(req.Key)], p.sleep, p.untilMoved
	delete(p.armed, string(req.Key))
	p.mu.Unlock()
	if !armed {
		return
	}
	p.now.Add(1)
	p.total.Add(1)
	defer p.now.Add(-1)
	// The caller's ctx is ignored on purpose: a paused goroutine does not
	// notice that its caller gave up.
	if !untilMoved {
		time.Sleep(d)
		return
	}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		if c, ok := n.Owner(req.Partition); ok && c.Epoch > req.Epoch {
			return
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
}

// register installs the register and counter handlers on n.
func register(n *router.Node, p *pauser) {
	n.Handle(api.MethodGet, func(_ context.Context, req *router.Request) ([]byte, error) {
		v, _ := req.State.Get()
		return v, nil
	})
	n.Handle(api.MethodPut, func(_ context.Context, req *router.Request) ([]byte, error) {
		req.State.Put(req.Payload)
		p.maybePause(n, req)
		return append([]byte("ok "), req.Payload...), nil
	})
	n.Handle(api.MethodCAS, func(_ context.Context, req *router.Request) ([]byte, error) {
		old, next := api.ParseCAS(req.Payload)
		v, _ := req.State.Get()
		if string(v) != old {
			return []byte("0"), nil
		}
		req.State.Put([]byte(next))
		p.maybePause(n, req)
		return []byte("1"), nil
	})
	n.Handle(api.MethodInc, func(_ context.Context, req *router.Request) ([]byte, error) {
		v, _ := req.State.Get()
		c, _ := strconv.ParseUint(string(v), 10, 64)
		out := strconv.AppendUint(nil, c+1, 10)
		req.State.Put(out)
		p.maybePause(n, req)
		return out, nil
	})
}
