package pgserver

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// serverDir returns a directory for a server that the unprivileged user
// PostgreSQL runs as under root can reach.
func serverDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgserver-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o711))
	return dir
}

func TestServerAcceptsSessionsUntilClosed(t *testing.T) {
	if _, err := BinDir(); errors.Is(err, ErrNotInstalled) {
		t.Skip("PostgreSQL is not installed (apt-get install postgresql); skipping the test that starts a server")
	}
	srv, err := Start(t.Context(), serverDir(t), Config{User: "tester", Settings: []string{"application_name=pgserver-test"}})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	require.Equal(t, "postgres://tester@"+srv.addr+"/postgres?sslmode=disable", srv.DSN())

	params, err := session(t.Context(), srv.addr, "tester")
	require.NoError(t, err)
	require.Equal(t, "tester", params["session_authorization"], "initdb created the configured user")
	require.Equal(t, "pgserver-test", params["application_name"], "Config.Settings reached the server")

	_, err = session(t.Context(), srv.addr, "nobody")
	require.ErrorContains(t, err, "28000", "an unknown role is refused: the session check is real")

	require.NoError(t, srv.Close())
	require.Error(t, srv.p.Alive(), "Close waited for postgres to exit")
	_, err = session(t.Context(), srv.addr, "tester")
	require.Error(t, err, "nothing listens after Close")
	require.NoError(t, srv.Close(), "Close is idempotent")
}
