package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// killChildEnv names the data directory of the child process of
// TestKill9LosesNoAcknowledgedBatch; the test runs as the child when it is
// set.
const killChildEnv = "STORE_KILL_CHILD_DIR"

// killPartitions is how many partitions the child writes, one writer each,
// so that the i-th acknowledged batch of a partition has LSN i.
const killPartitions = 4

// TestKill9LosesNoAcknowledgedBatch is the durability claim, kill -9: a
// child process (this test binary again) commits batches with real
// fdatasync, printing each one it sees acknowledged, and is SIGKILLed
// mid-stream; the parent reopens the directory and finds every
// acknowledged batch, and for each partition exactly a prefix of the
// batches (no hole, nothing after the position). Each round continues
// from the previous round's state, so later rounds also replay a WAL
// reused after flushes. The child flushes often (small FlushBytes, short
// FlushInterval) so that kills also land during flushes.
func TestKill9LosesNoAcknowledgedBatch(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	for round := range 3 {
		acked := runKilledChild(t, dir, 150+100*round)
		s, err := Open(Config{Dir: dir})
		require.NoError(t, err)
		for p := range killPartitions {
			m, err := s.Meta(p)
			require.NoError(t, err)
			require.GreaterOrEqual(t, m.Position.LSN, acked[p], "round %d partition %d: an acknowledged batch was lost", round, p)
			for i := uint64(1); i <= m.Position.LSN; i++ {
				key := fmt.Sprintf("k%d", i)
				requireValue(t, s, p, key, string(killValue(i)))
				requireResponse(t, s, p, fmt.Sprint("r", i), key)
			}
			requireAbsent(t, s, p, fmt.Sprintf("k%d", m.Position.LSN+1))
		}
		require.NoError(t, s.Close())
		t.Logf("round %d: acknowledged LSNs %v survived kill -9", round, acked)
	}
}

// runKilledChild starts the child on dir, kills it with SIGKILL once it has
// acknowledged about kill batches, and returns the highest acknowledged
// LSN of each partition.
func runKilledChild(t *testing.T, dir string, kill int) [killPartitions]uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9LosesNoAcknowledgedBatch$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var acked [killPartitions]uint64
	n := 0
	deadline := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer deadline.Stop()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var p int
		var lsn uint64
		if _, err := fmt.Sscanf(sc.Text(), "ack %d %d", &p, &lsn); err != nil {
			continue // the test framework's own output
		}
		acked[p] = max(acked[p], lsn)
		if n++; n == kill {
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		}
	}
	err = cmd.Wait()
	require.Error(t, err, "the child must die of the signal")
	require.GreaterOrEqual(t, n, kill, "the child stopped before the kill")
	return acked
}

// killChild is the child: one writer per partition commits batches
// (key k<lsn> = killValue(lsn), request r<lsn>, response k<lsn>) and
// prints "ack <partition> <lsn>" after each acknowledgment, until it is
// killed.
func killChild(t *testing.T, dir string) {
	s, err := Open(Config{Dir: dir, FlushBytes: 16 << 10, FlushInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	ctx := context.Background()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := range killPartitions {
		wg.Go(func() {
			m, err := s.Meta(p)
			if err != nil {
				panic(err)
			}
			for lsn := m.Position.LSN + 1; lsn < m.Position.LSN+100_000; lsn++ {
				key := fmt.Appendf(nil, "k%d", lsn)
				err := s.Commit(ctx, &Batch{Partition: p, Writes: []KV{{Key: key, Value: killValue(lsn)}},
					RequestID: fmt.Appendf(nil, "r%d", lsn), Response: key})
				if err != nil {
					panic(err)
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "ack %d %d\n", p, lsn)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// killValue is the value of batch lsn: k<lsn> repeated to a length between
// a few bytes and three log blocks, so that records start and end at every
// offset of a block and some span several.
func killValue(lsn uint64) []byte {
	key := fmt.Sprintf("k%d", lsn)
	n := 1 + int(lsn*2654435761%(3*walBlock))/len(key)
	return []byte(strings.Repeat(key, n))
}
