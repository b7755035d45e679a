package store

import (
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
// itself once its files exist. An existing directory's parent is left
// alone, and NoSync syncs nothing.
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
	require.NotContains(t, synced()[before:], filepath.Join(root, "a"), "the directory existed")

	before = len(synced())
	s, err = Open(Config{Dir: filepath.Join(root, "c"), NoSync: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Empty(t, synced()[before:])
}
