package store

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"unsafe"
)

// walFileName returns the name, inside Config.Dir, of write-ahead log file
// i (0 or 1): the committer appends to one while the other's records are
// being flushed into the data file.
func walFileName(i int) string { return fmt.Sprintf("wal-%d", i) }

const (
	// walHeader is a frame's header: payload length (u32, big-endian), then
	// the payload's CRC-32C (u32, big-endian). A zero length ends the log.
	walHeader = 8
	// walMaxRecord bounds a frame's payload length; a larger length is a
	// torn or stale header.
	walMaxRecord = 1 << 30
	// walChunk is how much the file grows by, zero-filled, when a record
	// does not fit. Overwriting blocks that are already allocated and
	// written lets fdatasync flush data only, not a size or an extent change.
	walChunk = 1 << 20
	// walBlock is the alignment of a direct write's offset, length and
	// memory: a multiple of the block size of every common device.
	walBlock = 4096
)

// castagnoli is the CRC-32C table of the frames' checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// wal is the write-ahead log file: frames written one after the other from
// offset 0, each [length u32][crc32c u32][payload]. Only the committer
// goroutine uses it (and Open, before the committer starts).
//
// The file is reused: after a flush the next frame is written at offset 0
// again, over the frames the flush made obsolete, in a new round. What
// follows the log's end is zeros or the bytes of earlier rounds, which can
// hold anything a client wrote, well-formed frames included. Three things
// keep replay from reading on into them (see scanWAL):
//   - every write ends the log with a zero header, in the same write as
//     its record;
//   - every record carries the round, a random number drawn at each reset
//     that no client sees: a frame of another round, or one planted in a
//     value, ends the log even where a write was cut before its header
//     (a buffered write cut by kill -9 between two pages, a direct one
//     torn by a power cut);
//   - every record ends with a tag keyed with the round (tagger): a
//     write cut inside its own record leaves the record's start, round
//     included, followed by older bytes, which a client who knew the
//     record's tail could have chosen so that the linear CRC-32C still
//     passes; the tag does not.
//
// Why a reused, preallocated file: measured here (ext4 on a virtio disk,
// 200-byte records, one fdatasync each, 1 MiB growth chunks), writing
// into already allocated space costs ~70-80 µs per record whether the
// chunk is zero-filled, fallocated or truncated, against ~110 µs for
// O_APPEND, whose every fdatasync also journals the size change. The
// zero-filled variant is used: portable, and no unwritten extents.
//
// Where the file system allows it (Linux, see useDirect), the log is written
// with O_DIRECT|O_DSYNC: one system call per record, durable when it
// returns, without the page cache. Measured here (1,500-byte records, one
// to three files at once), 56-90 µs and 18-21 µs of CPU per record,
// against 65-118 µs and 25-32 µs for a write and an fdatasync. A direct
// write covers whole aligned blocks, so each record is written with the
// bytes of the log before it in its first block (tail), then its zero
// header and zeros to the end of the block the header ends in (one more
// block for a record that ends within a header of its block's end).
// Rewriting those earlier bytes with the same
// values risks nothing the page cache does not: its writeback writes
// whole pages too. On ext4 and xfs under Linux (amd64, arm64) the direct
// writes go through AIO where the kernel offers it (see asyncWriter): the
// committer waits for each in the network poller instead of holding a
// processor, except for a lone write (see write).
type wal struct {
	f      *os.File
	path   string
	noSync bool
	// direct writes the log's blocks when f is open with O_DIRECT|O_DSYNC
	// (see above): an asyncWriter over f, or f; nil for a buffered log.
	direct blockWriter
	// buf is the aligned buffer of direct writes. It starts with the tail:
	// the log's bytes from the start of off's block to off.
	buf []byte

	// off is where the next frame is written.
	// Invariant: off+walHeader <= size, once the file has grown.
	off int64
	// size is the file's length. Once a record is written after a reset,
	// [off, size) holds a zero header, then zeros or the bytes of earlier
	// rounds.
	size int64
	// round is the current round's number, in every record written (see
	// above): drawn at reset, which Open calls before the first write.
	round uint64
}

