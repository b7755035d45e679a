package router

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConfigOutOfRangeIsRefused checks that New refuses each value out of
// its documented range, naming the field, instead of replacing it or
// failing later.
func TestConfigOutOfRangeIsRefused(t *testing.T) {
	for _, tc := range []struct {
		field string
		set   func(*Config)
	}{
		{"RPCAddr", func(c *Config) { c.RPCAddr = "0.0.0.0:0" }},
		{"RPCAddr", func(c *Config) { c.RPCAddr = "[::]:7947" }},
		{"RPCAddr", func(c *Config) { c.RPCAddr = ":7947" }},
		{"RPCAddr", func(c *Config) { c.RPCAddr = "127.0.0.1" }},
		{"Partitions", func(c *Config) { c.Partitions = MaxPartitions + 1 }},
		{"MaxPayload", func(c *Config) { c.MaxPayload = MaxPayloadLimit + 1 }},
		{"SettleTime", func(c *Config) { c.SettleTime = -time.Second }},
		{"DrainTimeout", func(c *Config) { c.DrainTimeout = -time.Second }},
		{"DedupRetention", func(c *Config) { c.DedupRetention = -time.Second }},
		{"PushPullInterval", func(c *Config) { c.PushPullInterval = -time.Second }},
		{"TLS", func(c *Config) { c.TLS = &tls.Config{} }},
		{"GossipAddr", func(c *Config) { c.GossipAddr = "localhost:0" }},
		{"GossipAddr", func(c *Config) { c.GossipAddr = "127.0.0.1:port" }},
		{"GossipAddr", func(c *Config) { c.GossipAddr = "127.0.0.1:70000" }},
		{"GossipPreset", func(c *Config) { c.GossipPreset = "wan" }},
		{"SecretKey", func(c *Config) { c.SecretKey = []byte("short") }},
		{"Cluster", func(c *Config) { c.Cluster = strings.Repeat("c", 600) }},
	} {
		cfg := Config{Name: "n0", DataDir: filepath.Join(t.TempDir(), "n0")}
		tc.set(&cfg)
		n, err := New(cfg)
		if err == nil {
			n.Close()
		}
		require.ErrorContains(t, err, "Config."+tc.field, "%+v", cfg)
	}
	cfg := Config{Name: "n0", DataDir: filepath.Join(t.TempDir(), "n0"), Partitions: MaxPartitions, MaxPayload: MaxPayloadLimit}
	n, err := New(cfg)
	require.NoError(t, err, "the bounds themselves are allowed")
	require.NoError(t, n.Close())
}

func TestHandleRefusesAnEmptyMethodOrANilHandler(t *testing.T) {
	n, err := New(Config{Name: "n0", DataDir: t.TempDir()})
	require.NoError(t, err)
	defer n.Close()
	require.Panics(t, func() { n.Handle("", counter) })
	require.Panics(t, func() { n.Handle("inc", nil) })
	require.NotPanics(t, func() { n.Handle("inc", counter) })
}

// TestMethodsAfterCloseReturnErrClosed closes one node never started and
// one whose Start failed, and checks that Start, Leave, Call and Audit
// then return ErrClosed and start nothing.
func TestMethodsAfterCloseReturnErrClosed(t *testing.T) {
	ctx := context.Background()
	closed, err := New(Config{Name: "n0", DataDir: filepath.Join(t.TempDir(), "n0")})
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	require.ErrorIs(t, closed.Start(ctx), ErrClosed)
	waitFor(t, 10*time.Second, func() error { // earlier tests' nodes may still be exiting
		if left := libraryGoroutines(); len(left) > 0 {
			return fmt.Errorf("Start after Close left %d goroutines, first:\n%s", len(left), left[0])
		}
		return nil
	})

	failed, err := New(Config{Name: "n1", DataDir: filepath.Join(t.TempDir(), "n1"), RPCAddr: "256.0.0.1:1"})
	require.NoError(t, err)
	require.Error(t, failed.Start(ctx))

	for _, n := range []*Node{closed, failed} {
		require.ErrorIs(t, n.Leave(ctx), ErrClosed)
		_, err = n.Call(ctx, []byte("k"), "inc", nil)
		require.ErrorIs(t, err, ErrClosed)
		_, err = n.Audit(0)
		require.ErrorIs(t, err, ErrClosed)
	}
}

// TestLeaveOfANodeThatNeverStartedClosesIt: nothing to hand off.
func TestLeaveOfANodeThatNeverStartedClosesIt(t *testing.T) {
	n, err := New(Config{Name: "n0", DataDir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, n.Leave(context.Background()))
	require.ErrorIs(t, n.Leave(context.Background()), ErrClosed)
}

// TestCloseDuringStartEndsItAndLeavesNothingRunning starts a node whose
// only seed refuses every join, so that Start waits in its join, and
// closes it meanwhile, from another goroutine as a signal handler would.
func TestCloseDuringStartEndsItAndLeavesNothingRunning(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	seed := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing answers there now
	n, err := New(Config{Name: "n0", DataDir: t.TempDir(), Seeds: []string{seed}})
	require.NoError(t, err)
	started := make(chan error, 1)
	go func() { started <- n.Start(context.Background()) }()
	waitFor(t, 10*time.Second, func() error {
		if n.GossipAddr() == "" {
			return errors.New("no ring yet")
		}
		return nil
	})
	require.NoError(t, n.Close())
	select {
	case err := <-started:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not end after Close")
	}
	waitFor(t, 10*time.Second, func() error {
		if left := libraryGoroutines(); len(left) > 0 {
			return fmt.Errorf("%d goroutines left, first:\n%s", len(left), left[0])
		}
		return nil
	})
}

// The secret is read on every handshake and gossip packet: a caller that
// wipes its key after New must not change the node's.
func TestNewKeepsACopyOfTheSecretKey(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	n, err := New(Config{Name: "n", DataDir: t.TempDir(), Bootstrap: true, SecretKey: secret})
	require.NoError(t, err)
	defer n.Close()
	clear(secret)
	require.Equal(t, bytes.Repeat([]byte{7}, 32), n.cfg.SecretKey)
}
