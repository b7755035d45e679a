package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// Row names, as they appear in the output.
const (
	rowSingleWriter       = "singlewriter"
	rowSingleWriterOwner  = "singlewriter-owner"
	rowSingleWriterRF3    = "singlewriter-rf3"
	rowEtcd               = "etcd-mutex"
	rowEtcdUnguarded      = "etcd-mutex-unguarded"
	rowRedis              = "redis-lock"
	rowRedisTight         = "redis-lock-tight"
	rowRedisEverysec      = "redis-lock-everysec"
	rowRedisEverysecTight = "redis-lock-everysec-tight"
	rowPgRowLock          = "postgres-row-lock"
	rowPgUpdate           = "postgres-update"
)

// targetRows are this library's rows that the targets are checked on:
// replication factor 1 (the floor is one disk's fsync), and 3, the
// library's default.
var targetRows = []string{rowSingleWriter, rowSingleWriterRF3}

// env is what a row needs to start its system.
type env struct {
	cl  *cleanups
	dir string
	// redisBin and pgBinDir are empty when not installed.
	redisBin, pgBinDir string
}

// row is one system of the comparison.
type row struct {
	name    string
	durable bool
	// cells is false for rows that only run the pause scenario.
	cells bool
	// pause is the pause scenario's pause; zero skips the scenario (the
	// row has no critical section to pause in).
	pause time.Duration
	// needs names the binary the row needs ("" for none).
	needs string
	start func(ctx context.Context, e env) (System, error)
}

// rows returns every row of the comparison, in output order.
func rows() []row {
	sw := func(ownerAware bool, rf int) func(context.Context, env) (System, error) {
		return func(ctx context.Context, e env) (System, error) {
			return startSingleWriter(ctx, e.cl, filepath.Join(e.dir, fmt.Sprintf("sw-owner-%v-rf%d", ownerAware, rf)), ownerAware, rf)
		}
	}
	etcd := func(unguarded bool) func(context.Context, env) (System, error) {
		return func(ctx context.Context, e env) (System, error) {
			return startEtcd(ctx, e.cl, filepath.Join(e.dir, fmt.Sprintf("etcd-unguarded-%v", unguarded)), unguarded)
		}
	}
	redis := func(fsync string, retry retryPolicy) func(context.Context, env) (System, error) {
		return func(ctx context.Context, e env) (System, error) {
			return startRedis(ctx, e.cl, e.redisBin, e.dir, fsync, retry)
		}
	}
	pg := func(rowLock bool) func(context.Context, env) (System, error) {
		return func(ctx context.Context, e env) (System, error) {
			return startPostgres(ctx, e.cl, e.pgBinDir, e.dir, rowLock)
		}
	}
	// The pause must outlast each lock's TTL: Redis's and PostgreSQL's are
	// 200ms; an etcd lease of 1s is found expired within another 0.5-1s.
	const pause, etcdPause = time.Second, 2500 * time.Millisecond
	return []row{
		{name: rowSingleWriter, durable: true, cells: true, pause: pause, start: sw(false, 1)},
		{name: rowSingleWriterOwner, durable: true, cells: true, pause: pause, start: sw(true, 1)},
		{name: rowSingleWriterRF3, durable: true, cells: true, pause: pause, start: sw(false, 3)},
		{name: rowEtcd, durable: true, cells: true, pause: etcdPause, start: etcd(false)},
		{name: rowEtcdUnguarded, durable: true, pause: etcdPause, start: etcd(true)},
		{name: rowRedis, durable: true, cells: true, pause: pause, needs: "redis-server", start: redis("always", retryRedsync)},
		{name: rowRedisTight, durable: true, cells: true, pause: pause, needs: "redis-server", start: redis("always", retryTight)},
		{name: rowRedisEverysec, cells: true, needs: "redis-server", start: redis("everysec", retryRedsync)},
		{name: rowRedisEverysecTight, cells: true, needs: "redis-server", start: redis("everysec", retryTight)},
		{name: rowPgRowLock, durable: true, cells: true, pause: pause, needs: "postgres", start: pg(true)},
		{name: rowPgUpdate, durable: true, cells: true, needs: "postgres", start: pg(false)},
	}
}

// installHints says how to get each optional binary.
var installHints = map[string]string{
	"redis-server": "apt-get install redis-server (Debian/Ubuntu), brew install redis (macOS)",
	"postgres":     "apt-get install postgresql (Debian/Ubuntu), brew install postgresql (macOS)",
}
