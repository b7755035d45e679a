package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/singlewriter/singlewriter/epoch"
)

// openNoFlush opens a store in dir whose memtable is flushed only by slow
// operations and Export: never by size, timer or Close, so that closing it
// leaves acknowledged batches only in the WAL, as a crash would.
func openNoFlush(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(Config{Dir: dir, NoSync: true, noFlush: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// crashImage copies the store's files from dir into a new directory while
// the store may still be open, as a crash would leave them, and returns it.
func crashImage(t testing.TB, dir string) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range []string{fileName, walFileName(0), walFileName(1)} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, name), b, 0o600))
	}
	return dst
}

// requireResponse asserts that requestID's stored response in p is resp.
func requireResponse(t testing.TB, s *Store, p int, requestID, resp string) {
	t.Helper()
	got, ok, err := s.Response(p, []byte(requestID))
	require.NoError(t, err)
	require.True(t, ok, "no response for %q", requestID)
	require.Equal(t, resp, string(got))
}

// commitN commits n batches, one at a time (one WAL record each), to
// partition p at epoch e: key k<i> = v<i> with request r<i>.
func commitN(t testing.TB, s *Store, p int, e epoch.Epoch, n int) {
	t.Helper()
	for i := range n {
		require.NoError(t, s.Commit(context.Background(), &Batch{Partition: p, Epoch: e,
			Writes:    []KV{{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}},
			RequestID: fmt.Appendf(nil, "r%d", i), Response: fmt.Appendf(nil, "resp%d", i)}))
	}
}

func TestAcknowledgedBatchesSurviveCrashBeforeFlush(t *testing.T) {
	dir := t.TempDir()
	s := openNoFlush(t, dir)
	at := time.Unix(1234, 5678)
	s.now = func() time.Time { return at }
	commitN(t, s, 3, 2, 5)
	require.NoError(t, put(context.Background(), s, 4, 1, "other", "x"))
	require.False(t, s.mem.empty(), "the batches are only in the WAL and the memtable")
	want, err := s.Meta(3)
	require.NoError(t, err)

	for name, reopenDir := range map[string]func() string{
		"crash image taken while open": func() string { return crashImage(t, dir) },
		"close without flush":          func() string { require.NoError(t, s.Close()); return dir },
	} {
		r := openDir(t, reopenDir())
		for i := range 5 {
			requireValue(t, r, 3, fmt.Sprint("k", i), fmt.Sprint("v", i))
			requireResponse(t, r, 3, fmt.Sprint("r", i), fmt.Sprint("resp", i))
		}
		requireValue(t, r, 4, "other", "x")
		got, err := r.Meta(3)
		require.NoError(t, err, name)
		require.Equal(t, want, got, name)
		require.Equal(t, Meta{Promised: 2, Position: Position{Epoch: 2, LSN: 5}}, got, name)
		entries, _ := exportAll(t, r, 3, 1<<20)
		require.Len(t, entries, 10, name)
		_, stored, err := decodeResponse(entries[5].Value)
		require.NoError(t, err)
		require.Equal(t, "resp0", string(stored))
		storedAt, _, _ := decodeResponse(entries[5].Value)
		require.True(t, at.Equal(storedAt), "%s: the dedup record keeps its timestamp", name)
		ps, err := r.Partitions()
		require.NoError(t, err)
		require.Equal(t, []int{3, 4}, ps, name)
		require.NoError(t, r.Close())
	}
}

// walTornTail commits three batches, each its own WAL record, closes the
// store without flushing, damages the last record with damage, and
// reopens.
func walTornTail(t *testing.T, damage func(path string, last, end int64)) *Store {
	dir := t.TempDir()
	s := openNoFlush(t, dir)
	commitN(t, s, 0, 1, 2)
	last := s.wals[0].off
	commitN(t, s, 1, 1, 1)
	end := s.wals[0].off
	require.NoError(t, s.Close())
	damage(filepath.Join(dir, walFileName(0)), last, end)
	return openNoFlush(t, dir)
}

