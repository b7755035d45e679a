package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/singlewriter/singlewriter/internal/pgserver"
)

// pgPauseTimeout is the row lock's "TTL" in the pause scenario: a session
// idle in its transaction that long is terminated, releasing its lock.
const pgPauseTimeout = 200 * time.Millisecond

// postgres is a private PostgreSQL cluster created with initdb in a
// temporary directory, listening on loopback, synchronous_commit on.
type postgres struct {
	dsn string
	// rowLock selects BEGIN; SELECT ... FOR UPDATE; UPDATE; COMMIT. Without
	// it, increments are a plain UPDATE n = n + 1: the lock-free optimum.
	rowLock bool
	undo    func() error
}

// startPostgres runs initdb and postgres from binDir with data under dir
// and creates the kv table. As root, both run as the "postgres" user.
func startPostgres(ctx context.Context, cl *cleanups, binDir, dir string, rowLock bool) (*postgres, error) {
	base := filepath.Join(dir, "postgres")
	if rowLock {
		base += "-rowlock"
	}
	srv, err := pgserver.Start(ctx, base, pgserver.Config{
		BinDir: binDir,
		User:   "bench",
		Settings: []string{
			"fsync=on", "synchronous_commit=on",
			"max_connections=300", "shared_buffers=128MB",
		},
	})
	if err != nil {
		return nil, err
	}
	pg := &postgres{dsn: srv.DSN(), rowLock: rowLock}
	pg.undo = cl.push("postgres", srv.Close)
	conn, err := pgx.Connect(ctx, pg.dsn)
	if err == nil {
		_, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS kv (k bytea PRIMARY KEY, n bigint NOT NULL, pad bytea NOT NULL)`)
		conn.Close(context.Background())
	}
	if err != nil {
		pg.undo()
		return nil, err
	}
	return pg, nil
}

// Close stops the server.
func (pg *postgres) Close() error { return pg.undo() }

// Prepare creates the keys' rows, counters at 0, with COPY.
func (pg *postgres) Prepare(ctx context.Context, keys [][]byte) error {
	conn, err := pgx.Connect(ctx, pg.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	pad := encodeValue(0)[8:]
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"kv"}, []string{"k", "n", "pad"},
		pgx.CopyFromSlice(len(keys), func(i int) ([]any, error) { return []any{keys[i], int64(0), pad}, nil }))
	return err
}

// Client opens a connection.
func (pg *postgres) Client(ctx context.Context) (Client, error) {
	conn, err := pgx.Connect(ctx, pg.dsn)
	if err != nil {
		return nil, err
	}
	return &pgClient{pg: pg, conn: conn}, nil
}

// Values reads the keys' counters, 5,000 at a time.
func (pg *postgres) Values(ctx context.Context, keys [][]byte) ([]uint64, error) {
	conn, err := pgx.Connect(ctx, pg.dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	out := make([]uint64, len(keys))
	pos := make(map[string]int, len(keys))
	for i, k := range keys {
		pos[string(k)] = i
	}
	for start := 0; start < len(keys); start += 5000 {
		rows, err := conn.Query(ctx, `SELECT k, n FROM kv WHERE k = ANY($1)`, keys[start:min(start+5000, len(keys))])
		if err != nil {
			return nil, err
		}
		var k []byte
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&k, &n}, func() error {
			out[pos[string(k)]] = uint64(n)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

type pgClient struct {
	pg   *postgres
	conn *pgx.Conn
}

// Incr runs the increment as one transaction. With the row lock and a
// pause, the session's idle_in_transaction_session_timeout is set to
// pgPauseTimeout first: the server ends a session that holds the lock
// longer, the closest a row lock comes to a TTL.
func (c *pgClient) Incr(ctx context.Context, key []byte, pause time.Duration) error {
	if !c.pg.rowLock {
		_, err := c.conn.Exec(ctx, `UPDATE kv SET n = n + 1 WHERE k = $1`, key)
		return err
	}
	if pause > 0 {
		if _, err := c.conn.Exec(ctx, fmt.Sprintf(`SET idle_in_transaction_session_timeout = %d`, pgPauseTimeout.Milliseconds())); err != nil {
			return err
		}
		defer c.reconnect(ctx)
	}
	// Two round trips, as a client that pipelines would make them: BEGIN
	// with the locking read, the write with COMMIT. The lock is held for
	// one round trip and the commit.
	var n int64
	var pad []byte
	lock := &pgx.Batch{}
	lock.Queue(`BEGIN`)
	lock.Queue(`SELECT n, pad FROM kv WHERE k = $1 FOR UPDATE`, key).QueryRow(func(row pgx.Row) error { return row.Scan(&n, &pad) })
	err := c.conn.SendBatch(ctx, lock).Close()
	if err == nil && pause > 0 {
		err = sleepCtx(ctx, pause)
	}
	if err == nil {
		write := &pgx.Batch{}
		write.Queue(`UPDATE kv SET n = $2, pad = $3 WHERE k = $1`, key, n+1, pad)
		write.Queue(`COMMIT`)
		err = c.conn.SendBatch(ctx, write).Close()
	}
	if err != nil && !c.conn.IsClosed() {
		_, _ = c.conn.Exec(context.Background(), `ROLLBACK`)
	}
	return err
}

// reconnect replaces the connection after a pause: the server may have
// terminated it, and its timeout setting must not leak into later calls.
func (c *pgClient) reconnect(ctx context.Context) {
	c.conn.Close(context.Background())
	if conn, err := pgx.Connect(ctx, c.pg.dsn); err == nil {
		c.conn = conn
	}
}

func (c *pgClient) Close() error { return c.conn.Close(context.Background()) }
