package faultnet

import (
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// RetransmitTimeout is how long a TCP write that SetDrop loses is held back:
// TCP retransmits it, so a loss costs time, not bytes.
const RetransmitTimeout = 200 * time.Millisecond

// ErrBlocked is returned by dials to a blocked peer, as a refused
// connection would be.
var ErrBlocked = errors.New("faultnet: link blocked")

// Net is the network of one node, bound to its IP. Its methods are safe for
// concurrent use. It implements router.Network.
type Net struct {
	ip net.IP

	// mu guards every field below.
	mu      sync.Mutex
	blocked map[string]bool
	// silenced holds the blocked peers whose open connections stay open,
	// silent (see Silence).
	silenced map[string]bool
	delay    time.Duration
	drop     float64
	rng      *rand.Rand
	// conns holds the open TCP connections, by peer IP, so Block can cut
	// them.
	conns map[string]map[*conn]struct{}
}

// New returns the network of the node at ip (a loopback address), with no
// rules. seed seeds the drop decisions.
func New(ip net.IP, seed uint64) *Net {
	return &Net{
		ip:       ip,
		blocked:  map[string]bool{},
		silenced: map[string]bool{},
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		conns:    map[string]map[*conn]struct{}{},
	}
}

// IP returns the node's IP.
func (n *Net) IP() net.IP { return n.ip }

// Block cuts every link between this node and peer, both ways, until
// Unblock or Heal: open connections close now, and nothing new gets
// through.
func (n *Net) Block(peer net.IP) {
	n.mu.Lock()
	key := peer.String()
	n.blocked[key] = true
	cut := n.conns[key]
	delete(n.conns, key)
	n.mu.Unlock()
	for c := range cut {
		c.Conn.Close()
	}
}

// Silence blocks every link between this node and peer as Block does,
// except that open connections stay open and go silent, as with a peer
// that froze or a network that loses everything without a reset: what
// this node writes to peer is dropped, what peer sends is withheld, and a
// read waits until the connection is closed here. A connection that was
// silenced has lost bytes: once healed, it fails its protocol.
func (n *Net) Silence(peer net.IP) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.blocked[peer.String()] = true
	n.silenced[peer.String()] = true
}

// Unblock lets traffic to and from peer through again.
func (n *Net) Unblock(peer net.IP) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.blocked, peer.String())
	delete(n.silenced, peer.String())
}

// Heal removes every rule: no block, no silence, no delay, no drop.
func (n *Net) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.blocked, n.silenced = map[string]bool{}, map[string]bool{}
	n.delay, n.drop = 0, 0
}

// isSilenced reports whether the connections with peer are silenced.
func (n *Net) isSilenced(peer string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.silenced[peer]
}

// SetDelay holds every write and gossip packet this node sends for d.
func (n *Net) SetDelay(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delay = d
}

// SetDrop loses each gossip packet this node sends or receives with
// probability p, and holds each TCP write back for RetransmitTimeout with
// probability p.
func (n *Net) SetDrop(p float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.drop = p
}

// isBlocked reports whether addr's IP is blocked.
func (n *Net) isBlocked(addr net.Addr) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.blocked[hostOf(addr)]
}

// lag returns how long to hold an outgoing write: the delay, plus a
// retransmission timeout if the write is lost.
func (n *Net) lag() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.delay
	if n.drop > 0 && n.rng.Float64() < n.drop {
		d += RetransmitTimeout
	}
	return d
}

// packetFate returns whether a gossip packet to or from addr is lost, and
// how long to hold one that is sent.
func (n *Net) packetFate(addr net.Addr) (lost bool, delay time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.blocked[hostOf(addr)] {
		return true, 0
	}
	if n.drop > 0 && n.rng.Float64() < n.drop {
		return true, 0
	}
	return false, n.delay
}

// hostOf returns the IP of addr as a string, or "" if it has none.
func hostOf(addr net.Addr) string {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case *net.UDPAddr:
		return a.IP.String()
	case *net.IPAddr:
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	return host
}