func TestTornWALTailIsIgnoredOnReplayAndEarlierRecordsSurvive(t *testing.T) {
	for name, damage := range map[string]func(path string, last, end int64){
		"truncated mid-record": func(path string, last, end int64) {
			require.NoError(t, os.Truncate(path, last+walHeader+3))
		},
		"flipped byte": func(path string, last, end int64) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			defer f.Close()
			b := make([]byte, 1)
			_, err = f.ReadAt(b, end-2)
			require.NoError(t, err)
			b[0] ^= 0x40
			_, err = f.WriteAt(b, end-2)
			require.NoError(t, err)
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := walTornTail(t, damage)
			requireValue(t, s, 0, "k0", "v0")
			requireValue(t, s, 0, "k1", "v1")
			requireAbsent(t, s, 1, "k0")
			m, err := s.Meta(1)
			require.NoError(t, err)
			require.Equal(t, Meta{}, m, "the torn batch left nothing")
			ps, err := s.Partitions()
			require.NoError(t, err)
			require.Equal(t, []int{0}, ps)

			// The log continues after the torn record; a reopen replays
			// the new record and not the stale bytes after it.
			commitN(t, s, 1, 1, 1)
			dir := filepath.Dir(s.wals[0].path)
			require.NoError(t, s.Close())
			s = openNoFlush(t, dir)
			requireValue(t, s, 1, "k0", "v0")
			m, err = s.Meta(1)
			require.NoError(t, err)
			require.Equal(t, Position{Epoch: 1, LSN: 1}, m.Position)
		})
	}
}

func TestWALReplayIsIdempotent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openNoFlush(t, dir)
	commitN(t, s, 0, 1, 3)
	require.NoError(t, s.Close())

	s = openNoFlush(t, dir) // replays records 1-3
	requireValue(t, s, 0, "k2", "v2")
	// Dropping the data after the replay: a second replay of the same
	// records would bring it back.
	require.NoError(t, s.Drop(ctx, 0, 1))
	require.NoError(t, s.Close())

	for range 2 {
		s = openNoFlush(t, dir)
		requireAbsent(t, s, 0, "k2")
		m, err := s.Meta(0)
		require.NoError(t, err)
		require.Equal(t, Meta{Promised: 1}, m)
		require.NoError(t, s.Close())
	}
}

func TestReplayTwiceOfTheSameImageGivesTheSameState(t *testing.T) {
	dir := t.TempDir()
	s := openNoFlush(t, dir)
	commitN(t, s, 0, 1, 4)
	image := crashImage(t, dir)
	for range 2 {
		r := openNoFlush(t, image)
		requireValue(t, r, 0, "k3", "v3")
		m, err := r.Meta(0)
		require.NoError(t, err)
		require.Equal(t, Position{Epoch: 1, LSN: 4}, m.Position)
		require.NoError(t, r.Close())
	}
}

func TestPromiseAfterFastPathBatchesKeepsOrder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openNoFlush(t, dir)
	var before []*Pending
	for i := range 10 {
		before = append(before, s.Submit(&Batch{Partition: 0, Epoch: 4,
			Writes: []KV{{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}}}))
	}
	m, err := s.Promise(ctx, 0, 5)
	require.NoError(t, err)
	require.Equal(t, Meta{Promised: 5, Position: Position{Epoch: 4, LSN: 10}}, m,
		"the promise is decided after every batch submitted before it")
	for _, p := range before {
		require.NoError(t, p.Wait(ctx))
	}
	require.ErrorIs(t, put(ctx, s, 0, 4, "late", "zombie"), epoch.ErrStale)
	require.NoError(t, put(ctx, s, 0, 5, "new", "owner"))

	check := func(s *Store) {
		for i := range 10 {
			requireValue(t, s, 0, fmt.Sprint("k", i), "v")
		}
		requireAbsent(t, s, 0, "late")
		requireValue(t, s, 0, "new", "owner")
		m, err := s.Meta(0)
		require.NoError(t, err)
		require.Equal(t, Meta{Promised: 5, Position: Position{Epoch: 5, LSN: 11}}, m)
	}
	check(s)
	check(openNoFlush(t, crashImage(t, dir)))
	require.NoError(t, s.Close())
	check(openNoFlush(t, dir))
}

