//go:build linux

package ring

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// blackhole returns the address of a loopback TCP port that drops SYNs,
// as a host behind a firewall that drops packets does: a listener with a
// backlog of 0 whose accept queue is full (the kernel drops a SYN to a
// full queue). A dial to it hangs until its timeout or context ends, for
// memberlist's TCPTimeout (10 s with PresetLAN).
func blackhole(t *testing.T) (addr string, port int) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	port = sa.(*syscall.SockaddrInet4).Port
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	for range 8 { // fill the queue, until a dial hangs
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			var ne net.Error
			require.True(t, errors.As(err, &ne) && ne.Timeout(), "dial to the full listener: %v", err)
			return addr, port
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	t.Fatal("the listener's accept queue never filled")
	return "", 0
}

// waitDialing waits until a socket of this machine is sending SYNs to the
// loopback port (state SYN_SENT in /proc/net/tcp): a dial to the blackhole
// is hanging.
func waitDialing(t *testing.T, port int, timeout time.Duration) {
	t.Helper()
	want := fmt.Sprintf("0100007F:%04X", port)
	require.Eventually(t, func() bool {
		f, err := os.Open("/proc/net/tcp")
		require.NoError(t, err)
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && fields[2] == want && fields[3] == "02" {
				return true
			}
		}
		return false
	}, timeout, 10*time.Millisecond, "no dial to port %d", port)
}

// lanConfig is testConfig with the LAN preset, whose TCPTimeout (10 s)
// tells a hang apart from a prompt return.
func lanConfig(name string, seeds ...string) Config {
	cfg := testConfig(name, seeds...)
	cfg.Preset = PresetLAN
	return cfg
}

// returnsSoon waits for ch, failing the test after a bound far above
// anything but waiting out a 10 s dial.
func returnsSoon(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s waits for a gossip dial to a seed that drops packets", what)
		return nil
	}
}

// Join returns when its context ends, even while memberlist is dialing a
// seed that drops packets (Node.Start passes its context here).
func TestJoinEndsWithItsContextWhileASeedDropsPackets(t *testing.T) {
	addr, port := blackhole(t)
	r, err := New(lanConfig("a", addr))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	ctx, cancel := context.WithCancel(context.Background())
	joined := make(chan error, 1)
	go func() { joined <- r.Join(ctx) }()
	waitDialing(t, port, 5*time.Second)

	cancel()
	require.ErrorIs(t, returnsSoon(t, "Join", joined), context.Canceled)
}

// Close does not wait for a dial in progress: here the reconnect round's
// (which holds the lock Close takes) to a seed that went away for good.
func TestCloseDoesNotWaitForADialToASeedThatDropsPackets(t *testing.T) {
	addr, port := blackhole(t)
	a := start(t, lanConfig("a"))
	b, err := New(lanConfig("b", a.GossipAddr(), addr))
	require.NoError(t, err)
	// The join reaches a; the seed that drops packets is given up when
	// the join's context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, b.Join(ctx))
	waitDialing(t, port, 10*time.Second) // a reconnect round

	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	require.NoError(t, returnsSoon(t, "Close", closed))
}

// A change of this node's metadata (SetLeaving, SetClusterID) and
// PushState do not wait for a reconnect round's dial to a seed that drops
// packets, which holds the lock they take: SetLeaving would overrun the
// timeout Leave gives it by seconds per such seed.
func TestStateChangesDoNotWaitForADialToASeedThatDropsPackets(t *testing.T) {
	addr, port := blackhole(t)
	a := start(t, lanConfig("a"))
	b, err := New(lanConfig("b", a.GossipAddr(), addr))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, b.Join(ctx))

	waitDialing(t, port, 10*time.Second) // a reconnect round
	leaving := make(chan error, 1)
	go func() { leaving <- b.SetLeaving(time.Second) }()
	require.NoError(t, returnsSoon(t, "SetLeaving", leaving))

	waitDialing(t, port, 10*time.Second) // the next round
	pushed := make(chan error, 1)
	go func() { b.PushState(); pushed <- nil }()
	require.NoError(t, returnsSoon(t, "PushState", pushed))
}
