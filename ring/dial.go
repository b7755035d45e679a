package ring

import (
	"context"
	"fmt"
	"log"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// dialer is memberlist's network transport with dials that the ring
// aborts: every dial and its connection when the ring closes, and those
// started during Join when Join's context ends. memberlist's own dials
// wait for TCPTimeout (1 s with PresetLocal, 10 s with PresetLAN) per
// peer that drops packets, and Join and the reconnect rounds dial every
// seed in turn, so Close, Leave and Join would wait that long.
type dialer struct {
	*memberlist.NetTransport
	// life ends when the ring closes.
	life context.Context
	// join is the context of the Join in progress, if any.
	join atomic.Pointer[context.Context]
}

// newDialer binds memberlist's network transport as memberlist itself
// would (mc.BindAddr and mc.BindPort; a port chosen by the system is
// retried on a bind race and written back to mc, as the advertised port
// too), aborting dials when life ends.
func newDialer(life context.Context, mc *memberlist.Config, logger *log.Logger) (*dialer, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: logger}
	attempts := 1
	if mc.BindPort == 0 {
		// Binding TCP and UDP on one port the system chose can race
		// with another process; memberlist retries as well.
		attempts = 10
	}
	var err error
	for range attempts {
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(nc); err == nil {
			if mc.BindPort == 0 {
				mc.BindPort = nt.GetAutoBindPort()
				mc.AdvertisePort = mc.BindPort
			}
			return &dialer{NetTransport: nt, life: life}, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, fmt.Errorf("bind gossip transport: %w", err)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (d *dialer) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	abort, cancelAbort := context.WithCancel(d.life)
	stopJoin := func() bool { return false }
	if join := d.join.Load(); join != nil {
		stopJoin = context.AfterFunc(*join, cancelAbort)
	}
	release := func() { stopJoin(); cancelAbort() }
	ctx, cancelDial := context.WithTimeout(abort, timeout)
	defer cancelDial()
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "tcp", a.Addr)
	if err != nil {
		release()
		return nil, err
	}
	// memberlist bounds reads and writes with deadlines of TCPTimeout; a
	// peer that accepted and went silent would hold the ring as long.
	stopClose := context.AfterFunc(abort, func() { _ = c.Close() })
	return &abortableConn{Conn: c, release: func() { stopClose(); release() }}, nil
}

// DialTimeout implements memberlist.Transport.
func (d *dialer) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return d.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// joining makes the dials started until the returned func is called end
// with ctx as well: Join's own, and any memberlist makes meanwhile (a
// probe's, a push/pull's), which it retries later anyway.
func (d *dialer) joining(ctx context.Context) func() {
	d.join.Store(&ctx)
	return func() { d.join.CompareAndSwap(&ctx, nil) }
}

// abortableConn is a dialed connection that the ring closes when it
// aborts its dials.
type abortableConn struct {
	net.Conn
	release func()
}

// Close closes the connection and releases its abort hook.
func (c *abortableConn) Close() error {
	c.release()
	return c.Conn.Close()
}
