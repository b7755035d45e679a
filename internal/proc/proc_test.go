package proc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// helperEnv makes the test binary act as a server program: "serve" prints
// "ready", waits for SIGINT and prints "interrupted"; "fail" exits 3.
const helperEnv = "PROC_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "serve":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT)
		fmt.Println("ready")
		<-sig
		fmt.Println("interrupted")
		os.Exit(0)
	case "fail":
		fmt.Println("cannot start")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// startHelper starts the test binary in the given helper mode.
func startHelper(t *testing.T, mode string) (*Process, string) {
	t.Helper()
	t.Setenv(helperEnv, mode)
	log := filepath.Join(t.TempDir(), "helper.log")
	p, err := Start(Config{Name: "helper", Path: os.Args[0], LogFile: log, StopSignal: syscall.SIGINT})
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop() })
	return p, log
}

// logSays returns a probe that succeeds once the log contains s.
func logSays(log, s string) func(context.Context) error {
	return func(context.Context) error {
		b, err := os.ReadFile(log)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), s) {
			return fmt.Errorf("log has no %q yet", s)
		}
		return nil
	}
}

func TestStopSendsTheStopSignalAndWaitsForExit(t *testing.T) {
	p, log := startHelper(t, "serve")
	require.NoError(t, p.WaitReady(t.Context(), logSays(log, "ready")))
	require.NoError(t, p.Alive())

	require.NoError(t, p.Stop())
	require.NoError(t, p.Stop(), "Stop is idempotent")
	require.ErrorContains(t, p.Alive(), "exited")
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	require.Contains(t, string(b), "interrupted", "the process got StopSignal, not a kill")
}

func TestWaitReadyReportsAnExitedProcess(t *testing.T) {
	p, log := startHelper(t, "fail")
	err := p.WaitReady(t.Context(), logSays(log, "ready"))
	require.ErrorContains(t, err, "helper exited: exit status 3")
	require.ErrorContains(t, err, log, "the error names the log file")
}

func TestStartRejectsAMissingProgram(t *testing.T) {
	_, err := Start(Config{Name: "nothing", Path: filepath.Join(t.TempDir(), "missing"), LogFile: filepath.Join(t.TempDir(), "log")})
	require.ErrorContains(t, err, "start nothing")
}

func TestFreePortIsBindable(t *testing.T) {
	port, err := FreePort()
	require.NoError(t, err)
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	l.Close()
}
