// Package pgserver starts a private PostgreSQL server: initdb in a
// directory, postgres on a free 127.0.0.1 port with trust authentication,
// stopped by Close. The benchmark and the examples use it; it needs no
// database driver, so it only checks that the server accepts a session
// (with the protocol's startup exchange) and leaves queries to the caller.
//
//	srv, err := pgserver.Start(ctx, dir, pgserver.Config{})
//	if errors.Is(err, pgserver.ErrNotInstalled) { ... tell the user to install PostgreSQL }
//	if err != nil { ... }
//	defer srv.Close()
//	conn, err := pgx.Connect(ctx, srv.DSN())
//
// PostgreSQL refuses to run as root: a root process runs initdb and
// postgres as Config.OSUser, who must be able to reach dir (a directory
// made by os.MkdirTemp needs mode 0711).
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/singlewriter/singlewriter/internal/proc"
)

// ErrNotInstalled is returned by BinDir and Start when the PostgreSQL
// server programs (initdb and postgres) are not found.
var ErrNotInstalled = errors.New("pgserver: PostgreSQL server programs (initdb, postgres) not found on PATH or in the usual directories; install them (Debian, Ubuntu: apt-get install postgresql)")

// Config configures Start. The zero Config is ready to use.
type Config struct {
	// BinDir holds initdb and postgres. Zero means BinDir().
	BinDir string
	// User is the database superuser initdb creates; DSN connects as it.
	// Zero means "postgres".
	User string
	// OSUser is the operating system user that runs initdb and postgres
	// when the calling process is root; it is ignored otherwise. Zero
	// means "postgres", the user distribution packages create.
	OSUser string
	// Settings are server settings, each "name=value", passed to postgres
	// with -c after pgserver's listen_addresses=127.0.0.1.
	Settings []string
}

// Server is a running PostgreSQL server.
type Server struct {
	addr string
	user string
	p    *proc.Process
}

// Start creates a database cluster under dir/data with initdb and starts
// postgres on it, logging to dir/postgres.log, with its Unix socket in
// dir. dir is created if missing. It returns once the server accepts a
// session as cfg.User, and stops the server if that does not happen within
// proc.ReadyTimeout or before ctx ends.
func Start(ctx context.Context, dir string, cfg Config) (*Server, error) {
	if cfg.BinDir == "" {
		d, err := BinDir()
		if err != nil {
			return nil, err
		}
		cfg.BinDir = d
	} else if !hasServer(cfg.BinDir) {
		return nil, fmt.Errorf("%w (looked in %s)", ErrNotInstalled, cfg.BinDir)
	}
	if cfg.User == "" {
		cfg.User = "postgres"
	}
	if cfg.OSUser == "" {
		cfg.OSUser = "postgres"
	}
	cred, err := unprivileged(cfg.OSUser)
	if err != nil {
		return nil, err
	}
	if err := makeDir(dir, cred); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(cfg.BinDir, "initdb"), "-D", data, "-U", cfg.User, "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = proc.SysProcAttr(cred)
	// If ctx ends, kill initdb's whole group: it runs postgres children.
	initdb.Cancel = func() error { return syscall.Kill(-initdb.Process.Pid, syscall.SIGKILL) }
	if out, err := initdb.CombinedOutput(); err != nil {
		hint := ""
		if cred != nil {
			hint = fmt.Sprintf("\n(this process is root, so initdb ran as %q: every directory above %s must be searchable by it, e.g. mode 0711)", cfg.OSUser, dir)
		}
		return nil, fmt.Errorf("pgserver: initdb: %w\n%s%s", err, out, hint)
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1"}
	for _, s := range cfg.Settings {
		args = append(args, "-c", s)
	}
	p, err := proc.Start(proc.Config{
		Name:       "postgres",
		Path:       filepath.Join(cfg.BinDir, "postgres"),
		Args:       args,
		LogFile:    filepath.Join(dir, "postgres.log"),
		Credential: cred,
		StopSignal: syscall.SIGINT, // fast shutdown: roll back sessions, checkpoint, exit
	})
	if err != nil {
		return nil, err
	}
	s := &Server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), user: cfg.User, p: p}
	err = p.WaitReady(ctx, func(ctx context.Context) error {
		_, err := session(ctx, s.addr, s.user)
		return err
	})
	if err != nil {
		p.Stop()
		return nil, err
	}
	return s, nil
}

// DSN is the server's connection URL: cfg.User on database "postgres"
// over TCP, without TLS.
func (s *Server) DSN() string {
	u := url.URL{Scheme: "postgres", User: url.User(s.user), Host: s.addr, Path: "/postgres", RawQuery: "sslmode=disable"}
	return u.String()
}

// Close stops the server (a fast shutdown: open sessions are rolled back)
// and waits for it to exit. The data directory stays. It is idempotent.
func (s *Server) Close() error { return s.p.Stop() }

// makeDir creates dir and, if the server runs as cred, gives it to that
// user.
func makeDir(dir string, cred *syscall.Credential) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if cred == nil {
		return nil
	}
	return os.Chown(dir, int(cred.Uid), int(cred.Gid))
}
