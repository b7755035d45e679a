package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// floor is the machine's cost of one routed durable write: one loopback
// round trip (entry node to owner and back) plus one fsync (the owner's
// commit).
type floor struct {
	rtt, fsync time.Duration
}

func (f floor) total() time.Duration { return f.rtt + f.fsync }

func (f floor) String() string {
	return fmt.Sprintf("loopback round trip %v + fsync %v = %v", f.rtt.Round(time.Microsecond), f.fsync.Round(time.Microsecond), f.total().Round(time.Microsecond))
}

// probeFloor measures the median of n TCP ping-pongs of 64 bytes on
// 127.0.0.1 and of n 256-byte writes each followed by fsync in dir.
func probeFloor(dir string, n int) (floor, error) {
	rtt, err := probeRTT(n)
	if err != nil {
		return floor{}, fmt.Errorf("probe loopback: %w", err)
	}
	fs, err := probeFsync(dir, n)
	if err != nil {
		return floor{}, fmt.Errorf("probe fsync: %w", err)
	}
	return floor{rtt: rtt, fsync: fs}, nil
}

func probeRTT(n int) (time.Duration, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo until the client closes
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
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

func probeFsync(dir string, n int) (time.Duration, error) {
	f, err := os.Create(filepath.Join(dir, "fsync-probe"))
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, valueSize)
	samples := make([]time.Duration, n)
	for i := range samples {
		t := time.Now()
		if _, err := f.WriteAt(buf, int64(i*valueSize)); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		samples[i] = time.Since(t)
	}
	return median(samples), nil
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
