package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/singlewriter/singlewriter/internal/proc"
	"github.com/singlewriter/singlewriter/internal/robustness/api"
)

// The ports every node uses on its own IP.
const (
	gossipPort = 7946
	rpcPort    = 7947
	httpPort   = 7948
	// partitions is the cluster's partition count: fewer than the default
	// 271, so that a node's start and a move take less time.
	partitions = 64
)

// cluster is a set of node processes on loopback IPs prefix.10,
// prefix.11, ... with their data directories under dir.
type cluster struct {
	dir    string
	bin    string
	prefix string
	seed   uint64
	rf     int
	http   *http.Client

	// mu guards nodes and retired.
	mu    sync.Mutex
	nodes []*node
	// retired holds the last status of every process that exited: its
	// counters are gone with it, its audit stays in its data directory.
	retired []api.Status
}

// node is one node: its identity and, while it runs, its process.
type node struct {
	name, ip, dir string
	// cmd is the running process, nil when stopped; exited is closed when
	// it exits.
	cmd    *exec.Cmd
	exited chan struct{}
	// stopped is set while the process is SIGSTOPped.
	stopped bool
}

// newCluster returns a cluster with no nodes, on a random /24 of
// 127.0.0.0/8 so that concurrent runs never share an address.
func newCluster(dir, bin string, seed uint64, rf int) *cluster {
	return &cluster{
		dir:    dir,
		bin:    bin,
		rf:     max(rf, 1),
		prefix: fmt.Sprintf("127.%d.%d.", 20+rand.N(230), rand.N(256)),
		seed:   seed,
		http:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
	}
}

// add defines a new node and starts it, seeded with the nodes defined so
// far; the first one bootstraps.
func (c *cluster) add(ctx context.Context) (*node, error) {
	c.mu.Lock()
	i := len(c.nodes)
	n := &node{name: fmt.Sprintf("n%d", i), ip: fmt.Sprintf("%s%d", c.prefix, 10+i)}
	n.dir = filepath.Join(c.dir, n.name)
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	return n, c.start(ctx, n, i == 0)
}

// ipOf returns the IP node i has or will have.
func (c *cluster) ipOf(i int) string { return fmt.Sprintf("%s%d", c.prefix, 10+i) }

// all returns the nodes defined.
func (c *cluster) all() []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*node(nil), c.nodes...)
}

// running returns the nodes whose process runs (stopped or not).
func (c *cluster) running() []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*node
	for _, n := range c.nodes {
		if n.cmd != nil {
			out = append(out, n)
		}
	}
	return out
}

