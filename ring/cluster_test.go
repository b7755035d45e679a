package ring

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testFP is the fingerprint of the test clusters.
var testFP = Fingerprint{Cluster: "test", Partitions: DefaultPartitions, RF: 3, PlacementVersion: PlacementVersion}

// testConfig is a node on loopback, a free port, the local preset and a short
// push/pull interval.
func testConfig(name string, seeds ...string) Config {
	return Config{
		Name:             name,
		BindAddr:         "127.0.0.1",
		RPCAddr:          "rpc-" + name,
		Fingerprint:      testFP,
		Seeds:            seeds,
		Preset:           PresetLocal,
		PushPullInterval: 200 * time.Millisecond,
	}
}

// start creates a ring from cfg, closes it at cleanup, and joins its seeds.
func start(t *testing.T, cfg Config) *Ring {
	t.Helper()
	r, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.Join(ctx))
	return r
}

// startCluster starts n nodes named a, b, c, ... seeded with the first.
func startCluster(t *testing.T, n int) []*Ring {
	t.Helper()
	rs := []*Ring{start(t, testConfig("a"))}
	for i := 1; i < n; i++ {
		rs = append(rs, start(t, testConfig(string(rune('a'+i)), rs[0].GossipAddr())))
	}
	return rs
}

// waitTable waits, on r's Changed channel, until cond holds for r's table,
// and returns that table; it fails the test after timeout.
func waitTable(t *testing.T, r *Ring, timeout time.Duration, what string, cond func(*Table) bool) *Table {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ch := r.Changed()
		if tbl := r.Table(); cond(tbl) {
			return tbl
		}
		select {
		case <-ch:
		case <-deadline.C:
			require.FailNowf(t, "timed out", "%s: waiting %v for %s; table has %v", r.LocalName(), timeout, what, r.Table().Members)
		}
	}
}

// hasMembers returns a condition: the table's members are exactly names.
func hasMembers(names ...string) func(*Table) bool {
	return func(tbl *Table) bool {
		got := make([]string, len(tbl.Members))
		for i, m := range tbl.Members {
			got[i] = m.Name
		}
		return slices.Equal(got, names)
	}
}

// recordingDelegate is a Delegate whose state is a fixed byte string and
// which forwards what it receives to channels without blocking.
type recordingDelegate struct {
	state  []byte
	merged chan []byte
	msgs   chan []byte
}

func newRecordingDelegate(state string) *recordingDelegate {
	return &recordingDelegate{state: []byte(state), merged: make(chan []byte, 256), msgs: make(chan []byte, 256)}
}

func (d *recordingDelegate) LocalState() []byte { return d.state }

func (d *recordingDelegate) MergeRemoteState(buf []byte) {
	select {
	case d.merged <- buf:
	default:
	}
}

func (d *recordingDelegate) NotifyMsg(msg []byte) {
	select {
	case d.msgs <- msg:
	default:
	}
}

// receive waits until ch yields want, skipping other values.
func receive(t *testing.T, ch <-chan []byte, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case got := <-ch:
			if string(got) == want {
				return
			}
		case <-deadline.C:
			require.FailNowf(t, "timed out", "waiting %v for %q", timeout, want)
		}
	}
}

// warnRecorder is a slog.Handler that hands the attributes of each Warn
// record (and its message, as "msg") to a channel, without blocking.
type warnRecorder struct{ warns chan map[string]string }

func newWarnRecorder() *warnRecorder { return &warnRecorder{warns: make(chan map[string]string, 256)} }

func (h *warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnRecorder) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	select {
	case h.warns <- m:
	default:
	}
	return nil
}

func (h *warnRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *warnRecorder) WithGroup(string) slog.Handler { return h }

// receive waits until a warning with exactly the attributes want is logged.
func (h *warnRecorder) receive(t *testing.T, want map[string]string, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case got := <-h.warns:
			if maps.Equal(got, want) {
				return
			}
		case <-deadline.C:
			require.FailNowf(t, "timed out", "waiting %v for warning %v", timeout, want)
		}
	}
}
