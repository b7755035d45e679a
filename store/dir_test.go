package store

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordSyncDir makes syncDir record the directories it syncs, for the
// test's duration.
func recordSyncDir(t *testing.T) func() []string {
	var mu sync.Mutex
	var synced []string
	orig := syncDir
	syncDir = func(dir string) error {
		mu.Lock()
		synced = append(synced, filepath.Clean(dir))
		mu.Unlock()
		return orig(dir)
	}
	t.Cleanup(func() { syncDir = orig })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), synced...)
	}
}

// A store opened in a directory that does not exist yet makes it durable:
// the parent of every directory it creates is synced, and the directory
// itself once its files exist. So is the parent of a directory made by
// someone else before the store's first start. Once the store's files
// exist, Open syncs no directory, and NoSync syncs none.
func TestOpenSyncsTheEntriesOfTheDirectoriesItCreates(t *testing.T) {
	synced := recordSyncDir(t)
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b")
	s, err := Open(Config{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Subset(t, synced(), []string{root, filepath.Join(root, "a"), dir})

	before := len(synced())
	s, err = Open(Config{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Empty(t, synced()[before:], "the store's files existed")

	made := filepath.Join(root, "made")
	require.NoError(t, os.Mkdir(made, 0o700))
	before = len(synced())
	s, err = Open(Config{Dir: made})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Contains(t, synced()[before:], root, "a first start in a directory made just before")

	before = len(synced())
	s, err = Open(Config{Dir: filepath.Join(root, "c"), NoSync: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Empty(t, synced()[before:])
}

// parentDir takes the last element off a path as written, as os.MkdirAll
// does, without cleaning it.
func TestParentDirKeepsThePathAsWritten(t *testing.T) {
	for path, want := range map[string]string{
		"data":            ".",
		"./data":          ".",
		"/a":              "/",
		"/a/b":            "/a",
		"/a/b/":           "/a",
		"a//b":            "a",
		"/x/link/../new":  "/x/link/..",
		"/x/link/../new/": "/x/link/..",
	} {
		require.Equal(t, filepath.FromSlash(want), parentDir(filepath.FromSlash(path)), path)
	}
}
