package router

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/store"
)

func TestBadCallsGetClearErrors(t *testing.T) {
	c := newTestCluster(t, 2, func(n *Node) { n.Handle("inc", counter); n.Handle("get", get) })
	n := c.nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := n.Call(ctx, []byte("k"), "no-such-method", nil)
	require.ErrorIs(t, err, ErrUnknownMethod)

	_, err = n.Call(ctx, nil, "inc", nil)
	require.ErrorIs(t, err, ErrEmptyKey)

	// Rejected before sending: even with a context that already ended, the
	// error is about the payload, not about reaching the owner.
	ended, cancelEnded := context.WithCancel(context.Background())
	cancelEnded()
	_, err = n.Call(ended, []byte("k"), "inc", make([]byte, n.cfg.MaxPayload+1))
	require.ErrorIs(t, err, ErrPayloadTooLarge)

	_, err = n.Call(ended, bytes.Repeat([]byte("k"), store.MaxKeySize+1), "inc", nil)
	require.ErrorIs(t, err, ErrKeyTooLarge)

	_, err = n.Call(ended, []byte("k"), "inc", nil, RequestID(make([]byte, MaxRequestIDSize+1)))
	require.ErrorIs(t, err, ErrRequestIDTooLarge)

	// A partition out of range is served by nobody and has no audit.
	for _, p := range []int{-1, n.cfg.Partitions} {
		_, ok := n.Serving(p)
		require.False(t, ok)
		_, ok = n.Owner(p)
		require.False(t, ok)
		_, err = n.Audit(p)
		require.ErrorContains(t, err, "out of range")
	}

	// Nothing above wrote anything.
	v, err := n.Call(ctx, []byte("k"), "get", nil)
	require.NoError(t, err)
	require.Nil(t, v)

	// An empty request ID is no request ID: each call runs.
	for want := range uint64(2) {
		v, err = n.Call(ctx, []byte("k"), "inc", nil, RequestID([]byte{}))
		require.NoError(t, err)
		require.Equal(t, want+1, binary.BigEndian.Uint64(v))
	}
}

// With replicas, a write the store refuses as invalid must not break the
// partition's order of batches: the owner keeps serving its claim, and the
// next call of the partition commits at the same epoch. Call refuses such
// a key up front; a node with other limits could still send one, so the
// test enters at the owner's execute.
func TestInvalidWriteLeavesThePartitionServing(t *testing.T) {
	c := newTestCluster(t, 3, func(n *Node) { n.Handle("inc", counter) })
	n := c.nodes[0]
	bad := bytes.Repeat([]byte("k"), store.MaxKeySize+1)
	p := n.Partition(bad)
	cl, _ := n.Owner(p)
	o := c.node(cl.Owner)
	good := keyInPartition(o, p, "good")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := o.Call(ctx, good, "inc", nil)
	require.NoError(t, err)
	before, ok := o.Serving(p)
	require.True(t, ok)

	r := o.execute(ctx, callRequest{ID: newRequestID(time.Now()), Key: bad, Method: "inc"})
	require.Equal(t, statusInvalid, r.Status, "%s", r.Body)

	r = o.execute(ctx, callRequest{ID: newRequestID(time.Now()), Key: good, Method: "inc"})
	require.Equal(t, statusOK, r.Status, "a good call after a refused one failed: %s", r.Body)
	after, ok := o.Serving(p)
	require.True(t, ok)
	require.Equal(t, before.Epoch, after.Epoch, "the refused write made the partition change claims")
}

