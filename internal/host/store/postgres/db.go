package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// db is the connection pool with every error it returns classified by
// its stall guard (markUnavailable, and statements the guard cut), so a
// database that cannot be reached or does not answer is reported as
// store.ErrUnavailable by every method, not only by those that call
// interpretError. Transactions are covered by inTx.
type db struct {
	*pgxpool.Pool
	g *stallGuard
}

func (d db) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := d.Pool.Exec(ctx, sql, args...)
	return tag, d.g.classify(err)
}

func (d db) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := d.Pool.Query(ctx, sql, args...)
	if rows == nil {
		return nil, d.g.classify(err)
	}
	return classifiedRows{rows, d.g}, d.g.classify(err)
}

func (d db) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return classifiedRow{d.Pool.QueryRow(ctx, sql, args...), d.g}
}

func (d db) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return classifiedBatch{d.Pool.SendBatch(ctx, b), d.g}
}

func (d db) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.Pool.Begin(ctx)
	return tx, d.g.classify(err)
}

func (d db) Ping(ctx context.Context) error { return d.g.classify(d.Pool.Ping(ctx)) }

type classifiedRows struct {
	pgx.Rows
	g *stallGuard
}

func (r classifiedRows) Err() error { return r.g.classify(r.Rows.Err()) }

func (r classifiedRows) Scan(dest ...any) error { return r.g.classify(r.Rows.Scan(dest...)) }

type classifiedRow struct {
	pgx.Row
	g *stallGuard
}

func (r classifiedRow) Scan(dest ...any) error { return r.g.classify(r.Row.Scan(dest...)) }

type classifiedBatch struct {
	pgx.BatchResults
	g *stallGuard
}

func (b classifiedBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, b.g.classify(err)
}

func (b classifiedBatch) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	if rows == nil {
		return nil, b.g.classify(err)
	}
	return classifiedRows{rows, b.g}, b.g.classify(err)
}

func (b classifiedBatch) QueryRow() pgx.Row { return classifiedRow{b.BatchResults.QueryRow(), b.g} }

func (b classifiedBatch) Close() error { return b.g.classify(b.BatchResults.Close()) }
