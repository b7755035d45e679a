package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// process is an external server the bench started.
type process struct {
	name string
	cmd  *exec.Cmd
	// stopSig is the signal that asks the server for a clean shutdown.
	stopSig syscall.Signal
	exited  chan struct{}
	err     error
}

// startProcess starts bin with args, logging to logFile, in its own
// process group (so a Ctrl-C on the terminal reaches the bench, which
// then stops it in order) and killed by the kernel if the bench dies. If
// cred is non-nil the process runs as that user. The process is stopped
// by the cleanup stack.
func startProcess(cl *cleanups, name, bin string, args []string, logFile string, cred *syscall.Credential, stopSig syscall.Signal) (*process, error) {
	log, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, stopSig: stopSig, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.exited)
	}()
	cl.push(name, p.stop)
	return p, nil
}

// stop asks the process to shut down and kills its group if it has not
// exited after 10 seconds.
func (p *process) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	syscall.Kill(p.cmd.Process.Pid, p.stopSig)
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return fmt.Errorf("%s did not stop within 10s; killed", p.name)
}

// alive reports an error if the process has exited.
func (p *process) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v", p.name, p.err)
	default:
		return nil
	}
}

// waitReady calls ready until it succeeds, the process exits, or 30
// seconds pass; logFile is quoted in the error.
func waitReady(ctx context.Context, p *process, logFile string, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		if aerr := p.alive(); aerr != nil {
			return fmt.Errorf("%w (see %s)", aerr, logFile)
		}
		if serr := sleepCtx(ctx, 50*time.Millisecond); serr != nil {
			return fmt.Errorf("%s not ready: %w (last error: %v)", p.name, serr, err)
		}
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

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

// unprivileged returns the credential of user name when the bench runs as
// root (PostgreSQL refuses to), nil otherwise.
func unprivileged(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("running as root needs a %q user to run the server", name), err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
