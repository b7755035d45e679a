package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/singlewriter/singlewriter/internal/testhook"
	"github.com/singlewriter/singlewriter/router"
)

func TestOrderStateMachineAndFencedPausedWriter(t *testing.T) {
	var out bytes.Buffer
	o, err := run(&out)
	require.NoError(t, err, out.String())

	t.Run("transitions run on the owner from every entry node", func(t *testing.T) {
		require.Len(t, o.steps, len(script))
		owner := map[string]string{}
		for i, r := range o.steps {
			if i > 0 && o.steps[i-1].key == r.key {
				require.NotEqual(t, o.steps[i-1].entered, r.entered, "step %d enters another node", i)
			}
			if r.err != nil {
				continue
			}
			want := map[string]string{"create": "created", "pay": "paid", "ship": "shipped"}[r.method]
			require.Equal(t, want, r.after.Status, "step %d: %s %s", i, r.method, r.key)
			if owner[r.key] == "" {
				owner[r.key] = r.after.Node
			}
			require.Equal(t, owner[r.key], r.after.Node, "every write of %s on its one owner", r.key)
		}
		for _, k := range []string{"order-1", "order-2", "order-3"} {
			require.Equal(t, "shipped", last(o.steps, k).after.Status, k)
		}
	})

	t.Run("invalid transitions are refused and write nothing", func(t *testing.T) {
		var refused []string
		for _, r := range o.steps {
			if r.err == nil {
				continue
			}
			require.ErrorIs(t, r.err, router.ErrHandler)
			require.Equal(t, r.before, r.after, "a refused %s on %s wrote nothing", r.method, r.key)
			refused = append(refused, r.method+" "+r.key+": "+r.before.Status)
		}
		require.Equal(t, []string{"ship order-2: created", "pay order-3: paid"}, refused)
		require.Contains(t, out.String(), "cannot ship order-2: it is created, not paid")
		require.Contains(t, out.String(), "cannot pay order-3: it is paid, not created")
	})

	t.Run("the paused writer is fenced and the new owner's state stays", func(t *testing.T) {
		f := o.fenced
		require.ErrorIs(t, f.err, router.ErrStaleEpoch)
		require.NotZero(t, f.drainTimeouts, "the old owner's drain gave up on the paused call")
		require.Equal(t, "paid", f.paused.Status)
		require.Equal(t, "node-3", f.retried.Node, "the retry ran on the joined node")
		require.Greater(t, f.retried.Epoch, f.paused.Epoch, "at a higher epoch")
		require.Equal(t, "shipped", f.final.Status)
		require.Equal(t, "node-3", f.final.Node)
		require.Equal(t, f.retried.Epoch, f.final.Epoch)
		require.Contains(t, out.String(), "refused.\n     router: write refused, the partition moved to a newer epoch")
	})
}

// TestPausedWriterWithoutFencingIsAcknowledged is the control: with the
// store's epoch check switched off, the paused handler's write is
// acknowledged although the order it was computed from is gone, and the
// check above must see it, or it proves nothing.
func TestPausedWriterWithoutFencingIsAcknowledged(t *testing.T) {
	testhook.DisableFencing(t)
	var out bytes.Buffer
	o, err := run(&out)
	require.ErrorContains(t, err, "the paused write was not fenced", out.String())
	require.NoError(t, o.fenced.err, "the paused write is acknowledged")
	require.Equal(t, "shipped", o.fenced.final.Status, "... and yet it is not in the order: an acknowledged write was lost")
}

// last returns the last step on key.
func last(steps []stepResult, key string) stepResult {
	var r stepResult
	for _, s := range steps {
		if s.key == key {
			r = s
		}
	}
	return r
}