func TestReadsSeeTheMemtableBeforeAndAfterFlush(t *testing.T) {
	ctx := context.Background()
	s := openNoFlush(t, t.TempDir())
	// In the file: k=old, gone=x, r1.
	require.NoError(t, s.Commit(ctx, &Batch{Partition: 2, Epoch: 1, RequestID: []byte("r1"), Response: []byte("one"),
		Writes: []KV{{Key: []byte("k"), Value: []byte("old")}, {Key: []byte("gone"), Value: []byte("x")}}}))
	_, err := s.Promise(ctx, 9, 1) // a slow op: flushes
	require.NoError(t, err)
	require.True(t, s.mem.empty())
	// In the memtable: k=new, gone deleted, empty="" and r2.
	require.NoError(t, s.Commit(ctx, &Batch{Partition: 2, Epoch: 1, RequestID: []byte("r2"), Response: []byte("two"),
		Writes: []KV{{Key: []byte("k"), Value: []byte("new")}, {Key: []byte("gone")}, {Key: []byte("empty"), Value: []byte{}}}}))
	require.False(t, s.mem.empty())

	check := func(stage string) {
		requireValue(t, s, 2, "k", "new")
		requireAbsent(t, s, 2, "gone")
		v, ok, err := s.Get(2, []byte("empty"))
		require.NoError(t, err)
		require.True(t, ok, stage)
		require.NotNil(t, v, stage)
		require.Empty(t, v, stage)
		requireResponse(t, s, 2, "r1", "one")
		requireResponse(t, s, 2, "r2", "two")
		m, err := s.Meta(2)
		require.NoError(t, err)
		require.Equal(t, Meta{Promised: 1, Position: Position{Epoch: 1, LSN: 2}}, m, stage)
		ps, err := s.Partitions()
		require.NoError(t, err)
		require.Equal(t, []int{2, 9}, ps, stage)
	}
	check("before flush")
	flushes := s.flushes.Load()
	require.NoError(t, s.enqueue(&op{flush: true, partition: noPartition}).Wait(ctx))
	require.Equal(t, flushes+1, s.flushes.Load())
	require.True(t, s.mem.empty())
	check("after flush")
}

func TestExportAfterFastPathBatchesIncludesThem(t *testing.T) {
	s := openNoFlush(t, t.TempDir())
	fill(t, s, 5, 1, 9)
	require.True(t, s.mem.has(5))
	entries, _ := exportAll(t, s, 5, 1<<20)
	require.Len(t, entries, 9+3)
	require.Equal(t, "key-008", string(entries[8].Key))
	require.Equal(t, KindResponse, entries[9].Kind)
	require.True(t, s.mem.empty(), "Export flushed the memtable")
}

func TestFlushTriggersBySizeAndByTimer(t *testing.T) {
	ctx := context.Background()
	t.Run("size", func(t *testing.T) {
		dir := t.TempDir()
		s, err := Open(Config{Dir: dir, NoSync: true, FlushBytes: 1000, FlushInterval: time.Hour})
		require.NoError(t, err)
		for i := range 50 {
			require.NoError(t, put(ctx, s, i%3, 0, fmt.Sprint("key", i), "some value of a few bytes"))
		}
		for i := range 50 {
			requireValue(t, s, i%3, fmt.Sprint("key", i), "some value of a few bytes")
		}
		require.NoError(t, s.Close())
		// Without size-triggered flushes (the timer is an hour away), file 0
		// would hold all 50 records. How many each file holds depends on how
		// long the background flushes took (records go on into the other
		// file while one runs), so only that bound is certain.
		for i := range 2 {
			data, err := os.ReadFile(filepath.Join(dir, walFileName(i)))
			require.NoError(t, err)
			groups, _, err := scanWAL(data, 0)
			require.NoError(t, err)
			require.Less(t, len(groups), 50, "WAL file %d restarts after each flush", i)
		}
	})
	t.Run("timer", func(t *testing.T) {
		s, err := Open(Config{Dir: t.TempDir(), NoSync: true, FlushInterval: time.Millisecond})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, put(ctx, s, 0, 0, "k", "v"))
		require.Eventually(t, func() bool { return s.flushes.Load() > 0 }, 5*time.Second, time.Millisecond)
		requireValue(t, s, 0, "k", "v")
	})
}

func TestFailedWALWritePoisonsStoreAndLosesNothingAcknowledged(t *testing.T) {
	t.Run("buffered", func(t *testing.T) { failWALWrite(t, true) })
	t.Run("direct", func(t *testing.T) { failWALWrite(t, false) })
}

