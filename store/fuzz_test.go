package store

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/stretchr/testify/require"
)

// FuzzEpochCheck replays a random interleaving of promises and writes on one
// partition of a real store and checks the fence against a model kept in
// the test: a write is applied if and only if its epoch is at or above the
// highest promise made before it (in submission order), and the promise
// never decreases.
//
// Each op is two bytes: a first byte of 0xf0 or more waits for the writes
// submitted so far and reopens the store without flushing, so that the
// reopened store replays its WAL; otherwise an even first byte promises the
// epoch in the second byte (mod 16), an odd one submits a write at that
// epoch. Writes are submitted without waiting, so that they share group
// commits with each other and with the promise queued after them.
func FuzzEpochCheck(f *testing.F) {
	f.Add([]byte{1, 0, 0, 5, 1, 3, 1, 5, 1, 6, 0, 6, 1, 5, 0, 9, 1, 9})
	f.Add([]byte{0, 2, 0, 2, 0, 1, 1, 1, 1, 2, 1, 3})
	f.Add([]byte{1, 3, 1, 4, 0xff, 0, 1, 3, 1, 5, 0xf0, 0, 0, 5, 1, 5, 0xff, 0, 1, 4, 1, 6})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 256 {
			ops = ops[:256]
		}
		ctx := context.Background()
		dir := t.TempDir()
		s := openNoFlush(t, dir)
		const p = 0

		type write struct {
			key      []byte
			e        epoch.Epoch
			promised epoch.Epoch // the model's promise when it was submitted
			pending  *Pending
		}
		var (
			writes   []write
			promised epoch.Epoch // the model: highest promise, raised by applied writes
			applied  uint64
			last     Position
			seen     epoch.Epoch // highest Meta.Promised observed
		)
		observe := func(m Meta) {
			require.GreaterOrEqual(t, m.Promised, seen, "Meta.Promised decreased")
			seen = m.Promised
		}
		for i := 0; i+1 < len(ops); i += 2 {
			e := epoch.Epoch(ops[i+1] % 16)
			if ops[i] >= 0xf0 {
				for _, w := range writes {
					<-w.pending.Done()
				}
				require.NoError(t, s.Close())
				s = openNoFlush(t, dir)
				m, err := s.Meta(p)
				require.NoError(t, err)
				require.Equal(t, last, m.Position, "the reopened store lost or invented a write")
				observe(m)
				continue
			}
			if ops[i]%2 == 0 {
				m, err := s.Promise(ctx, p, e)
				if e > promised {
					require.NoError(t, err, "promise %d above %d refused", e, promised)
					promised = e
				} else {
					require.ErrorIs(t, err, epoch.ErrStale, "promise %d at or below %d made", e, promised)
				}
				require.Equal(t, promised, m.Promised)
				observe(m)
				continue
			}
			key := binary.BigEndian.AppendUint32([]byte("w"), uint32(i))
			w := write{key: key, e: e, promised: promised}
			w.pending = s.Submit(&Batch{Partition: p, Epoch: e, Writes: []KV{{Key: key, Value: []byte{byte(e)}}}})
			if e >= promised {
				promised = e
				applied++
				last = Position{Epoch: e, LSN: applied}
			}
			writes = append(writes, w)
		}
		for _, w := range writes {
			err := w.pending.Wait(ctx)
			_, present, getErr := s.Get(p, w.key)
			require.NoError(t, getErr)
			if w.e < w.promised {
				require.ErrorIs(t, err, epoch.ErrStale, "write at %d below promise %d", w.e, w.promised)
				require.False(t, present, "write at %d below promise %d was applied", w.e, w.promised)
			} else {
				require.NoError(t, err)
				require.True(t, present)
			}
		}
		m, err := s.Meta(p)
		require.NoError(t, err)
		observe(m)
		require.Equal(t, promised, m.Promised)
		require.Equal(t, last, m.Position)
	})
}
