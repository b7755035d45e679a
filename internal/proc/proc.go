// Package proc runs external server programs (PostgreSQL, Redis) for the
// benchmark, examples and tests: each in its own process group, so a
// Ctrl-C on the terminal reaches only the Go program, which then stops
// its servers in order; killed by the kernel if the Go program dies
// (Linux); logging to a file.
//
//	p, err := proc.Start(proc.Config{Name: "redis-server", Path: bin, Args: args, LogFile: log})
//	if err != nil { ... }
//	defer p.Stop()
//	if err := p.WaitReady(ctx, ping); err != nil { ... }
//
// Goroutines: one per process, waiting for it to exit; it ends when the
// process does, which Stop waits for.
package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Config describes a server process.
type Config struct {
	// Name names the process in errors. Required.
	Name string
	// Path is the program's path. Required.
	Path string
	// Args are its arguments.
	Args []string
	// LogFile receives its stdout and stderr; it is created or truncated.
	// Required.
	LogFile string
	// Credential, if set, runs the process as that user (the caller must
	// be root).
	Credential *syscall.Credential
	// StopSignal asks the program to shut down cleanly. Zero means
	// SIGTERM.
	StopSignal syscall.Signal
}

// StopTimeout is how long Stop waits after StopSignal before it kills the
// process group.
const StopTimeout = 10 * time.Second

// ReadyTimeout bounds WaitReady.
const ReadyTimeout = 30 * time.Second

// readyPoll is WaitReady's interval between probes.
const readyPoll = 50 * time.Millisecond

// Process is a running server process.
type Process struct {
	cfg  Config
	cmd  *exec.Cmd
	once sync.Once
	// exited is closed when the process has exited; err is then its exit
	// status.
	exited  chan struct{}
	err     error
	stopErr error
}

// Start starts the program described by cfg.
func Start(cfg Config) (*Process, error) {
	if cfg.Name == "" || cfg.Path == "" || cfg.LogFile == "" {
		return nil, errors.New("proc: Config.Name, Path and LogFile are required")
	}
	if cfg.StopSignal == 0 {
		cfg.StopSignal = syscall.SIGTERM
	}
	log, err := os.Create(cfg.LogFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = SysProcAttr(cfg.Credential)
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("proc: start %s: %w", cfg.Name, err)
	}
	p := &Process{cfg: cfg, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.exited)
	}()
	return p, nil
}

// SysProcAttr returns the attributes Start gives a process: its own
// process group, killed with its parent where the system supports it, and
// run as cred if cred is not nil. Use it for helper commands (initdb) too.
func SysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	dieWithParent(a)
	return a
}

// Stop sends StopSignal and waits for the process to exit; after
// StopTimeout it kills the process group and returns an error saying so.
// It is idempotent.
func (p *Process) Stop() error {
	p.once.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		syscall.Kill(p.cmd.Process.Pid, p.cfg.StopSignal)
		select {
		case <-p.exited:
			return
		case <-time.After(StopTimeout):
		}
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		p.stopErr = fmt.Errorf("proc: %s did not stop within %v; killed", p.cfg.Name, StopTimeout)
	})
	return p.stopErr
}

// Alive returns nil while the process runs, and an error with its exit
// status once it has exited.
func (p *Process) Alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("proc: %s exited: %v", p.cfg.Name, p.err)
	default:
		return nil
	}
}

// WaitReady calls ready until it succeeds, the process exits, ctx ends or
// ReadyTimeout passes. Its errors name the log file.
func (p *Process) WaitReady(ctx context.Context, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		if aerr := p.Alive(); aerr != nil {
			return fmt.Errorf("%w (see %s)", aerr, p.cfg.LogFile)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("proc: %s not ready: %w (last error: %v; see %s)", p.cfg.Name, ctx.Err(), err, p.cfg.LogFile)
		case <-p.exited:
		case <-t.C:
		}
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for
// a server's command line.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