// failWALWrite fails a WAL write of a store with or without syncs (with
// syncs the log is direct where the file system allows it).
func failWALWrite(t *testing.T, noSync bool) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, NoSync: noSync, noFlush: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	if !noSync {
		requireDirect(t, s.wals[0], dir)
	}
	require.NoError(t, put(ctx, s, 0, 1, "k", "v"))
	require.NoError(t, s.wals[0].f.Close()) // every later write to the log fails (no flush: file 0 stays active)

	err = put(ctx, s, 0, 1, "k2", "v2")
	require.ErrorIs(t, err, ErrFailed)
	require.ErrorIs(t, put(ctx, s, 0, 1, "k3", "v3"), ErrFailed, "a poisoned store refuses every write")
	_, err = s.Promise(ctx, 0, 2)
	require.ErrorIs(t, err, ErrFailed)
	requireValue(t, s, 0, "k", "v") // reads still work
	requireAbsent(t, s, 0, "k2")
	_ = s.Close()

	s = openDir(t, dir)
	requireValue(t, s, 0, "k", "v")
	requireAbsent(t, s, 0, "k2")
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, Meta{Promised: 1, Position: Position{Epoch: 1, LSN: 1}}, m)
}

func TestConcurrentReadsDuringFlushesNeverMissAcknowledgedWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Open(Config{Dir: t.TempDir(), NoSync: true, FlushBytes: 2000})
	require.NoError(t, err)
	defer s.Close()
	// Counted when a flush starts: one may still run when the writers end.
	var flushes atomic.Int32
	s.flushHook = func() { flushes.Add(1) }
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				key := fmt.Sprintf("w%d-%d", w, i)
				if err := put(ctx, s, w, 0, key, key); err != nil {
					t.Error(err)
					return
				}
				v, ok, err := s.Get(w, []byte(key))
				if err != nil || !ok || string(v) != key {
					t.Errorf("acknowledged %s read back as %q %v %v", key, v, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Positive(t, flushes.Load(), "the reads ran beside flushes")
}

func TestScanWALStopsAtStaleFramesOfEarlierRounds(t *testing.T) {
	var log []byte
	for _, seq := range []uint64{8, 9, 5, 6} { // 5 and 6: stale frames of an earlier round
		log = append(log, walRecord(seq)...)
	}
	groups, end, err := scanWAL(log, 7)
	require.NoError(t, err)
	require.Len(t, groups, 2)
	require.Equal(t, uint64(9), groups[1].seq)
	require.Equal(t, 2*len(walRecord(8)), end)

	groups, _, err = scanWAL(log, 8)
	require.NoError(t, err)
	require.Len(t, groups, 1, "records up to applied are skipped")
}

func TestMergeWALsJoinsTheTwoFilesAndRefusesGaps(t *testing.T) {
	scan := func(seqs ...uint64) []walGroup {
		var log []byte
		for _, seq := range seqs {
			log = append(log, walRecord(seq)...)
		}
		groups, _, err := scanWAL(log, 4)
		require.NoError(t, err)
		return groups
	}
	// A crash during a background flush: file 1 holds the frozen records
	// 5..7, file 0 the active ones 8..9 (and stale 2..3 after them).
	groups, err := mergeWALs(4, scan(8, 9, 2, 3), scan(5, 6, 7))
	require.NoError(t, err)
	require.Equal(t, []uint64{5, 6, 7, 8, 9}, seqsOf(groups))

	_, err = mergeWALs(4, scan(8, 9), scan(5, 6))
	require.ErrorIs(t, err, ErrCorrupt, "a missing record 7 cannot come from a crash")
	_, err = mergeWALs(2, scan(5, 6), nil)
	require.ErrorIs(t, err, ErrCorrupt, "a gap after the applied sequence cannot come from a crash")
}

// seqsOf returns the groups' sequence numbers.
func seqsOf(groups []walGroup) []uint64 {
	var seqs []uint64
	for _, g := range groups {
		seqs = append(seqs, g.seq)
	}
	return seqs
}

// A direct log writes whole blocks, each record with the bytes before it
// in its first block and zeros after it in its last. After every append
// the file must hold every record so far, in order, ending where the next
// one goes: records smaller and larger than a block, at every offset in a
// block, and after a reset over the stale frames of the round before.
func TestDirectWALHoldsEveryRecordAcrossBlocks(t *testing.T) {
	dir := t.TempDir()
	w := openDirectWAL(t, dir)
	path := filepath.Join(dir, walFileName(0))
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2 {
		first := uint64(round * 100)
		var want []uint64
		for i := range 40 {
			seq := first + uint64(i) + 1
			value := make([]byte, rng.IntN(3*walBlock))
			for j := range value {
				value[j] = byte(rng.Uint32())
			}
			require.NoError(t, w.append(walRecordOf(w.round, seq, value), false))
			want = append(want, seq)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			groups, end, err := scanWAL(data, first)
			require.NoError(t, err)
			require.Equal(t, want, seqsOf(groups), "round %d", round)
			require.EqualValues(t, w.off, end)
			require.Equal(t, make([]byte, walHeader), data[end:end+walHeader], "no zero header ends the log")
		}
		w.reset()
	}
}

// A direct log copies each record into a block buffer; after a record of
// several mebibytes it keeps one block, not the record's size, and the
// records after it land whole.
func TestDirectWALDropsTheBufferOfALargeRecord(t *testing.T) {
	dir := t.TempDir()
	w := openDirectWAL(t, dir)
	sizes := []int{100, 3 << 20, 10, 5000}
	for i, size := range sizes {
		require.NoError(t, w.append(walRecordOf(w.round, uint64(i+1), bytes.Repeat([]byte{byte(i + 1)}, size)), false))
		require.LessOrEqual(t, len(w.buf), maxKeptRecord, "after a record of %d bytes", size)
	}
	data, err := os.ReadFile(filepath.Join(dir, walFileName(0)))
	require.NoError(t, err)
	groups, _, err := scanWAL(data, 0)
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3, 4}, seqsOf(groups))
}

