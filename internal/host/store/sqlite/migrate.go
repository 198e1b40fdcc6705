package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/factline/factline/internal/host/store"
)

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationFS holds the migrations applied by Open.
var migrationFS = store.MigrationsDir(embeddedMigrations, "migrations")

// migrate applies the migrations of fsys that db has not recorded yet, each
// in its own write transaction together with its schema_migrations row.
// Running it again is a no-op. A database that has a version this binary
// does not know is refused rather than written to.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS, logger *slog.Logger, onApplied func(store.Migration)) error {
	ms, err := store.LoadMigrations(fsys)
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	const ddl = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at INTEGER NOT NULL
)`
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("sqlite: migrate: create schema_migrations: %w", err)
	}
	var current int64
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("sqlite: migrate: read version: %w", err)
	}
	if n := len(ms); current > 0 && (n == 0 || current > ms[n-1].Version) {
		return fmt.Errorf("sqlite: migrate: database schema version %d is newer than this binary knows", current)
	}
	for _, m := range ms {
		applied, err := applyMigration(ctx, db, m)
		if err != nil {
			return fmt.Errorf("sqlite: migrate: %s: %w", m.Name, err)
		}
		if applied {
			logger.InfoContext(ctx, "sqlite: applied migration", "version", m.Version, "name", m.Name)
			if onApplied != nil {
				onApplied(m)
			}
		}
	}
	return nil
}

// applyMigration runs m unless it is recorded already. The check happens
// inside the transaction, so two processes opening the same file apply it
// once.
func applyMigration(ctx context.Context, db *sql.DB, m store.Migration) (applied bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil || !applied {
			_ = tx.Rollback()
		}
	}()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.Version, time.Now().UnixMilli()); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	return true, nil
}

// migrationStatus lists the migrations of fsys, each applied or pending in
// db. It writes nothing.
func migrationStatus(ctx context.Context, db *sql.DB, fsys fs.FS) ([]store.MigrationStatus, error) {
	ms, err := store.LoadMigrations(fsys)
	if err != nil {
		return nil, fmt.Errorf("sqlite: migrations: %w", err)
	}
	applied := map[int64]int64{}
	var n int // a nil db is a file not created yet
	if db != nil {
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n); err != nil {
			return nil, fmt.Errorf("sqlite: read migrations: %w", err)
		}
	}
	if n > 0 {
		rows, err := db.QueryContext(ctx, `SELECT version, applied_at FROM schema_migrations`)
		if err != nil {
			return nil, fmt.Errorf("sqlite: read migrations: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var v, at int64
			if err := rows.Scan(&v, &at); err != nil {
				return nil, fmt.Errorf("sqlite: read migrations: %w", err)
			}
			applied[v] = at
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("sqlite: read migrations: %w", err)
		}
	}
	st, err := store.MigrationPlan(ms, applied)
	if err != nil {
		return st, fmt.Errorf("sqlite: %w", err)
	}
	return st, nil
}

// checkMigrated fails with a *store.PendingError unless every migration of
// fsys is applied.
func checkMigrated(ctx context.Context, db *sql.DB, fsys fs.FS) error {
	st, err := migrationStatus(ctx, db, fsys)
	if err != nil {
		return err
	}
	if err := store.CheckApplied(st); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	return nil
}

// MigrationStatus lists the binary's migrations, each applied or pending in
// the database file at path, without changing anything. A file that does
// not exist has every migration pending.
func MigrationStatus(ctx context.Context, path string) ([]store.MigrationStatus, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return migrationStatus(ctx, nil, migrationFS)
	}
	db, err := sql.Open("sqlite", path+"?"+dsnParams(true))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	defer db.Close()
	return migrationStatus(ctx, db, migrationFS)
}
