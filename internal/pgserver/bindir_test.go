package pgserver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeBinDir creates dir with empty executable files of the given names.
func fakeBinDir(t *testing.T, dir string, names ...string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, n := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), nil, 0o755))
	}
	return dir
}

func TestBinDirFindsInitdbOnPath(t *testing.T) {
	bin := fakeBinDir(t, t.TempDir(), "initdb", "postgres")
	t.Setenv("PATH", bin)
	got, err := findBinDir([]string{filepath.Join(t.TempDir(), "*")})
	require.NoError(t, err)
	require.Equal(t, bin, got)
}

func TestBinDirPrefersTheNewestVersion(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	root := t.TempDir()
	fakeBinDir(t, filepath.Join(root, "14", "bin"), "initdb", "postgres")
	newest := fakeBinDir(t, filepath.Join(root, "16", "bin"), "initdb", "postgres")
	got, err := findBinDir([]string{filepath.Join(root, "*", "bin")})
	require.NoError(t, err)
	require.Equal(t, newest, got)
}

func TestBinDirNeedsPostgresNextToInitdb(t *testing.T) {
	t.Setenv("PATH", fakeBinDir(t, t.TempDir(), "initdb"))
	root := t.TempDir()
	complete := fakeBinDir(t, filepath.Join(root, "15", "bin"), "initdb", "postgres")
	fakeBinDir(t, filepath.Join(root, "16", "bin"), "initdb")
	got, err := findBinDir([]string{filepath.Join(root, "*", "bin")})
	require.NoError(t, err)
	require.Equal(t, complete, got, "directories without postgres are passed over")
}

func TestBinDirReportsNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findBinDir([]string{filepath.Join(t.TempDir(), "*", "bin")})
	require.ErrorIs(t, err, ErrNotInstalled)
	require.ErrorContains(t, err, "apt-get install postgresql")
}

func TestStartReportsNotInstalledForABinDirWithoutTheServer(t *testing.T) {
	bin := fakeBinDir(t, t.TempDir(), "initdb")
	_, err := Start(t.Context(), t.TempDir(), Config{BinDir: bin})
	require.ErrorIs(t, err, ErrNotInstalled)
	require.ErrorContains(t, err, bin)
}
