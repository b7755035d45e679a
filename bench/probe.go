package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// cellProbes is the number of samples of each measure in the probe just
// before a single-client cell: fewer than the run's first probe takes, to
// keep -quick short.
const cellProbes = 200

// pingPongTimeout bounds a probe's whole series of loopback round trips
// (500 at most, each with at most one durable write: seconds on a slow
// disk), so that a stuck connection fails the probe instead of hanging
// the bench (a variable for tests).
var pingPongTimeout = 5 * time.Minute

// errUnsupported reports a durable-write method this system lacks.
var errUnsupported = errors.New("not supported here")

// floor is the machine's cost of one routed durable write: one loopback
// round trip (entry node to owner and back) plus one durable write (the
// owner's commit), the cheapest of the ways probed.
type floor struct {
	rtt time.Duration
	// writes are the durable-write methods probed, cheapest first.
	writes []durableWrite
	// pair is the median time of two concurrent durable writes of the
	// cheapest method, to two files on the same disk: what a majority of
	// three replicas sharing this machine's disk waits for.
	pair time.Duration
	// routed is the median time of a loopback ping-pong whose receiver
	// makes one durable write of the cheapest method before it answers:
	// total's parts made as one operation, with the idle time between them
	// that a call has too. Shown for information; the target is on total.
	routed time.Duration
}

// durableWrite is the median time of one way to make a small write durable.
type durableWrite struct {
	how string
	d   time.Duration
	// open prepares n writes this way for each of writers goroutines, to
	// files of their own in dir: write i of each of them, and a func that
	// closes and removes the files.
	open func(dir string, n, writers int) (writes []func(i int) error, remove func(), err error)
}

// time returns the median time of n writes made this way by writers
// goroutines at once.
func (w durableWrite) time(dir string, n, writers int) (time.Duration, error) {
	writes, remove, err := w.open(dir, n, writers)
	if err != nil {
		return 0, err
	}
	defer remove()
	return timeWrites(n, writes)
}

// durable is the cheapest durable write's time.
func (f floor) durable() time.Duration { return f.writes[0].d }

func (f floor) total() time.Duration { return f.rtt + f.durable() }

// replicated is the floor of a durable write replicated to a majority of
// three replicas that share this disk: a round trip to the owner, one from
// the owner to a backup, and the owner's and the backup's writes at once.
func (f floor) replicated() time.Duration { return 2*f.rtt + f.pair }

// micros is d in microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func (f floor) String() string {
	var others []string
	for _, w := range f.writes[1:] {
		others = append(others, fmt.Sprintf("%s %v", w.how, w.d.Round(time.Microsecond)))
	}
	also := ""
	if len(others) > 0 {
		also = "; " + strings.Join(others, ", ")
	}
	return fmt.Sprintf("loopback round trip %v + durable write %v (%s%s) = %v\n"+
		"Floor of a write replicated to 2 of 3 replicas on this one disk: 2 round trips + two concurrent durable writes %v = %v\n"+
		"For information, the same parts made as one operation (a ping-pong whose receiver writes durably before it answers): %v",
		f.rtt.Round(time.Microsecond), f.durable().Round(time.Microsecond), f.writes[0].how, also, f.total().Round(time.Microsecond),
		f.pair.Round(time.Microsecond), f.replicated().Round(time.Microsecond), f.routed.Round(time.Microsecond))
}

// probeFloor measures the median of n TCP ping-pongs of 64 bytes on
// 127.0.0.1, and the median of n small durable writes in dir made each
// way this machine offers (syncWrites, directWrites); the floor takes the
// cheapest, which is then timed two at a time, and behind a ping-pong's
// receiver.
func probeFloor(dir string, n int) (floor, error) {
	rtt, err := pingPong(n, func(c net.Conn) error {
		_, err := io.Copy(c, c)
		return err
	})
	if err != nil {
		return floor{}, fmt.Errorf("probe loopback: %w", err)
	}
	fl := floor{rtt: rtt}
	for _, p := range []durableWrite{{how: "write + fdatasync", open: syncWrites}, {how: "O_DIRECT|O_DSYNC write", open: directWrites}} {
		p.d, err = p.time(dir, n, 1)
		if errors.Is(err, errUnsupported) {
			continue
		}
		if err != nil {
			return floor{}, fmt.Errorf("probe %s: %w", p.how, err)
		}
		fl.writes = append(fl.writes, p)
	}
	slices.SortFunc(fl.writes, func(a, b durableWrite) int { return cmp.Compare(a.d, b.d) })
	if fl.pair, err = fl.writes[0].time(dir, n, 2); err != nil {
		return floor{}, fmt.Errorf("probe two concurrent %ss: %w", fl.writes[0].how, err)
	}
	if fl.routed, err = probeRouted(dir, n, fl.writes[0]); err != nil {
		return floor{}, fmt.Errorf("probe a routed %s: %w", fl.writes[0].how, err)
	}
	return fl, nil
}