// A client's value is stored in the log verbatim, so the bytes of an
// earlier round after the log's end can hold anything, a well-formed frame
// included. Here round 2's log ends on the block boundary where round 1
// left a frame inside a value: one with the next sequence number and
// round 1's number (which replay would apply, bypassing every fence), or
// one that does not decode (which would fail every Open with ErrCorrupt).
// Replay must stop before it: at the zero header that every write lays
// after its record, and, where the write was cut before that header (a
// buffered write cut by kill -9 between two pages, a direct one torn by a
// power cut: the block after the record keeps its old bytes), at the
// frame's round, which is not round 2's.
func TestReplayStopsAtTheLogsEndBeforeAFrameHiddenInAStaleValue(t *testing.T) {
	for _, direct := range []bool{false, true} {
		for _, cut := range []bool{false, true} {
			for name, undecodable := range map[string]bool{"next record": false, "undecodable frame": true} {
				t.Run(fmt.Sprintf("%s, direct %v, cut %v", name, direct, cut), func(t *testing.T) {
					dir := t.TempDir()
					w, _, err := openWAL(dir, 0, !direct)
					require.NoError(t, err)
					defer w.close()
					w.reset()
					if direct {
						require.NoError(t, w.useDirect())
						requireDirect(t, w, dir)
					}
					frame := walRecordOf(w.round, 3, nil)
					if undecodable {
						frame = make([]byte, walHeader+3)
						copy(frame[walHeader:], "bad")
						sealFrame(frame)
					}
					value := bytes.Repeat([]byte{0xaa}, 3*walBlock)
					start := bytes.Index(walRecordOf(w.round, 1, value), value)
					copy(value[walBlock-start:], frame)
					require.NoError(t, w.append(walRecordOf(w.round, 1, value), false))
					w.reset()

					path := filepath.Join(dir, walFileName(0))
					before, err := os.ReadFile(path)
					require.NoError(t, err)
					n := walBlock - 64
					for len(walRecordOf(w.round, 2, make([]byte, n))) < walBlock {
						n++
					}
					require.NoError(t, w.append(walRecordOf(w.round, 2, make([]byte, n)), false))
					require.EqualValues(t, walBlock, w.off, "round 2 ends on a block boundary")
					data, err := os.ReadFile(path)
					require.NoError(t, err)
					if cut {
						copy(data[walBlock:2*walBlock], before[walBlock:2*walBlock])
						require.Equal(t, frame, data[walBlock:walBlock+len(frame)])
					} else {
						require.Equal(t, make([]byte, walHeader), data[walBlock:walBlock+walHeader], "no zero header after the record")
					}
					groups, end, err := scanWAL(data, 1)
					require.NoError(t, err)
					require.Equal(t, []uint64{2}, seqsOf(groups))
					require.Equal(t, walBlock, end)
				})
			}
		}
	}
}

