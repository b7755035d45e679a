// Command externalfence uses a partition's epoch as a fencing token on a
// resource outside the library: a PostgreSQL row. Every handler writes
//
//	UPDATE invoices SET ..., fence = $epoch WHERE id = $id AND fence <= $epoch
//
// with req.Epoch, so a paused owner that wakes up after its partition moved
// changes zero rows instead of overwriting the new owner's write.
//
// It starts a private PostgreSQL server (initdb in a temporary directory,
// 127.0.0.1) and three nodes in this process:
//
//	cd examples/externalfence && go run .
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/examples/internal/cluster"
	"github.com/singlewriter/singlewriter/internal/pgserver"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), cluster.RunBudget)
	defer cancel()
	if _, err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "externalfence:", err)
		os.Exit(1)
	}
}

// outcome is what the scenario observed; the test checks it.
type outcome struct {
	Partition          int
	OldOwner, NewOwner string
	OldEpoch, NewEpoch epoch.Epoch
	// Attempts are the handlers' UPDATEs, in the order they ran.
	Attempts []attempt
	// StaleCall is the error of the call whose handler paused.
	StaleCall error
	// Row is the invoice at the end.
	Row invoice
	// UnfencedRows and Copy are the counterfactual: the stale write run
	// without the fence predicate on a copy of the row.
	UnfencedRows int64
	Copy         invoice
}

// run starts PostgreSQL and a 3-node cluster, runs the scenario, printing
// to w, and stops everything.
func run(ctx context.Context, w io.Writer) (*outcome, error) {
	dir, err := os.MkdirTemp("", "singlewriter-externalfence-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// As root, PostgreSQL runs as the "postgres" user, which must reach
	// its directory.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	fmt.Fprintln(w, "Starting a private PostgreSQL server (initdb in a temporary directory, 127.0.0.1).")
	srv, err := pgserver.Start(ctx, filepath.Join(dir, "postgres"), pgserver.Config{})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	db, err := pgxpool.New(ctx, srv.DSN())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if _, err := db.Exec(ctx, schema); err != nil {
		return nil, err
	}

	d := &demo{db: db, w: w, paused: make(chan epoch.Epoch), release: make(chan struct{})}
	c, err := cluster.New("singlewriter-externalfence-", d.handlers)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	life, end := context.WithCancel(ctx)
	defer end() // before c.Close, which waits for a handler still paused
	d.life = life
	fmt.Fprintln(w, "Starting 3 nodes on loopback.")
	for i := range 3 {
		if _, err := c.Start(ctx, fmt.Sprintf("node-%d", i)); err != nil {
			return nil, err
		}
	}
	if err := c.WaitSettled(ctx); err != nil {
		return nil, err
	}
	return d.scenario(ctx, c)
}
