package rpc

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireNoLeaks fails the test if, once its cleanups have run, a goroutine
// is still executing code of this package (outside its tests). It is a small
// hand-written goleak: Close waits for every goroutine, but a goroutine that
// has called wg.Done may still be unwinding, hence the bounded wait.
func requireNoLeaks(t *testing.T) {
	t.Cleanup(func() {
		var leaked []string
		require.Eventually(t, func() bool {
			leaked = leakedGoroutines()
			return len(leaked) == 0
		}, 5*time.Second, time.Millisecond, "goroutines left running:\n%s", strings.Join(leaked, "\n\n"))
	})
}

func leakedGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var leaked []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, line := range strings.Split(g, "\n") {
			if strings.Contains(line, "/internal/rpc/") && !strings.Contains(line, "_test.go:") {
				leaked = append(leaked, g)
				break
			}
		}
	}
	return leaked
}

// logBuffer is a slog destination that tests can read while the server
// writes to it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testServer is a server on a loopback port that counts the connections it
// accepted.
type testServer struct {
	*Server
	accepted atomic.Int64
	log      logBuffer
}

// echo answers with the type and the body.
func echo(_ context.Context, typ uint8, body []byte) ([]byte, error) {
	return append([]byte{typ}, body...), nil
}

func listen(t testing.TB) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

// startServer serves h on ln (a fresh loopback port if nil) for cluster
// "test", and closes the server when the test ends.
func startServer(t testing.TB, ln net.Listener, h Handler) *testServer {
	if ln == nil {
		ln = listen(t)
	}
	ts := &testServer{}
	srv, err := Serve(ServerConfig{
		Listener: ln,
		Handler:  h,
		Hello:    Hello{Cluster: "test", Node: "server"},
		Accept: func(h Hello) error {
			if h.Cluster != "test" {
				return fmt.Errorf("cluster %q is not %q", h.Cluster, "test")
			}
			ts.accepted.Add(1)
			return nil
		},
		Logger: ts.log.logger(),
	})
	require.NoError(t, err)
	ts.Server = srv
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	return ts
}

func newClient(t testing.TB, cfg ClientConfig) *Client {
	if cfg.Hello == (Hello{}) {
		cfg.Hello = Hello{Cluster: "test", Node: "client"}
	}
	c := NewClient(cfg)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// goCall runs c.Call with a body of "x" in a goroutine and returns where
// its error arrives.
func goCall(ctx context.Context, c *Client, addr string, typ uint8) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, addr, typ, []byte("x"))
		done <- err
	}()
	return done
}

// waitResult waits for a call's outcome, failing the test if it takes
// implausibly long (a hang, not a timing assumption).
func waitResult(t testing.TB, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("call did not return")
		return nil
	}
}
