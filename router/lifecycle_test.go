package router

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// libraryGoroutines lists the running goroutines that are in this module's
// code or memberlist's.
func libraryGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "singlewriter/") && !strings.Contains(g, "testing.tRunner") ||
			strings.Contains(g, "hashicorp/memberlist") {
			found = append(found, g)
		}
	}
	return found
}

func TestCloseLeavesNoGoroutineRunning(t *testing.T) {
	c := &testCluster{t: t, dir: t.TempDir(), setup: func(n *Node) { n.Handle("inc", counter) }}
	c.add("n0", true)
	c.add("n1", false)
	c.waitConverged()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 50 {
		_, err := c.nodes[i%2].Call(ctx, fmt.Appendf(nil, "k%d", i), "inc", nil)
		require.NoError(t, err)
	}
	require.NotEmpty(t, libraryGoroutines())
	require.NoError(t, c.nodes[1].Leave(ctx))
	require.NoError(t, c.nodes[0].Close())
	require.NoError(t, c.nodes[0].Close(), "Close is idempotent")
	_, err := c.nodes[0].Call(ctx, []byte("k"), "inc", nil)
	require.ErrorIs(t, err, ErrClosed)
	waitFor(t, 10*time.Second, func() error {
		if left := libraryGoroutines(); len(left) > 0 {
			return fmt.Errorf("%d goroutines left, first:\n%s", len(left), left[0])
		}
		return nil
	})
}

// A handler serving a call made on its own node runs under the caller's
// context; Close must end it too, or Close waits for a caller that may
// never cancel.
func TestCloseEndsTheHandlerOfACallMadeOnTheSameNode(t *testing.T) {
	started := make(chan struct{})
	c := &testCluster{t: t, dir: t.TempDir(), setup: func(n *Node) {
		n.Handle("wait", func(ctx context.Context, _ *Request) ([]byte, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		})
	}}
	n := c.add("n0", true)
	c.waitConverged()
	// The caller never cancels; the test does, only to end a failed run.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	called := make(chan error, 1)
	go func() {
		_, err := n.Call(ctx, []byte("k"), "wait", nil)
		called <- err
	}()
	<-started
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("Close did not return: it waits for the handler of a call made on this node")
	}
	require.Error(t, <-called)
}

// A call that passed Call's closed check just before Close, and reaches
// execute only after Close waited for the node's goroutines, is refused
// there: it must not start its key's worker after that wait.
func TestCallReachingExecuteAfterCloseStartsNoWorker(t *testing.T) {
	c := &testCluster{t: t, dir: t.TempDir(), setup: func(n *Node) { n.Handle("inc", counter) }}
	n := c.add("n0", true)
	c.waitConverged()
	require.NoError(t, n.Close())

	r := n.execute(context.Background(), callRequest{ID: []byte("id"), Key: []byte("k"), Method: "inc"})
	require.Equal(t, statusUnavailable, r.Status)
	require.Equal(t, ErrClosed.Error(), string(r.Body), "the call reached the key's worker")
	pe := n.exec.parts[n.Partition([]byte("k"))]
	pe.mu.Lock()
	defer pe.mu.Unlock()
	require.Empty(t, pe.queues)
}

// A node that was closed, or whose Start failed (which closes it), says so
// when started again, instead of only that Start ran before.
func TestStartAfterCloseOrAFailedStartReturnsErrClosed(t *testing.T) {
	c := &testCluster{t: t, dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	started := c.add("n0", true)
	require.NoError(t, started.Close())
	require.ErrorIs(t, started.Start(ctx), ErrClosed, "Start after Start and Close")

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	cfg := c.config("n1", false)
	cfg.RPCAddr = busy.Addr().String()
	failed, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { failed.Close() })
	err = failed.Start(ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrClosed, "the first Start failed on its address")
	require.ErrorIs(t, failed.Start(ctx), ErrClosed, "Start after a failed Start")
}