// A write cut inside its own record leaves the record's start, round
// included, followed by older bytes. The checksum, CRC-32C, is linear: an
// attacker who knew everything of the record but the round could have
// chosen its earlier value so that the spliced record passes the checksum,
// here with a batch for another partition at a higher epoch. The tag,
// keyed with the round, refuses it.
func TestSplicedRecordThatPassesItsChecksumIsNotReplayed(t *testing.T) {
	group := func(round uint64, partition int, e epoch.Epoch) walGroup {
		return walGroup{round: round, seq: 2, batches: []walBatch{
			{partition: 1, epoch: 1, lsn: 1, writes: []KV{{Key: []byte("k1"), Value: bytes.Repeat([]byte{'x'}, walBlock)}}},
			{partition: partition, epoch: e, lsn: 2, writes: []KV{{Key: []byte("k2"), Value: []byte("vvvv")}}},
		}}
	}
	rec := appendRecord(nil, group(0x5ec12e7, 1, 1), new(tagger)) // what the store wrote
	forged := appendRecord(nil, group(0, 7, 9), new(tagger))      // the attacker's earlier value, of another round
	require.Len(t, forged, len(rec))
	spliced := append(bytes.Clone(rec[:walBlock]), forged[walBlock:]...) // the write cut after its first block
	forgeCRC(spliced[walHeader:], binary.BigEndian.Uint32(rec[4:]), bytes.LastIndex(spliced, []byte("vvvv"))-walHeader)
	require.Equal(t, binary.BigEndian.Uint32(rec[4:]), crc32.Checksum(spliced[walHeader:], castagnoli), "the forgery passes the checksum")

	groups, end, err := scanWAL(append(spliced, make([]byte, walHeader)...), 1)
	require.NoError(t, err)
	require.Equal(t, []uint64(nil), seqsOf(groups), "a spliced record was replayed")
	require.Zero(t, end)
}

// forgeCRC sets p[at:at+4] so that p's CRC-32C is want: the checksum is an
// affine function of those 32 bits, which Gaussian elimination inverts.
func forgeCRC(p []byte, want uint32, at int) {
	clear(p[at : at+4])
	base := crc32.Checksum(p, castagnoli)
	// rows[i]: the checksum's change when bit i flips (low 32 bits), and
	// which bits flip (high 32 bits).
	rows := make([]uint64, 32)
	for i := range rows {
		p[at+i/8] ^= 1 << (i % 8)
		rows[i] = uint64(crc32.Checksum(p, castagnoli)^base) | 1<<(32+i)
		p[at+i/8] ^= 1 << (i % 8)
	}
	for col := range 32 {
		pivot := col + slices.IndexFunc(rows[col:], func(r uint64) bool { return r>>col&1 == 1 })
		rows[col], rows[pivot] = rows[pivot], rows[col]
		for i := range rows {
			if i != col && rows[i]>>col&1 == 1 {
				rows[i] ^= rows[col]
			}
		}
	}
	var flips uint64
	for col := range 32 {
		if (want^base)>>col&1 == 1 {
			flips ^= rows[col]
		}
	}
	for i := range 32 {
		if flips>>(32+i)&1 == 1 {
			p[at+i/8] ^= 1 << (i % 8)
		}
	}
}

// An earlier build's log holds version 1 records, which have no round: the
// first Open after the upgrade replays them, up to a stale frame of an
// earlier round (a lower sequence), as that build did, then clears the log,
// so that no torn write of the next round leaves them at offset 0.
func TestWALOfAnEarlierBuildIsReplayed(t *testing.T) {
	dir := t.TempDir()
	s := openNoFlush(t, dir)
	commitN(t, s, 0, 1, 3)
	require.NoError(t, s.Close())
	path := filepath.Join(dir, walFileName(0))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	groups, end, err := scanWAL(data, 0)
	require.NoError(t, err)
	require.Len(t, groups, 3)
	var log []byte
	for _, g := range append(groups, walGroup{seq: groups[0].seq - 1}) { // the last one stale
		log = append(log, recordOfVersion1(g)...)
	}
	require.Greater(t, len(data), end+len(log))
	require.NoError(t, os.WriteFile(path, append(log, make([]byte, walHeader)...), 0o600))

	s = openNoFlush(t, dir)
	for i := range 3 {
		requireValue(t, s, 0, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i))
	}
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, make([]byte, walHeader), data[:walHeader], "the earlier build's records are left at offset 0")
	m, err := s.Meta(0)
	require.NoError(t, err)
	require.Equal(t, Position{Epoch: 1, LSN: 3}, m.Position)
}

