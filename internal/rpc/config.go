package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"time"

	"github.com/singlewriter/singlewriter/internal/wire"
)

const (
	defaultMaxFrame         = 16 << 20
	defaultDialTimeout      = time.Second
	defaultHandshakeTimeout = 5 * time.Second
	defaultWriteTimeout     = 10 * time.Second
)

// Handler answers one request. It runs in its own goroutine, so requests on
// one connection are handled concurrently. ctx is cancelled when the server
// closes, the connection drops or the caller cancels its call (not at the
// caller's deadline, which the server is not told). A non-nil error is sent back as its text,
// and the caller gets it as a *RemoteError. The server writes respBody after
// the handler returns, so the handler must not modify it afterwards.
type Handler func(ctx context.Context, typ uint8, body []byte) (respBody []byte, err error)

// ServerConfig configures Serve.
type ServerConfig struct {
	// Listener is where connections come from. Required; Close closes it.
	Listener net.Listener
	// Handler answers requests. Required.
	Handler Handler
	// Hello is this node's identity, sent in reply to every client's Hello.
	Hello Hello
	// ClusterID, if set, gives Hello.ClusterID at each handshake: a node
	// that joined or created its cluster after it began serving says so.
	ClusterID func() string
	// Secret, if set, is the cluster's shared secret: a client must prove
	// it knows it (a MAC over this server's fresh nonce) before any request
	// is read, and this server proves it in return. Every end must have the
	// same one, or none.
	Secret []byte
	// Accept decides whether to talk to a client, given its Hello; an error
	// refuses the connection and is sent to the client as the reason. Nil
	// accepts every client.
	Accept func(Hello) error
	// MaxFrame is the largest frame read or written, in bytes, header
	// included; the handshake tells it to the client, which sends nothing
	// larger. A larger request drops the connection; a response larger than
	// it or than the client's MaxFrame is replaced by an error response.
	// Zero means 16 MiB.
	MaxFrame int
	// HandshakeTimeout bounds how long a new connection may take to send its
	// Hello, so a silent peer does not hold a goroutine. Zero means 5s.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds each write to a connection, as ClientConfig's.
	// Zero means 10s.
	WriteTimeout time.Duration
	// Logger receives refused and dropped connections. Nil discards.
	Logger *slog.Logger
}

// validate fills in defaults and rejects bad values.
func (c *ServerConfig) validate() error {
	if c.Listener == nil {
		return errors.New("rpc: ServerConfig.Listener is nil")
	}
	if c.Handler == nil {
		return errors.New("rpc: ServerConfig.Handler is nil")
	}
	if err := validTimeout("ServerConfig.HandshakeTimeout", &c.HandshakeTimeout, defaultHandshakeTimeout); err != nil {
		return err
	}
	if err := validTimeout("ServerConfig.WriteTimeout", &c.WriteTimeout, defaultWriteTimeout); err != nil {
		return err
	}
	var err error
	c.MaxFrame, err = validMaxFrame("ServerConfig", c.MaxFrame)
	c.Logger = orDiscard(c.Logger)
	return err
}

// ClientConfig configures NewClient.
type ClientConfig struct {
	// Hello is this node's identity, sent first on every connection.
	Hello Hello
	// ClusterID, if set, gives Hello.ClusterID at each handshake, as
	// ServerConfig.ClusterID.
	ClusterID func() string
	// Secret is the cluster's shared secret, as ServerConfig.Secret: a
	// server that cannot prove it knows it is refused (ErrRefused).
	Secret []byte
	// Accept decides whether to talk to a server, given its Hello; an error
	// fails the call with ErrRefused. Nil accepts every server.
	Accept func(Hello) error
	// DialTimeout bounds Dial (with TLS, its handshake too) plus this
	// package's handshake. Zero means 1s.
	DialTimeout time.Duration
	// WriteTimeout bounds how long a write to a connection may make no
	// progress: each piece of up to 32 KiB gets between half of it and
	// all of it. A peer that stops reading (or a link that died without a
	// word, once the socket's buffers are full) holds the connection at
	// most that long before it is dropped and the calls on it fail with
	// ErrConnClosed (the next call dials again). Zero means 10s.
	WriteTimeout time.Duration
	// Dial opens the connection to addr (TCP, or TLS over it); ctx
	// carries DialTimeout and is cancelled by Close. Nil means a
	// net.Dialer. Tests set it to cut, delay and drop links.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// MaxFrame is the largest frame sent or read, in bytes, header included;
	// the handshake tells it to the server, which sends nothing larger. A
	// request larger than it or than the server's MaxFrame fails before it
	// is sent; a larger response drops the connection. Zero means 16 MiB.
	MaxFrame int
	// Logger receives lost connections. Nil discards.
	Logger *slog.Logger
}

// validate fills in defaults and rejects bad values.
func (c *ClientConfig) validate() error {
	if err := validTimeout("ClientConfig.DialTimeout", &c.DialTimeout, defaultDialTimeout); err != nil {
		return err
	}
	if err := validTimeout("ClientConfig.WriteTimeout", &c.WriteTimeout, defaultWriteTimeout); err != nil {
		return err
	}
	var err error
	c.MaxFrame, err = validMaxFrame("ClientConfig", c.MaxFrame)
	c.Logger = orDiscard(c.Logger)
	return err
}

// validTimeout sets *d, the setting named field, to def if zero and
// rejects a negative one.
func validTimeout(field string, d *time.Duration, def time.Duration) error {
	switch {
	case *d < 0:
		return fmt.Errorf("rpc: %s %v is negative", field, *d)
	case *d == 0:
		*d = def
	}
	return nil
}

// validMaxFrame returns the default for zero and rejects sizes that cannot
// hold a header or do not fit the 4-byte length prefix.
func validMaxFrame(config string, n int) (int, error) {
	switch {
	case n == 0:
		return defaultMaxFrame, nil
	case n < wire.HeaderSize || uint64(n) > math.MaxUint32:
		return n, fmt.Errorf("rpc: %s.MaxFrame %d is outside [%d, %d]", config, n, wire.HeaderSize, uint64(math.MaxUint32))
	}
	return n, nil
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
