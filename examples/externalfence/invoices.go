package main

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/singlewriter/singlewriter/epoch"
)

// schema is the resource outside the library: one row per invoice, keyed
// by the call's key, so that every write of a row comes from one
// partition's owner and its fence compares epochs of that one partition.
const schema = `CREATE TABLE invoices (
    id         text PRIMARY KEY,
    status     text NOT NULL,
    written_by text NOT NULL,
    fence      bigint NOT NULL DEFAULT 0
)`

// fencedUpdate is the handlers' only write. $4 is the call's req.Epoch: the
// row changes only if no newer epoch has written it, and then records
// $4. The comparison is <=, not <: an owner writes a row many times within
// its epoch.
const fencedUpdate = `UPDATE invoices SET status = $2, written_by = $3, fence = $4 WHERE id = $1 AND fence <= $4`

// unfencedUpdate is fencedUpdate without the fence predicate, the write of
// a design that trusts its lock. No handler runs it: the demo runs it once,
// on a copy of the row, to show what the predicate prevented.
const unfencedUpdate = `UPDATE invoices SET status = $2, written_by = $3, fence = $4 WHERE id = $1`

// invoice is one row of the table.
type invoice struct {
	ID        string
	Status    string
	WrittenBy string
	Fence     int64
}

func (i invoice) String() string {
	return fmt.Sprintf("%-22s status=%-10s written_by=%-8s fence=%d", i.ID, i.Status, i.WrittenBy, i.Fence)
}

// readInvoice returns the row with the given id.
func readInvoice(ctx context.Context, db *pgxpool.Pool, id string) (invoice, error) {
	i := invoice{ID: id}
	err := db.QueryRow(ctx, `SELECT status, written_by, fence FROM invoices WHERE id = $1`, id).Scan(&i.Status, &i.WrittenBy, &i.Fence)
	return i, err
}

// setStatus runs stmt (fencedUpdate or unfencedUpdate) for the row id at
// epoch e and returns the number of rows it changed.
func setStatus(ctx context.Context, db *pgxpool.Pool, stmt, id, status, writtenBy string, e epoch.Epoch) (int64, error) {
	if e > math.MaxInt64 {
		return 0, fmt.Errorf("epoch %d does not fit the bigint fence column", e)
	}
	tag, err := db.Exec(ctx, stmt, id, status, writtenBy, int64(e))
	return tag.RowsAffected(), err
}