// openWAL opens (or creates) log file i in dir and returns it with the
// file's contents, for replay. A newly created file's directory entry is
// synced unless noSync.
func openWAL(dir string, i int, noSync bool) (*wal, []byte, error) {
	path := filepath.Join(dir, walFileName(i))
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w := &wal{f: f, path: path, noSync: noSync}
	if created && !noSync {
		if err := syncDir(dir); err != nil {
			_ = f.Close()
			return nil, nil, fmt.Errorf("store: sync %s: %w", dir, err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("store: read %s: %w", path, err)
	}
	w.size = int64(len(data))
	return w, data, nil
}

// useDirect switches an empty log (reset, every record in it applied) to
// direct writes where the file system allows them (see wal), unless
// noSync. It first gives a new file its first chunk, so that direct writes
// start at a block boundary, then writes a zero block at offset 0 through
// the direct descriptor, which ends the empty log there: a file system or
// device that refuses O_DIRECT or this alignment fails here, and the log
// stays buffered, instead of failing a commit.
func (w *wal) useDirect() error {
	if w.noSync {
		return nil
	}
	if w.size == 0 {
		if err := w.grow(walChunk); err != nil {
			return fmt.Errorf("store: write %s: %w", w.path, err)
		}
	}
	if w.size%walBlock != 0 {
		return nil
	}
	f, err := openDirect(w.path)
	if err != nil {
		return nil
	}
	if _, err := f.WriteAt(alignedBlocks(walBlock), 0); err != nil {
		_ = f.Close()
		return nil
	}
	_ = w.f.Close()
	w.f, w.direct, w.buf = f, directWriter(f), alignedBlocks(walBlock)
	return nil
}

// blockWriter writes a direct log's aligned blocks, each durable when
// WriteAt returns, and closes the file.
type blockWriter interface {
	WriteAt(b []byte, off int64) (int, error)
	Close() error
}

// grow zero-fills the file up to the next multiple of walChunk at or above
// end, and syncs the new size unless noSync. (A direct write that extends
// the file is synchronous, but some Linux versions did not persist the size
// it sets; the fdatasync makes it durable either way.)
func (w *wal) grow(end int64) error {
	grown := (end + walChunk - 1) / walChunk * walChunk
	if _, err := w.f.WriteAt(alignedBlocks(int(grown-w.size)), w.size); err != nil {
		return err
	}
	if !w.noSync {
		if err := fdatasync(w.f); err != nil {
			return err
		}
	}
	w.size = grown
	return nil
}

// sealFrame fills in the header of frame, whose payload follows walHeader
// bytes: the payload's length and checksum.
func sealFrame(frame []byte) {
	payload := frame[walHeader:]
	binary.BigEndian.PutUint32(frame, uint32(len(payload)))
	binary.BigEndian.PutUint32(frame[4:], crc32.Checksum(payload, castagnoli))
}

// append writes rec, one framed record (appendRecord), at the end of the
// log and syncs it (unless noSync). When it returns nil the record is
// durable. On error the log's tail is unknown: the caller must stop using
// the log (the store is poisoned); a best-effort zero header marks the end
// again. It may use rec's spare capacity. alone says that rec is the
// committer's only work: a direct log may then write it synchronously
// (see write).
func (w *wal) append(rec []byte, alone bool) error {
	end := w.off + int64(len(rec))
	if end+walHeader > w.size {
		if err := w.grow(end + walHeader); err != nil {
			return w.fail(err)
		}
	}
	if err := w.write(rec, alone); err != nil {
		return w.fail(err)
	}
	if w.direct != nil { // the new tail goes to the front of buf
		written := w.tail() + len(rec)
		copy(w.buf, w.buf[written&^(walBlock-1):written])
		if len(w.buf) > maxKeptRecord { // a large record's: keep one block
			small := alignedBlocks(walBlock)
			copy(small, w.buf)
			w.buf = small
		}
	}
	w.off = end
	return nil
}

// tail is the length of the log's bytes before off in off's block.
func (w *wal) tail() int { return int(w.off & (walBlock - 1)) }

// write writes b at off, followed by a zero header that ends the log there,
// durably unless noSync, without moving off. The header is what keeps
// replay from reading on into the bytes of an earlier round: they can hold
// anything a client wrote, well-formed frames included. A buffered write
// appends the header to b (in its spare capacity if it has some). A direct
// write starts at off's block with the tail and ends with zeros at a block
// boundary, which the file's size always is.
//
// A direct write goes through w.direct, or straight to the file, holding
// the committer's processor, when alone is set and no other direct log
// write of this process is in progress (logWrites). The network poller
// (asyncWriter) frees the processor for other goroutines, which a lone
// call does not need, at the cost of the poller's round trip (an eventfd
// read, a parked thread woken, io_getevents): in the bench, single calls
// entered at their owner took 180 µs at the median instead of 240 (8
// alternating runs). The other writes in progress matter where several
// nodes share a process (the bench's three on 2 cores): synchronous writes
// of all of them held every processor, and 8 clients lost up to a third of
// their throughput.
func (w *wal) write(b []byte, alone bool) error {
	if w.direct == nil {
		if _, err := w.f.WriteAt(append(b, make([]byte, walHeader)...), w.off); err != nil || w.noSync {
			return err
		}
		return fdatasync(w.f)
	}
	tail := w.tail()
	n := (tail + len(b) + walHeader + walBlock - 1) &^ (walBlock - 1)
	if len(w.buf) < n {
		buf := alignedBlocks(n)
		copy(buf, w.buf[:tail])
		w.buf = buf
	}
	k := tail + copy(w.buf[tail:], b)
	clear(w.buf[k:n])
	out := w.direct
	if logWrites.Add(1) == 1 && alone {
		out = w.f
	}
	_, err := out.WriteAt(w.buf[:n], w.off-int64(tail))
	logWrites.Add(-1)
	return err
}

// logWrites counts the direct log writes in progress in this process.
var logWrites atomic.Int32

// alignedBlocks returns n zero bytes whose address is a multiple of
// walBlock, as direct writes need.
func alignedBlocks(n int) []byte {
	b := make([]byte, n+walBlock)
	skip := -int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) & (walBlock - 1)
	return b[skip : skip+n : skip+n]
}

// fail tries to end the log at the frame that failed, so that a record
// whose write or sync failed (and was reported failed) is not replayed,
// and returns err naming the file.
func (w *wal) fail(err error) error {
	_ = w.write(nil, true)
	return fmt.Errorf("store: write %s: %w", w.path, err)
}

// reset makes the next frame go to offset 0, in a new round: every frame
// written so far is applied to the data file, durably.
func (w *wal) reset() { w.off, w.round = 0, newRound() }

// newRound draws a round: unpredictable (crypto/rand), and never 0, which
// stands for the absent round of version 1 records.
func newRound() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // it never fails (crypto/rand)
		if r := binary.BigEndian.Uint64(b[:]); r != 0 {
			return r
		}
	}
}

