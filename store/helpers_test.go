package store

import (
	"context"
	"testing"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/stretchr/testify/require"
)

// openTest opens a store without fsync in a fresh directory and closes it
// when the test ends.
func openTest(t testing.TB) *Store {
	t.Helper()
	return openDir(t, t.TempDir())
}

// openDir opens a store without fsync in dir and closes it when the test
// ends.
func openDir(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(Config{Dir: dir, NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// put commits one write of key=value to partition p at epoch e.
func put(ctx context.Context, s *Store, p int, e epoch.Epoch, key, value string) error {
	return s.Commit(ctx, &Batch{Partition: p, Epoch: e, Writes: []KV{{Key: []byte(key), Value: []byte(value)}}})
}

// requireValue asserts that key holds value in partition p.
func requireValue(t testing.TB, s *Store, p int, key, value string) {
	t.Helper()
	v, ok, err := s.Get(p, []byte(key))
	require.NoError(t, err)
	require.True(t, ok, "key %q absent", key)
	require.Equal(t, value, string(v))
}

// requireAbsent asserts that key is absent from partition p.
func requireAbsent(t testing.TB, s *Store, p int, key string) {
	t.Helper()
	_, ok, err := s.Get(p, []byte(key))
	require.NoError(t, err)
	require.False(t, ok, "key %q present", key)
}

// choose records c as chosen, not final, and returns only the error.
func choose(ctx context.Context, s *Store, p int, c Claim) error {
	_, err := s.Choose(ctx, p, c, false)
	return err
}

// install copies entries into partition p as a receiver does: staged in a
// Copy (in one Add), then installed at e and pos; discarded on failure.
func install(ctx context.Context, s *Store, p int, e epoch.Epoch, entries []Entry, pos Position) error {
	m, err := s.Meta(p)
	if err != nil {
		return err
	}
	c, err := s.NewCopy(p, m.Position)
	if err != nil {
		return err
	}
	defer c.Discard()
	if err := c.Add(ctx, entries); err != nil {
		return err
	}
	return c.Install(ctx, e, pos)
}