// In a log of version 1 records, which have no round, a frame of another
// version ends the log, like one of another round in a version 2 log:
// whether it does not decode, or is a version 2 record of the next
// sequence.
func TestVersion1LogEndsAtAFrameOfAnotherVersion(t *testing.T) {
	bad := append(make([]byte, walHeader), "bad"...)
	sealFrame(bad)
	for name, frame := range map[string][]byte{"undecodable": bad, "version 2": walRecord(7)} {
		log := append(recordOfVersion1(walGroup{seq: 5}), recordOfVersion1(walGroup{seq: 6})...)
		groups, end, err := scanWAL(append(log, frame...), 4)
		require.NoError(t, err, name)
		require.Equal(t, []uint64{5, 6}, seqsOf(groups), name)
		require.Equal(t, len(log), end, name)
	}
}

// A clean Close leaves both log files empty, ended at offset 0, so that
// a build that reads only earlier record versions can open the directory.
func TestCleanCloseEmptiesTheWAL(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		dir := t.TempDir()
		s, err := Open(Config{Dir: dir, NoSync: noSync, FlushBytes: 1 << 10})
		require.NoError(t, err)
		commitN(t, s, 0, 1, 40) // past FlushBytes: both files were used
		require.NoError(t, s.Close())
		for i := range 2 {
			data, err := os.ReadFile(filepath.Join(dir, walFileName(i)))
			require.NoError(t, err)
			require.Equal(t, make([]byte, walHeader), data[:walHeader], "nosync %v, wal-%d", noSync, i)
		}
		s = openDir(t, dir)
		requireValue(t, s, 0, "k39", "v39")
	}
}

// recordOfVersion1 returns g's record as builds before WAL version 2
// wrote it: version 1, no round and no tag.
func recordOfVersion1(g walGroup) []byte {
	payload := appendRecord(nil, g, new(tagger))[walHeader:]
	frame := append(make([]byte, walHeader), walVersionNoRound)
	frame = append(frame, payload[9:len(payload)-walTag]...)
	sealFrame(frame)
	return frame
}

// openDirectWAL opens log 0 in dir with direct writes, closed at the
// test's end (see requireDirect).
func openDirectWAL(t *testing.T, dir string) *wal {
	t.Helper()
	w, _, err := openWAL(dir, 0, false)
	require.NoError(t, err)
	t.Cleanup(func() { w.close() })
	require.NoError(t, w.useDirect())
	requireDirect(t, w, dir)
	return w
}

// requireDirect skips the test where the file system of dir refuses
// direct writes, and fails it if w does not use them although it allows
// them.
func requireDirect(t *testing.T, w *wal, dir string) {
	t.Helper()
	probe := filepath.Join(dir, "direct-probe")
	require.NoError(t, os.WriteFile(probe, make([]byte, walBlock), 0o600))
	defer os.Remove(probe)
	f, err := openDirect(probe)
	if err == nil {
		_, err = f.WriteAt(alignedBlocks(walBlock), 0)
		f.Close()
	}
	if err != nil {
		t.Skipf("the file system of the test's temporary directory refuses direct writes: %v", err)
	}
	require.NotNil(t, w.direct, "the log does not use direct writes, which the file system allows")
}

// walRecord returns a framed WAL record of sequence seq, in round 0.
func walRecord(seq uint64) []byte { return walRecordOf(0, seq, []byte("v")) }

// walRecordOf returns a framed WAL record of round and sequence seq that
// writes value to one key.
func walRecordOf(round, seq uint64, value []byte) []byte {
	return appendRecord(nil, walGroup{round: round, seq: seq, batches: []walBatch{{partition: 1, epoch: 1, lsn: seq,
		writes: []KV{{Key: []byte("k"), Value: value}}}}}, new(tagger))
}

// FuzzScanWAL feeds arbitrary bytes to the WAL scanner: it must never
// panic, and what it returns must re-encode to frames it accepts again.
func FuzzScanWAL(f *testing.F) {
	f.Add(appendRecord(nil, walGroup{seq: 1, batches: []walBatch{{partition: 2, epoch: 3, lsn: 4,
		writes: []KV{{Key: []byte("k"), Value: []byte("v")}, {Key: []byte("d")}}, requestID: []byte("r"), record: make([]byte, 9)}}}, new(tagger)))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		groups, end, err := scanWAL(data, 0)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.LessOrEqual(t, end, len(data))
		var again []byte
		for _, g := range groups {
			again = appendRecord(again, g, new(tagger))
		}
		regrouped, _, err := scanWAL(again, 0)
		require.NoError(t, err)
		require.Equal(t, groups, regrouped)
	})
}

