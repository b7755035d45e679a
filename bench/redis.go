package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisLockTTL is the lock expiry in the measured cells: redsync's default.
const redisLockTTL = 8 * time.Second

// redisPauseTTL is the lock expiry in the pause scenario.
const redisPauseTTL = 200 * time.Millisecond

// retryPolicy is how long a client waits before trying a taken lock again.
type retryPolicy struct {
	name     string
	min, max time.Duration
}

var (
	// retryRedsync is redsync's default: a random delay in [50ms, 250ms).
	retryRedsync = retryPolicy{name: "redsync-delay", min: 50 * time.Millisecond, max: 250 * time.Millisecond}
	// retryTight retries within a random 0-1ms: the most aggressive a
	// client can be without spinning Redis's single thread.
	retryTight = retryPolicy{name: "tight-retry", min: 0, max: time.Millisecond}
)

func (r retryPolicy) delay() time.Duration {
	return r.min + mrand.N(r.max-r.min+1)
}

// releaseScript deletes the lock only if it still holds the caller's token.
var releaseScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// redisLock is a real redis-server on loopback with an append-only file,
// and clients that lock each key with SET NX PX.
type redisLock struct {
	rdb   *redis.Client
	retry retryPolicy
	undo  func() error
}

// startRedis starts redis-server (bin) with its data under dir and the
// given appendfsync policy ("always" or "everysec").
func startRedis(ctx context.Context, cl *cleanups, bin, dir, fsync string, retry retryPolicy) (*redisLock, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "redis-"+fsync+"-"+retry.name)
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	logFile := filepath.Join(data, "redis.log")
	p, err := startProcess(cl, "redis-server", bin, []string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", data,
		"--appendonly", "yes", "--appendfsync", fsync, "--save", "",
		"--daemonize", "no", "--protected-mode", "yes", "--maxclients", "1000",
	}, logFile, nil, syscall.SIGTERM)
	if err != nil {
		return nil, err
	}
	r := &redisLock{retry: retry}
	r.rdb = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), PoolSize: 300, MaxRetries: -1})
	r.undo = cl.push("redis client", func() error {
		r.rdb.Close()
		return p.stop()
	})
	if err := waitReady(ctx, p, logFile, func(ctx context.Context) error { return r.rdb.Ping(ctx).Err() }); err != nil {
		r.undo()
		return nil, err
	}
	return r, nil
}

// Close stops the client and the server.
func (r *redisLock) Close() error { return r.undo() }

// Client returns a client of the shared connection pool.
func (r *redisLock) Client(context.Context) (Client, error) { return redisClient{r}, nil }

// Values reads the keys with MGET, 1,000 at a time.
func (r *redisLock) Values(ctx context.Context, keys [][]byte) ([]uint64, error) {
	out := make([]uint64, 0, len(keys))
	for len(keys) > 0 {
		batch := keys[:min(1000, len(keys))]
		keys = keys[len(batch):]
		names := make([]string, len(batch))
		for i, k := range batch {
			names[i] = redisValueKey(k)
		}
		vs, err := r.rdb.MGet(ctx, names...).Result()
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			s, _ := v.(string)
			out = append(out, decodeValue([]byte(s)))
		}
	}
	return out, nil
}

func redisValueKey(k []byte) string { return "v:" + string(k) }
func redisLockKey(k []byte) string  { return "lock:" + string(k) }

type redisClient struct{ r *redisLock }

// Incr takes the lock (SET NX PX with a random token, retried after the
// policy's delay), GETs the value, SETs the new one and releases the lock
// with compare-and-delete. With a pause the lock's TTL is shortened to
// redisPauseTTL and the client sleeps between GET and SET: nothing fences
// its late write.
func (c redisClient) Incr(ctx context.Context, key []byte, pause time.Duration) error {
	rdb := c.r.rdb
	ttl := redisLockTTL
	if pause > 0 {
		ttl = redisPauseTTL
	}
	token := make([]byte, 16)
	rand.Read(token)
	lk := redisLockKey(key)
	for {
		ok, err := rdb.SetNX(ctx, lk, token, ttl).Result()
		if err != nil {
			return err
		}
		if ok {
			break
		}
		if err := sleepCtx(ctx, c.r.retry.delay()); err != nil {
			return err
		}
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		releaseScript.Run(rctx, rdb, []string{lk}, token)
		cancel()
	}()
	v, err := rdb.Get(ctx, redisValueKey(key)).Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if pause > 0 {
		if err := sleepCtx(ctx, pause); err != nil {
			return err
		}
	}
	return rdb.Set(ctx, redisValueKey(key), encodeValue(decodeValue(v)+1), 0).Err()
}

func (redisClient) Close() error { return nil }
