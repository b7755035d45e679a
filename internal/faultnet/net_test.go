package faultnet

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/require"
)

var (
	ipA = net.ParseIP("127.0.0.2")
	ipB = net.ParseIP("127.0.0.3")
)

// pair returns a's listener and a connection b dialed to it, both tracked,
// after one byte went through each way.
func pair(t *testing.T, a, b *Net) (ln net.Listener, atB, atA net.Conn) {
	t.Helper()
	ln, err := a.Listen(context.Background(), net.JoinHostPort(a.IP().String(), "0"))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	atB, err = b.Dial(context.Background(), ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { atB.Close() })
	atA = <-accepted
	t.Cleanup(func() { atA.Close() })
	require.Equal(t, ipB.String(), hostOf(atA.RemoteAddr()), "the peer is known by its own IP")
	roundTrip(t, atB, atA)
	return ln, atB, atA
}

// roundTrip writes one byte from w and reads it at r.
func roundTrip(t *testing.T, w, r net.Conn) {
	t.Helper()
	_, err := w.Write([]byte{1})
	require.NoError(t, err)
	_, err = io.ReadFull(r, make([]byte, 1))
	require.NoError(t, err)
}

func TestBlockCutsOpenConnectionsAndRefusesDials(t *testing.T) {
	a, b := New(ipA, 1), New(ipB, 2)
	ln, atB, _ := pair(t, a, b)

	a.Block(ipB)
	_, err := io.ReadFull(atB, make([]byte, 1))
	require.Error(t, err, "the open connection is cut at once")

	// b may still connect at the TCP level, but a closes it on accept.
	go ln.Accept() // returns when the test closes ln
	c, err := b.Dial(context.Background(), ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.ReadFull(c, make([]byte, 1))
	require.Error(t, err, "a closes connections from a blocked peer")

	b.Block(ipA)
	_, err = b.Dial(context.Background(), ln.Addr().String())
	require.ErrorIs(t, err, ErrBlocked, "b refuses to dial a blocked peer")

	a.Heal()
	b.Unblock(ipA)
	pair(t, a, b)
}

// TestSilenceKeepsConnectionsOpenButSilentAndRefusesDials silences b at a:
// a's writes to b are dropped, what b sends (its close included) is
// withheld from a's read until a closes the connection, and a dials b no
// more.
func TestSilenceKeepsConnectionsOpenButSilentAndRefusesDials(t *testing.T) {
	a, b := New(ipA, 1), New(ipB, 2)
	_, atB, atA := pair(t, a, b)
	lnB, err := b.Listen(context.Background(), net.JoinHostPort(ipB.String(), "0"))
	require.NoError(t, err)
	defer lnB.Close()

	a.Silence(ipB)
	n, err := atA.Write([]byte{2})
	require.NoError(t, err)
	require.Equal(t, 1, n, "a's write is reported written")
	_, err = atB.Write([]byte{3})
	require.NoError(t, err)
	require.NoError(t, atB.Close())

	read := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(atA, make([]byte, 1))
		read <- err
	}()
	_, err = a.Dial(context.Background(), lnB.Addr().String())
	require.ErrorIs(t, err, ErrBlocked, "a refuses to dial a silenced peer")
	select {
	case err := <-read:
		t.Fatalf("a's read ended while the connection was open: %v", err)
	default:
	}
	require.NoError(t, atA.Close())
	require.ErrorIs(t, <-read, net.ErrClosed, "closing the connection here ends the read")

	a.Heal()
	_, atB, atA = pair(t, a, b)
	a.Silence(ipB)
	require.NoError(t, atA.SetReadDeadline(time.Now().Add(10*time.Millisecond)))
	_, err = atA.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a read deadline still ends a silenced read")
	_, err = atB.Write([]byte{4})
	require.NoError(t, err)
	require.NoError(t, atB.Close())
	require.NoError(t, atA.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	_, err = atA.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "and so it does after bytes and the end of the stream arrived")
}

func TestDelayHoldsWrites(t *testing.T) {
	a, b := New(ipA, 1), New(ipB, 2)
	_, atB, atA := pair(t, a, b)
	b.SetDelay(50 * time.Millisecond)
	start := time.Now()
	roundTrip(t, atB, atA)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	b.SetDrop(1)
	start = time.Now()
	roundTrip(t, atB, atA)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond+RetransmitTimeout, "a lost TCP write costs a retransmission")
}

// transport returns n's gossip transport on a free port.
func transport(t *testing.T, n *Net) memberlist.NodeAwareTransport {
	t.Helper()
	tr, err := n.Gossip(n.IP().String(), 0)
	require.NoError(t, err)
	t.Cleanup(func() { tr.Shutdown() })
	return tr
}

func advertised(t *testing.T, tr memberlist.NodeAwareTransport) string {
	t.Helper()
	ip, port, err := tr.FinalAdvertiseAddr("", 0)
	require.NoError(t, err)
	require.NotZero(t, port)
	return (&net.UDPAddr{IP: ip, Port: port}).String()
}

// send writes msg from one transport to another's address.
func send(t *testing.T, from memberlist.NodeAwareTransport, to string, msg string) {
	t.Helper()
	_, err := from.WriteToAddress([]byte(msg), memberlist.Address{Addr: to})
	require.NoError(t, err)
}

// next returns the next packet's text.
func next(t *testing.T, tr memberlist.NodeAwareTransport) string {
	t.Helper()
	select {
	case p := <-tr.PacketCh():
		return string(p.Buf)
	case <-time.After(5 * time.Second):
		t.Fatal("no packet arrived")
		return ""
	}
}

func TestGossipPacketsObeyBlockAndDrop(t *testing.T) {
	a, b, c := New(ipA, 1), New(ipB, 2), New(net.ParseIP("127.0.0.4"), 3)
	ta, tb, tc := transport(t, a), transport(t, b), transport(t, c)
	addrB := advertised(t, tb)
	require.Contains(t, addrB, ipB.String())

	send(t, ta, addrB, "before")
	require.Equal(t, "before", next(t, tb))

	// Each lost packet is followed by one that passes: the next packet to
	// arrive must be the latter.
	a.Block(ipB)
	send(t, ta, addrB, "blocked at the sender")
	a.Heal()
	b.Block(ipA)
	send(t, ta, addrB, "blocked at the receiver")
	send(t, tc, addrB, "from another peer") // b filters in arrival order
	require.Equal(t, "from another peer", next(t, tb))
	b.Heal()
	a.SetDrop(1)
	send(t, ta, addrB, "dropped")
	a.Heal()
	send(t, ta, addrB, "after")
	require.Equal(t, "after", next(t, tb))
}

func TestGossipStreamsObeyBlock(t *testing.T) {
	a, b := New(ipA, 1), New(ipB, 2)
	ta, tb := transport(t, a), transport(t, b)
	addrB := advertised(t, tb)

	c, err := ta.DialAddressTimeout(memberlist.Address{Addr: addrB}, time.Second)
	require.NoError(t, err)
	defer c.Close()
	in := <-tb.StreamCh()
	defer in.Close()
	roundTrip(t, c, in)

	b.Block(ipA)
	_, err = io.ReadFull(c, make([]byte, 1))
	require.Error(t, err, "the open stream is cut")
	_, err = tb.DialAddressTimeout(memberlist.Address{Addr: advertised(t, ta)}, time.Second)
	require.True(t, errors.Is(err, ErrBlocked), "no stream to a blocked peer: %v", err)
}
