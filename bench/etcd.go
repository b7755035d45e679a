package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// etcdSessionTTL is the lease of a client's lock session in the measured
// cells, in seconds: etcd's concurrency package default.
const etcdSessionTTL = 60

// etcdPauseTTL is the lease of the pausing client's session in the pause
// scenario, in seconds (the minimum etcd grants with the 10ms tick below).
const etcdPauseTTL = 1

// etcdMutex is a real etcd server embedded in process, used through the
// standard concurrency.Mutex.
type etcdMutex struct {
	srv *embed.Etcd
	cli *clientv3.Client
	// unguarded writes with a plain Put instead of a Txn guarded by
	// IsOwner: how a lock protects a resource that lives outside etcd.
	unguarded bool
	undo      func() error
}

// startEtcd starts a one-member etcd cluster with its data under dir,
// fsync on (the default).
func startEtcd(ctx context.Context, cl *cleanups, dir string, unguarded bool) (*etcdMutex, error) {
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", cport))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", pport))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "bench"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// A short tick only lowers the minimum lease TTL (1.5 election
	// timeouts) so that the pause scenario runs in seconds; one member
	// never elects again.
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	srv, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	e := &etcdMutex{srv: srv, unguarded: unguarded}
	e.undo = cl.push("etcd", e.stop)
	select {
	case <-srv.Server.ReadyNotify():
	case err := <-srv.Err():
		e.undo()
		return nil, fmt.Errorf("etcd: %w", err)
	case <-time.After(30 * time.Second):
		e.undo()
		return nil, errors.New("etcd: not ready after 30s")
	case <-ctx.Done():
		e.undo()
		return nil, ctx.Err()
	}
	e.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{cu.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		e.undo()
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return e, nil
}

func (e *etcdMutex) stop() error {
	if e.cli != nil {
		e.cli.Close()
	}
	e.srv.Close()
	return nil
}

// Close stops the client and the server.
func (e *etcdMutex) Close() error { return e.undo() }

// Client opens a lock session (a lease kept alive in the background).
func (e *etcdMutex) Client(ctx context.Context) (Client, error) {
	s, err := concurrency.NewSession(e.cli, concurrency.WithTTL(etcdSessionTTL), concurrency.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	return &etcdClient{e: e, s: s}, nil
}

// Values reads the keys, 32 at a time.
func (e *etcdMutex) Values(ctx context.Context, keys [][]byte) ([]uint64, error) {
	out := make([]uint64, len(keys))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, k := range keys {
		g.Go(func() error {
			r, err := e.cli.Get(ctx, etcdValueKey(k))
			if err == nil && len(r.Kvs) > 0 {
				out[i] = decodeValue(r.Kvs[0].Value)
			}
			return err
		})
	}
	return out, g.Wait()
}

func etcdValueKey(k []byte) string { return "/v/" + string(k) }
func etcdLockKey(k []byte) string  { return "/lock/" + string(k) }

type etcdClient struct {
	e *etcdMutex
	s *concurrency.Session
}

// Incr is the standard pattern: Lock, Get, Txn(If IsOwner, Then Put),
// Unlock. With a pause, the client stops keeping its lease alive, as a
// paused process would, and sleeps: the lease expires and the lock passes
// to another client.
func (c *etcdClient) Incr(ctx context.Context, key []byte, pause time.Duration) error {
	s := c.s
	if pause > 0 {
		var err error
		if s, err = concurrency.NewSession(c.e.cli, concurrency.WithTTL(etcdPauseTTL), concurrency.WithContext(ctx)); err != nil {
			return err
		}
		defer s.Close()
	}
	m := concurrency.NewMutex(s, etcdLockKey(key))
	if err := m.Lock(ctx); err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m.Unlock(uctx)
		cancel()
	}()
	r, err := c.e.cli.Get(ctx, etcdValueKey(key))
	if err != nil {
		return err
	}
	var n uint64
	if len(r.Kvs) > 0 {
		n = decodeValue(r.Kvs[0].Value)
	}
	if pause > 0 {
		s.Orphan()
		if err := sleepCtx(ctx, pause); err != nil {
			return err
		}
	}
	put := clientv3.OpPut(etcdValueKey(key), string(encodeValue(n+1)))
	if c.e.unguarded {
		_, err := c.e.cli.Do(ctx, put)
		return err
	}
	tr, err := c.e.cli.Txn(ctx).If(m.IsOwner()).Then(put).Commit()
	if err != nil {
		return err
	}
	if !tr.Succeeded {
		return fmt.Errorf("%w: the lock was lost before the write (IsOwner guard)", errNotAcknowledged)
	}
	return nil
}

func (c *etcdClient) Close() error { return c.s.Close() }