// start runs n's process and waits until it prints READY.
func (c *cluster) start(ctx context.Context, n *node, bootstrap bool) error {
	var seeds []string
	for _, o := range c.all() {
		if o != n {
			seeds = append(seeds, fmt.Sprintf("%s:%d", o.ip, gossipPort))
		}
	}
	log, err := os.OpenFile(filepath.Join(c.dir, n.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, "-name", n.name, "-ip", n.ip, "-dir", n.dir,
		"-gossip-port", fmt.Sprint(gossipPort), "-rpc-port", fmt.Sprint(rpcPort), "-http-port", fmt.Sprint(httpPort),
		"-seeds", strings.Join(seeds, ","), fmt.Sprintf("-bootstrap=%v", bootstrap),
		"-partitions", fmt.Sprint(partitions), "-seed", fmt.Sprint(c.seed), "-rf", fmt.Sprint(c.rf))
	cmd.Stderr = log
	// Killed with the harness, even while paused (SIGKILL ends a stopped
	// process too).
	cmd.SysProcAttr = proc.SysProcAttr(nil)
	out, err := cmd.StdoutPipe()
	if err != nil {
		log.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	ready := make(chan bool, 1)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if !ok && sc.Text() == "READY" {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		cmd.Wait()
		log.Close()
		close(exited)
	}()
	c.mu.Lock()
	n.cmd, n.exited, n.stopped = cmd, exited, false
	c.mu.Unlock()
	select {
	case ok := <-ready:
		if !ok {
			c.reap(n)
			return fmt.Errorf("%s exited before it was ready (see %s.log)", n.name, n.name)
		}
		return nil
	case <-ctx.Done():
		c.kill(n)
		return fmt.Errorf("%s not ready: %w", n.name, ctx.Err())
	}
}

// reap waits for n's process to exit and forgets it.
func (c *cluster) reap(n *node) {
	<-n.exited
	c.mu.Lock()
	n.cmd = nil
	c.mu.Unlock()
}

// retire records n's last status before its process goes away.
func (c *cluster) retire(st api.Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retired = append(c.retired, st)
}

// kill SIGKILLs n (a crash), after recording its status if it answers.
func (c *cluster) kill(n *node) {
	if n.cmd == nil {
		return
	}
	if st, err := c.status(n, time.Second); err == nil {
		c.retire(st)
	}
	n.cmd.Process.Signal(syscall.SIGKILL)
	c.reap(n)
}

// terminate SIGTERMs n: it closes cleanly without handing off.
func (c *cluster) terminate(n *node) {
	if n.cmd == nil {
		return
	}
	if st, err := c.status(n, time.Second); err == nil {
		c.retire(st)
	}
	if n.stopped {
		c.cont(n)
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	c.reap(n)
}

// leave asks n to leave gracefully and waits for its process to exit.
func (c *cluster) leave(n *node) error {
	var st api.Status
	err := c.post(n, "/leave", nil, &st, 30*time.Second)
	if err == nil {
		c.retire(st)
	}
	c.reap(n)
	return err
}

// stop SIGSTOPs n: the whole process pauses.
func (c *cluster) stop(n *node) {
	n.cmd.Process.Signal(syscall.SIGSTOP)
	c.mu.Lock()
	n.stopped = true
	c.mu.Unlock()
}

// cont SIGCONTs n.
func (c *cluster) cont(n *node) {
	n.cmd.Process.Signal(syscall.SIGCONT)
	c.mu.Lock()
	n.stopped = false
	c.mu.Unlock()
}

// close kills every process.
func (c *cluster) close() {
	for _, n := range c.running() {
		n.cmd.Process.Signal(syscall.SIGKILL)
		n.cmd.Process.Signal(syscall.SIGCONT)
		c.reap(n)
	}
}

// post sends a JSON request to n's API and decodes the reply into out
// (unless nil).
func (c *cluster) post(n *node, path string, in, out any, timeout time.Duration) error {
	var body io.Reader = http.NoBody
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	return c.do(n, http.MethodPost, path, body, out, timeout)
}

func (c *cluster) do(n *node, method, path string, body io.Reader, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://%s:%d%s", n.ip, httpPort, path), body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s on %s: %s: %s", method, path, n.name, resp.Status, bytes.TrimSpace(msg))
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// status returns n's status.
func (c *cluster) status(n *node, timeout time.Duration) (api.Status, error) {
	var st api.Status
	err := c.do(n, http.MethodGet, "/status", http.NoBody, &st, timeout)
	return st, err
}

// call runs one call through n; a failed HTTP exchange is an unknown
// outcome.
func (c *cluster) call(n *node, req api.CallRequest) api.CallResult {
	var res api.CallResult
	if err := c.post(n, "/call", req, &res, req.Timeout+2*time.Second); err != nil {
		return api.CallResult{Kind: api.KindOther, Error: err.Error()}
	}
	return res
}

// fault applies f on n.
func (c *cluster) fault(n *node, f api.Fault) error {
	return c.post(n, "/fault", f, nil, 5*time.Second)
}

// pause arms n's handler pause.
func (c *cluster) pause(n *node, p api.Pause) error {
	return c.post(n, "/pause-handlers", p, nil, 5*time.Second)
}

// bites sums the bite counters (api.Status.Bit) of every process: the
// last status of those that exited, and a fresh one of those running (one
// that does not answer within a second counts nothing, so call it when
// none is paused).
func (c *cluster) bites() uint64 {
	var n uint64
	for _, st := range c.retiredStatuses() {
		n += st.Bit()
	}
	for _, nd := range c.running() {
		if st, err := c.status(nd, time.Second); err == nil {
			n += st.Bit()
		}
	}
	return n
}

// retiredStatuses returns the last statuses of the processes that exited.
func (c *cluster) retiredStatuses() []api.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]api.Status(nil), c.retired...)
}