func TestHandlerErrorWritesNothing(t *testing.T) {
	c := newTestCluster(t, 1, func(n *Node) {
		n.Handle("get", get)
		n.Handle("fail", func(_ context.Context, req *Request) ([]byte, error) {
			req.State.Put([]byte("must not be written"))
			return nil, errors.New("card declined")
		})
		n.Handle("panic", func(_ context.Context, req *Request) ([]byte, error) {
			req.State.Put([]byte("must not be written"))
			panic("bug")
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := c.nodes[0]
	_, err := n.Call(ctx, []byte("k"), "fail", nil)
	require.ErrorIs(t, err, ErrHandler)
	require.ErrorContains(t, err, "card declined")
	_, err = n.Call(ctx, []byte("k"), "panic", nil)
	require.ErrorIs(t, err, ErrHandler)
	v, err := n.Call(ctx, []byte("k"), "get", nil)
	require.NoError(t, err)
	require.Nil(t, v)
}

// A result too large for a message between nodes used to be committed on
// the owner and then never reach its replica: the call hung until its
// context ended, with the write on one node only.
func TestResultAboveMaxPayloadWritesNothing(t *testing.T) {
	c := newTestCluster(t, 2, func(n *Node) {
		n.Handle("get", get)
		n.Handle("put", func(_ context.Context, req *Request) ([]byte, error) {
			req.State.Put(make([]byte, len(req.Payload)*1024))
			return nil, nil
		})
		n.Handle("reply", func(_ context.Context, req *Request) ([]byte, error) {
			req.State.Put([]byte("must not be written"))
			return make([]byte, 2<<20), nil
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := c.nodes[0]
	limit := n.cfg.MaxPayload
	require.Equal(t, 1<<20, limit, "the default")

	// At the limit: written and replicated (both nodes hold every
	// partition).
	_, err := n.Call(ctx, []byte("k"), "put", make([]byte, limit/1024))
	require.NoError(t, err)

	_, err = n.Call(ctx, []byte("k"), "put", make([]byte, 2*limit/1024))
	require.ErrorIs(t, err, ErrResultTooLarge)
	_, err = n.Call(ctx, []byte("k"), "reply", nil)
	require.ErrorIs(t, err, ErrResultTooLarge)

	for _, entry := range c.nodes {
		v, err := entry.Call(ctx, []byte("k"), "get", nil)
		require.NoError(t, err)
		require.Len(t, v, limit, "the value written at the limit, from %s", entry.Name())
	}
}

func TestGarbageOnRPCPortDropsConnectionAndNodeKeepsServing(t *testing.T) {
	c := newTestCluster(t, 2, func(n *Node) { n.Handle("inc", counter) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, garbage := range [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		{0xff, 0xff, 0xff, 0xff, 1, 2, 3},
		bytes.Repeat([]byte{0}, 64),
	} {
		conn, err := net.Dial("tcp", c.nodes[1].server.Addr().String())
		require.NoError(t, err)
		_, err = conn.Write(garbage)
		require.NoError(t, err)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1024))
		for err == nil { // the server may answer a refusal first; then it hangs up
			_, err = conn.Read(make([]byte, 1024))
		}
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "connection not dropped: %v", err)
		conn.Close()
	}
	for i := range 20 {
		_, err := c.nodes[0].Call(ctx, fmt.Appendf(nil, "k%d", i), "inc", nil)
		require.NoError(t, err)
	}
}

// logBuffer collects a node's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestNodeOfAnotherClusterPartitionCountMaxPayloadOrSecretIsRefused(t *testing.T) {
	var logs logBuffer
	c := &testCluster{t: t, dir: t.TempDir(), setup: func(n *Node) { n.Handle("inc", counter) }}
	cfg := c.config("n0", true)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c.start(cfg)
	c.add("n1", false)
	c.waitConverged()

	for _, mutate := range []func(*Config){
		func(cfg *Config) { cfg.Cluster = "other" },
		func(cfg *Config) { cfg.Partitions = 64 },
		func(cfg *Config) { cfg.MaxPayload = 2 << 20 },                   // a result one node commits must fit the other's frames
		func(cfg *Config) { cfg.SecretKey = []byte("0123456789abcdef") }, // the cluster has no key
	} {
		cfg := c.config("intruder", false)
		cfg.DataDir = t.TempDir()
		mutate(&cfg)
		n, err := New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = n.Start(ctx)
		cancel()
		require.Error(t, err, "the intruder must not join")
		n.Close()
	}
	require.Contains(t, logs.String(), "intruder", "the refusals by fingerprint are logged with the node's name")
	for _, n := range c.live() {
		require.ElementsMatch(t, []string{"n0", "n1"}, n.Members())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.nodes[1].Call(ctx, []byte("k"), "inc", nil)
	require.NoError(t, err)
}

// TestSecondProcessOnSameDataDirFails opens a node's data directory from a
// second OS process while the first holds it.
func TestSecondProcessOnSameDataDirFails(t *testing.T) {
	if dir := os.Getenv("SINGLEWRITER_OPEN_DIR"); dir != "" {
		_, err := New(Config{Name: "second", DataDir: dir})
		if errors.Is(err, store.ErrLocked) {
			fmt.Println("LOCKED:", err)
			return
		}
		fmt.Println("UNEXPECTED:", err)
		return
	}
	dir := filepath.Join(t.TempDir(), "data")
	n, err := New(Config{Name: "first", DataDir: dir, Bootstrap: true})
	require.NoError(t, err)
	defer n.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondProcessOnSameDataDirFails$")
	cmd.Env = append(os.Environ(), "SINGLEWRITER_OPEN_DIR="+dir)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "LOCKED:", "%s", out)
	require.Contains(t, string(out), dir, "the error names the path")
	require.Less(t, time.Since(start), 30*time.Second, "no hang")
}
