package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/singlewriter/singlewriter/internal/faultnet"
	"github.com/singlewriter/singlewriter/internal/robustness/api"
	"github.com/singlewriter/singlewriter/router"
)

// control serves the HTTP API of package api.
type control struct {
	node  *router.Node
	net   *faultnet.Net
	pause *pauser
	// partitions is the cluster's partition count.
	partitions int
	// left is closed once POST /leave has left the cluster.
	left chan struct{}
}

func (c *control) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST /call", c.call)
	m.HandleFunc("POST /fault", c.fault)
	m.HandleFunc("POST /pause-handlers", c.pauseHandlers)
	m.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) { reply(w, c.status()) })
	m.HandleFunc("POST /leave", c.leave)
	return m
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func (c *control) call(w http.ResponseWriter, r *http.Request) {
	var req api.CallRequest
	if !decode(w, r, &req) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), req.Timeout)
	defer cancel()
	body, err := c.node.Call(ctx, []byte(req.Key), req.Method, []byte(req.Payload), router.RequestID([]byte(req.RequestID)))
	res := api.CallResult{Kind: api.KindOK, Body: string(body)}
	if err != nil {
		res = api.CallResult{Kind: kind(err), Error: err.Error()}
	}
	reply(w, res)
}

// kind classifies a Call error.
func kind(err error) string {
	switch {
	case errors.Is(err, router.ErrStaleEpoch):
		return api.KindFenced
	case errors.Is(err, router.ErrHandler):
		return api.KindHandler
	case errors.Is(err, router.ErrRequestIDReused):
		return api.KindReused
	case errors.Is(err, router.ErrUnavailable):
		return api.KindUnavailable
	}
	return api.KindOther
}

func (c *control) fault(w http.ResponseWriter, r *http.Request) {
	var f api.Fault
	if !decode(w, r, &f) {
		return
	}
	switch f.Op {
	case api.FaultBlock, api.FaultUnblock:
		for _, s := range f.IPs {
			ip := net.ParseIP(s)
			if ip == nil {
				http.Error(w, "bad IP "+s, http.StatusBadRequest)
				return
			}
			if f.Op == api.FaultBlock {
				c.net.Block(ip)
			} else {
				c.net.Unblock(ip)
			}
		}
	case api.FaultHeal:
		c.net.Heal()
	case api.FaultDelay:
		c.net.SetDelay(f.Delay)
	case api.FaultDrop:
		c.net.SetDrop(f.Drop)
	default:
		http.Error(w, "unknown fault "+f.Op, http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *control) pauseHandlers(w http.ResponseWriter, r *http.Request) {
	var p api.Pause
	if !decode(w, r, &p) {
		return
	}
	c.pause.arm(p)
	w.WriteHeader(http.StatusNoContent)
}

// status reports the node's view; partitions whose audit cannot be read
// are left out.
func (c *control) status() api.Status {
	n := c.node
	st := api.Status{
		Name: n.Name(), Members: n.Members(), Settled: n.Settled(), Serving: map[int]uint64{}, Audit: map[int][]api.Claim{},
		Stats: n.Stats(), Paused: c.pause.now.Load(), PausedTotal: c.pause.total.Load(),
	}
	for p := range c.partitions {
		cl, _ := n.Owner(p)
		st.Claims = append(st.Claims, api.Claim{Owner: cl.Owner, Epoch: uint64(cl.Epoch)})
		if s, ok := n.Serving(p); ok {
			st.Serving[p] = uint64(s.Epoch)
		}
		records, _ := n.Audit(p)
		for _, a := range records {
			st.Audit[p] = append(st.Audit[p], api.Claim{Owner: a.Owner, Epoch: uint64(a.Epoch), At: a.At})
		}
	}
	return st
}

func (c *control) leave(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	st := c.status()
	err := c.node.Leave(ctx)
	st.Stats = c.node.Stats()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	} else {
		reply(w, st)
	}
	close(c.left)
}
