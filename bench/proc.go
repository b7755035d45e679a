package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/singlewriter/singlewriter/internal/proc"
)

// process is an external server the bench started.
type process struct{ *proc.Process }

// startProcess starts bin with args, logging to logFile, in its own
// process group (so a Ctrl-C on the terminal reaches the bench, which
// then stops it in order) and killed by the kernel if the bench dies. If
// cred is non-nil the process runs as that user. The process is stopped
// by the cleanup stack.
func startProcess(cl *cleanups, name, bin string, args []string, logFile string, cred *syscall.Credential, stopSig syscall.Signal) (*process, error) {
	p, err := proc.Start(proc.Config{Name: name, Path: bin, Args: args, LogFile: logFile, Credential: cred, StopSignal: stopSig})
	if err != nil {
		return nil, err
	}
	cl.push(name, p.Stop)
	return &process{p}, nil
}

// stop asks the process to shut down and kills its group if it has not
// exited after proc.StopTimeout.
func (p *process) stop() error { return p.Stop() }

// waitReady calls ready until it succeeds, the process exits, or
// proc.ReadyTimeout passes; the error names the process's log file (the
// logFile argument, which proc already knows).
func waitReady(ctx context.Context, p *process, logFile string, ready func(context.Context) error) error {
	return p.WaitReady(ctx, ready)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) { return proc.FreePort() }

// findBinary returns the path of the first of names found on PATH or
// in dirs (glob patterns), or an error.
func findBinary(name string, dirs ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(d, name))
		for i := len(matches) - 1; i >= 0; i-- { // the newest version sorts last
			if st, err := os.Stat(matches[i]); err == nil && st.Mode()&0o111 != 0 {
				return matches[i], nil
			}
		}
	}
	return "", fmt.Errorf("%s not found", name)
}
