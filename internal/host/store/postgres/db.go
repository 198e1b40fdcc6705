package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// db is the connection pool with every error it returns passed through
// markUnavailable, so a database that cannot be reached is reported as
// store.ErrUnavailable by every method, not only by those that call
// interpretError. Transactions are covered by inTx.
type db struct{ *pgxpool.Pool }

func (d db) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := d.Pool.Exec(ctx, sql, args...)
	return tag, markUnavailable(err)
}

func (d db) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := d.Pool.Query(ctx, sql, args...)
	if rows == nil {
		return nil, markUnavailable(err)
	}
	return classifiedRows{rows}, markUnavailable(err)
}

func (d db) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return classifiedRow{d.Pool.QueryRow(ctx, sql, args...)}
}

func (d db) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return classifiedBatch{d.Pool.SendBatch(ctx, b)}
}

func (d db) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.Pool.Begin(ctx)
	return tx, markUnavailable(err)
}

func (d db) Ping(ctx context.Context) error { return markUnavailable(d.Pool.Ping(ctx)) }

type classifiedRows struct{ pgx.Rows }

func (r classifiedRows) Err() error { return markUnavailable(r.Rows.Err()) }

func (r classifiedRows) Scan(dest ...any) error { return markUnavailable(r.Rows.Scan(dest...)) }

type classifiedRow struct{ pgx.Row }

func (r classifiedRow) Scan(dest ...any) error { return markUnavailable(r.Row.Scan(dest...)) }

type classifiedBatch struct{ pgx.BatchResults }

func (b classifiedBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, markUnavailable(err)
}

func (b classifiedBatch) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	if rows == nil {
		return nil, markUnavailable(err)
	}
	return classifiedRows{rows}, markUnavailable(err)
}

func (b classifiedBatch) QueryRow() pgx.Row { return classifiedRow{b.BatchResults.QueryRow()} }

func (b classifiedBatch) Close() error { return markUnavailable(b.BatchResults.Close()) }
