package ring

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDuplicateNameIsLogged starts a second node named b while b runs.
// memberlist keeps the b it knew and ignores the other, so the second
// node's gossip goes nowhere, silently: the members must log it at Warn,
// naming both addresses, or the operator never learns why the node does
// not show up.
func TestDuplicateNameIsLogged(t *testing.T) {
	rec, a, b := startWatchedPair(t)

	dup, err := New(testConfig("b", a.GossipAddr()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dup.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = dup.Join(ctx) // memberlist reports nothing to the joiner

	rec.receive(t, map[string]string{
		"msg":        "ring: two nodes claim one name; keeping the known one",
		"node":       "b",
		"addr":       b.GossipAddr(),
		"other_addr": dup.GossipAddr(),
	}, 5*time.Second)
}
