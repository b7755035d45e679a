package faultnet

import (
	"io"
	"log"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Gossip returns a memberlist transport bound on bindAddr:bindPort (this
// node's IP; a zero port picks a free one) that obeys the rules: packets
// to and from blocked peers are dropped, streams to and from them refused.
func (n *Net) Gossip(bindAddr string, bindPort int) (memberlist.NodeAwareTransport, error) {
	inner, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{bindAddr},
		BindPort:  bindPort,
		Logger:    log.New(io.Discard, "", 0),
	})
	if err != nil {
		return nil, err
	}
	t := &gossip{
		NetTransport: inner,
		n:            n,
		port:         inner.GetAutoBindPort(),
		packets:      make(chan *memberlist.Packet),
		streams:      make(chan net.Conn),
		done:         make(chan struct{}),
	}
	t.wg.Add(2)
	go t.filterPackets()
	go t.filterStreams()
	return t, nil
}

// gossip wraps memberlist's NetTransport. Two goroutines, started by
// Gossip and stopped by Shutdown, pass on the packets and streams that the
// rules let in.
type gossip struct {
	*memberlist.NetTransport
	n       *Net
	port    int
	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// WriteTo sends a packet to addr unless the rules lose it; a lost packet
// reports success, as UDP would.
func (t *gossip) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress is WriteTo for a named address.
func (t *gossip) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	udp, err := net.ResolveUDPAddr("udp", a.Addr)
	if err != nil {
		return time.Time{}, err
	}
	lost, delay := t.n.packetFate(udp)
	switch {
	case lost:
		return time.Now(), nil
	case delay > 0:
		b = append([]byte(nil), b...)
		time.AfterFunc(delay, func() {
			select {
			case <-t.done:
			default:
				t.NetTransport.WriteToAddress(b, a)
			}
		})
		return time.Now(), nil
	}
	return t.NetTransport.WriteToAddress(b, a)
}

// PacketCh returns the packets the rules let in.
func (t *gossip) PacketCh() <-chan *memberlist.Packet { return t.packets }

// StreamCh returns the streams the rules let in.
func (t *gossip) StreamCh() <-chan net.Conn { return t.streams }

// DialTimeout opens a stream to addr from this node's IP, unless the peer
// is blocked.
func (t *gossip) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.n.dialTimeout(addr, timeout)
}

// DialAddressTimeout is DialTimeout for a named address.
func (t *gossip) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.n.dialTimeout(a.Addr, timeout)
}

// FinalAdvertiseAddr advertises the bound IP and port.
func (t *gossip) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip == "" {
		ip = t.n.ip.String()
	}
	if port == 0 {
		port = t.port
	}
	return t.NetTransport.FinalAdvertiseAddr(ip, port)
}

// Shutdown stops the filters and the underlying transport.
func (t *gossip) Shutdown() error {
	var err error
	t.once.Do(func() {
		// memberlist reads the channels until this returns, and the
		// NetTransport's listeners block on handing us what they read: so
		// stop them first, the filters after.
		err = t.NetTransport.Shutdown()
		close(t.done)
		t.wg.Wait()
	})
	return err
}

// filterPackets passes on the packets from peers that are not blocked,
// minus the ones the drop rule loses.
func (t *gossip) filterPackets() {
	defer t.wg.Done()
	in := t.NetTransport.PacketCh()
	for {
		select {
		case <-t.done:
			return
		case p := <-in:
			if lost, _ := t.n.packetFate(p.From); lost {
				continue
			}
			select {
			case t.packets <- p:
			case <-t.done:
				return
			}
		}
	}
}

// filterStreams passes on the streams from peers that are not blocked,
// tracked so that a later Block cuts them.
func (t *gossip) filterStreams() {
	defer t.wg.Done()
	in := t.NetTransport.StreamCh()
	for {
		select {
		case <-t.done:
			return
		case c := <-in:
			tc, err := t.n.track(c)
			if err != nil {
				continue
			}
			select {
			case t.streams <- tc:
			case <-t.done:
				tc.Close()
				return
			}
		}
	}
}
