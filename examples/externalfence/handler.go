package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/singlewriter/singlewriter/epoch"
	"github.com/singlewriter/singlewriter/router"
)

// errFenced is returned by a handler whose UPDATE changed no row: a newer
// epoch has written the row.
var errFenced = errors.New("fenced")

// attempt is one handler's UPDATE and its outcome.
type attempt struct {
	Node   string
	Epoch  epoch.Epoch
	Status string
	Rows   int64
}

// demo is the scenario's shared state: the database, the output, the
// pausing handler's hook and the handlers' record.
type demo struct {
	db *pgxpool.Pool
	w  io.Writer
	// paused receives the epoch the first pausing handler read; it then
	// waits for release. Its call's retries, if any, do not pause.
	paused     chan epoch.Epoch
	release    chan struct{}
	pausedOnce atomic.Bool
	// life ends with the scenario: it ends a pause still waiting then.
	life context.Context

	// mu guards attempts.
	mu       sync.Mutex
	attempts []attempt
}

// handlers registers set-status on n, and set-status-paused, the same
// handler stopping after it has read its epoch until the demo releases it.
func (d *demo) handlers(n *router.Node) {
	n.Handle("set-status", d.setStatus(n, false))
	n.Handle("set-status-paused", d.setStatus(n, true))
}

// setStatus sets the invoice's status with fencedUpdate at req.Epoch. Zero
// rows changed means a newer epoch wrote the row: the handler fails, so
// its call fails and commits nothing.
func (d *demo) setStatus(n *router.Node, pause bool) router.Handler {
	return func(ctx context.Context, req *router.Request) ([]byte, error) {
		e := req.Epoch
		if pause && !d.pausedOnce.Swap(true) { // stands for a stop-the-world pause, a VM migration, a slow disk
			select {
			case d.paused <- e:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			// Such a pause does not see ctx, which ends once the
			// partition has moved: it can strike after the handler last
			// looked at ctx, its UPDATE already on its way. The fence in
			// the row is what stops that UPDATE.
			select {
			case <-d.release:
			case <-d.life.Done():
				return nil, d.life.Err()
			}
			ctx = d.life
		}
		status := string(req.Payload)
		rows, err := setStatus(ctx, d.db, fencedUpdate, string(req.Key), status, n.Name(), e)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		d.attempts = append(d.attempts, attempt{Node: n.Name(), Epoch: e, Status: status, Rows: rows})
		d.mu.Unlock()
		if rows == 0 {
			return nil, fmt.Errorf("%w: UPDATE at epoch %d changed 0 rows (a newer epoch wrote %s)", errFenced, e, req.Key)
		}
		return nil, nil
	}
}

// lastAttempt returns the newest attempt.
func (d *demo) lastAttempt() attempt {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attempts[len(d.attempts)-1]
}

// allAttempts returns every attempt so far.
func (d *demo) allAttempts() []attempt {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.attempts)
}