func TestBackgroundFlushKeepsEveryWriteReadableAndDurable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, NoSync: true, FlushBytes: 1000, FlushInterval: time.Hour})
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.flushHook = func() {
		once.Do(func() { close(started) })
		<-release
	}
	var written int
	write := func() {
		require.NoError(t, put(ctx, s, written%3, 1, fmt.Sprint("key", written), fmt.Sprint("value", written)))
		written++
	}
	requireAll := func(s *Store) {
		for i := range written {
			requireValue(t, s, i%3, fmt.Sprint("key", i), fmt.Sprint("value", i))
		}
	}
	for {
		write()
		select {
		case <-started:
		default:
			continue
		}
		break
	}
	frozenAt := written
	for range 20 { // commits go on while the flush is held: into the other WAL file
		write()
	}
	requireAll(s) // from the memtable and the one being flushed

	// A crash now: the file holds neither memtable, the two WAL files hold
	// one each.
	image := crashImage(t, dir)
	r, err := Open(Config{Dir: image, NoSync: true})
	require.NoError(t, err)
	requireAll(r)
	require.NoError(t, r.Close())

	close(release)
	require.NoError(t, s.Close())
	r, err = Open(Config{Dir: dir, NoSync: true})
	require.NoError(t, err)
	defer r.Close()
	requireAll(r)
	require.Greater(t, written, frozenAt)
}

// TestGroupTooLargeForOneWALRecordIsCommittedInTheDataFile lowers the
// record bound and checks that a batch above it skips the WAL (replay
// would take its frame for a torn one and lose it) and is durable in the
// data file instead, while a batch below it is logged.
func TestGroupTooLargeForOneWALRecordIsCommittedInTheDataFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, NoSync: true, noFlush: true})
	require.NoError(t, err)
	s.maxRecord = 200 // before any op: the committer reads it after a queue hand-off
	require.NoError(t, put(ctx, s, 0, 1, "small", "v"))
	large := strings.Repeat("x", 300)
	require.NoError(t, put(ctx, s, 0, 1, "large", large))
	require.NoError(t, s.Close())

	data, err := os.ReadFile(filepath.Join(dir, walFileName(0)))
	require.NoError(t, err)
	groups, _, err := scanWAL(data, 0)
	require.NoError(t, err)
	require.Len(t, groups, 1, "only the small batch is in the WAL")

	s, err = Open(Config{Dir: dir, NoSync: true})
	require.NoError(t, err)
	defer s.Close()
	requireValue(t, s, 0, "small", "v")
	requireValue(t, s, 0, "large", large)
}

// Under a load that never lets the committer's queue empty, flushes still
// end and new ones start, so the WAL stays within a few times its bound
// even where every batch overwrites one key (the memtable stays small). The
// queue here fills while the committer waits for a held flush, then holds
// twenty groups. Until the fix, a flush that ended was collected only once
// the queue emptied, so every group went into one WAL file.
func TestWALStaysBoundedWhileTheQueueNeverEmpties(t *testing.T) {
	const flushBytes = 16 << 10
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, NoSync: true, FlushBytes: flushBytes, FlushInterval: time.Hour})
	require.NoError(t, err)
	defer s.Close()
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.flushHook = func() { once.Do(func() { close(started); <-release }) }
	overwrite := func() *Pending {
		return s.Submit(&Batch{Partition: 0, Epoch: 1, Writes: []KV{{Key: []byte("k"), Value: make([]byte, 64)}}})
	}
	for {
		require.NoError(t, overwrite().Wait(ctx))
		select {
		case <-started: // the first flush runs, held
		default:
			continue
		}
		break
	}
	// A slow operation waits for the held flush; the batches queue behind it.
	slow := s.enqueue(&op{apply: func(*bolt.Tx) (error, error) { return nil, nil }, partition: noPartition})
	queued := make([]*Pending, 20*maxGroup)
	for i := range queued {
		queued[i] = overwrite()
	}
	close(release)
	require.NoError(t, slow.Wait(ctx))
	for _, p := range queued {
		require.NoError(t, p.Wait(ctx))
	}

	group := maxGroup * 160 // a group's record: 1,024 batches of a 64-byte value, generously
	for i := range 2 {
		data, err := os.ReadFile(filepath.Join(dir, walFileName(i)))
		require.NoError(t, err)
		_, end, err := scanWAL(data, 0)
		require.NoError(t, err)
		require.LessOrEqual(t, end, maxFlushBacklog*flushBytes+group, "WAL file %d holds %d bytes", i, end)
	}
}