// probeRouted returns the median of n loopback ping-pongs of 64 bytes
// whose receiver makes one durable write w before it answers.
func probeRouted(dir string, n int, w durableWrite) (time.Duration, error) {
	writes, remove, err := w.open(dir, n, 1)
	if err != nil {
		return 0, err
	}
	defer remove()
	return pingPong(n, func(c net.Conn) error {
		buf := make([]byte, 64)
		for i := 0; ; i++ {
			if _, err := io.ReadFull(c, buf); err != nil {
				return err
			}
			if err := writes[0](i); err != nil {
				return err
			}
			if _, err := c.Write(buf); err != nil {
				return err
			}
		}
	})
}

// pingPong returns the median time of n round trips of 64 bytes to serve,
// which answers on a TCP connection on 127.0.0.1 until it closes or fails.
// It returns once serve has, with serve's error but for the end of the
// connection.
func pingPong(n int, serve func(c net.Conn) error) (time.Duration, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	served := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.SetDeadline(time.Now().Add(pingPongTimeout))
			err = serve(c)
			c.Close()
		}
		served <- err
	}()
	d, err := timePingPongs(l.Addr().String(), n)
	l.Close() // ends an Accept still waiting
	if serr := <-served; !errors.Is(serr, io.EOF) && !errors.Is(serr, net.ErrClosed) {
		err = errors.Join(err, serr)
	}
	return d, err
}

// timePingPongs returns the median time of n round trips of 64 bytes to
// addr, on a connection it then closes.
func timePingPongs(addr string, n int) (time.Duration, error) {
	c, err := net.DialTimeout("tcp", addr, pingPongTimeout)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(pingPongTimeout))
	buf := make([]byte, 64)
	samples := make([]time.Duration, n)
	for i := range samples {
		t := time.Now()
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return 0, err
		}
		samples[i] = time.Since(t)
	}
	return median(samples), nil
}

// syncWrites prepares n 256-byte writes into a preallocated file, each
// followed by fdatasync, for each of writers goroutines to its own file:
// overwriting allocated blocks spares the journal a size change, as the
// library's log does.
func syncWrites(dir string, n, writers int) ([]func(i int) error, func(), error) {
	buf := probeBytes(make([]byte, valueSize))
	return preallocatedWrites(dir, "sync-probe", n*valueSize, 0, writers, func(f *os.File, i int) error {
		if _, err := f.WriteAt(buf, int64(i*valueSize)); err != nil {
			return err
		}
		return fdatasync(f)
	})
}

// preallocatedWrites creates writers files in dir, each preallocated to
// size bytes and opened with flags, and returns write i to each of them by
// write, and a func that closes and removes them.
func preallocatedWrites(dir, name string, size, flags, writers int, write func(f *os.File, i int) error) ([]func(i int) error, func(), error) {
	var files []*os.File
	remove := func() {
		for _, f := range files {
			f.Close()
			os.Remove(f.Name())
		}
	}
	writes := make([]func(i int) error, writers)
	for w := range writes {
		f, err := preallocated(filepath.Join(dir, fmt.Sprintf("%s-%d", name, w)), size, flags)
		if err != nil {
			remove()
			return nil, nil, err
		}
		files = append(files, f)
		writes[w] = func(i int) error { return write(f, i) }
	}
	return writes, remove, nil
}

// timeWrites returns the median time of n rounds, in round i every one of
// writes making its write i, all at once.
func timeWrites(n int, writes []func(i int) error) (time.Duration, error) {
	samples := make([]time.Duration, n)
	errs := make([]error, len(writes))
	for i := range samples {
		t := time.Now()
		var wg sync.WaitGroup
		for w, write := range writes[1:] {
			wg.Go(func() { errs[w+1] = write(i) })
		}
		errs[0] = writes[0](i)
		wg.Wait()
		samples[i] = time.Since(t)
		if err := errors.Join(errs...); err != nil {
			return 0, err
		}
	}
	return median(samples), nil
}

// preallocated creates path, zero-filled to size bytes and synced, and
// returns it opened again with the extra flags.
func preallocated(path string, size, flags int) (*os.File, error) {
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|flags, 0)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return f, nil
}

// probeBytes fills b with non-zero bytes, so that no layer below can skip
// the write as zeros over zeros.
func probeBytes(b []byte) []byte {
	for i := range b {
		b[i] = byte(i%251 + 1)
	}
	return b
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