// clear ends the log at offset 0, durably unless noSync, and starts a new
// round: every record in it is applied. Open clears both files after
// replay, and Close after its flush, so that a build that reads only
// earlier record versions can open the directory after a clean shutdown.
func (w *wal) clear() error {
	w.reset()
	if err := w.write(nil, true); err != nil {
		return fmt.Errorf("store: write %s: %w", w.path, err)
	}
	return nil
}

// close closes the file.
func (w *wal) close() error {
	closeFile := w.f.Close
	if w.direct != nil { // it owns f
		closeFile = w.direct.Close
	}
	if err := closeFile(); err != nil {
		return fmt.Errorf("store: close %s: %w", w.path, err)
	}
	return nil
}

// scanWAL returns the groups of data, in log order, that the data file
// (which holds every group up to sequence applied) lacks. It stops at the
// end of the valid log: a zero length, a frame running past the end of
// data or failing its checksum or its tag (a torn write, never
// acknowledged: a record is acknowledged only once durable), a frame of
// another version or round than the first one's (the bytes of an earlier
// round, or a frame planted in a value, read where a write was cut before
// its zero header), or a frame whose sequence does not follow the
// previous one's (every round starts at offset 0 with the sequence after
// the last applied one; this also ends a log of version 1 records, which
// have no round). end is the offset where the valid log ends.
//
// It fails with ErrCorrupt when a frame of the log's round passes its
// checksum and its tag but does not decode, or the first frame is of no
// known version (a later build's log) or too short for its version: that
// cannot result from a crash.
func scanWAL(data []byte, applied uint64) (groups []walGroup, end int, err error) {
	var prev, round uint64
	var version byte
	var tags tagger
	for off := 0; len(data)-off >= walHeader; {
		n := binary.BigEndian.Uint32(data[off:])
		if n == 0 || n > walMaxRecord || int64(n) > int64(len(data)-off-walHeader) {
			return groups, off, nil
		}
		payload := data[off+walHeader : off+walHeader+int(n)]
		if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(data[off+4:]) {
			return groups, off, nil
		}
		v, r, _, _ := recordRound(payload)
		if off > 0 && (v != version || r != round) || !tags.tagged(v, r, payload) {
			return groups, off, nil
		}
		g, err := decodeGroup(payload)
		if err != nil {
			return nil, off, fmt.Errorf("wal offset %d: %w", off, err)
		}
		if off > 0 && g.seq != prev+1 {
			return groups, off, nil
		}
		prev, round, version = g.seq, r, v
		if g.seq > applied {
			groups = append(groups, g)
		}
		off += walHeader + int(n)
		end = off
	}
	return groups, end, nil
}

// mergeWALs merges the groups the two log files hold beyond applied into
// one run in sequence order. The files hold consecutive runs (the committer
// switches files only once the other one's records are in the data file),
// so the merged run must start right after applied and have no gap; a gap
// cannot result from a crash and fails with ErrCorrupt.
func mergeWALs(applied uint64, a, b []walGroup) ([]walGroup, error) {
	groups := append(append([]walGroup(nil), a...), b...)
	slices.SortFunc(groups, func(x, y walGroup) int { return cmp.Compare(x.seq, y.seq) })
	for i, g := range groups {
		if g.seq != applied+1+uint64(i) {
			return nil, fmt.Errorf("%w: wal record %d follows %d, data file holds up to %d", ErrCorrupt, g.seq, applied+uint64(i), applied)
		}
	}
	return groups, nil
}
