package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationFS holds the migrations applied by Open.
var migrationFS = mustSub(embeddedMigrations, "migrations")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// migration is one versioned schema change, read from a file named
// NNNN_description.sql.
type migration struct {
	version int64
	name    string
	sql     string
}

// loadMigrations reads every *.sql file at the root of fsys, ordered by
// version. Versions must be positive and unique.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := map[int64]string{}
	for _, name := range names {
		prefix, _, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		v, err := strconv.ParseInt(prefix, 10, 64)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %q: name must be NNNN_description.sql", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %q and %q share version %d", other, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: path.Base(name), sql: string(body)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return int(a.version - b.version) })
	return ms, nil
}

// migrate applies the migrations of fsys that db has not recorded yet, each
// in its own write transaction together with its schema_migrations row.
// Running it again is a no-op. A database that has a version this binary
// does not know is refused rather than written to.
func migrate(ctx context.Context, db *sql.DB, fsys fs.FS, logger *slog.Logger) error {
	ms, err := loadMigrations(fsys)
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
	if n := len(ms); current > 0 && (n == 0 || current > ms[n-1].version) {
		return fmt.Errorf("sqlite: migrate: database schema version %d is newer than this binary knows", current)
	}
	for _, m := range ms {
		applied, err := applyMigration(ctx, db, m)
		if err != nil {
			return fmt.Errorf("sqlite: migrate: %s: %w", m.name, err)
		}
		if applied {
			logger.InfoContext(ctx, "sqlite: applied migration", "version", m.version, "name", m.name)
		}
	}
	return nil
}

// applyMigration runs m unless it is recorded already. The check happens
// inside the transaction, so two processes opening the same file apply it
// once.
func applyMigration(ctx context.Context, db *sql.DB, m migration) (applied bool, err error) {
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
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.version, time.Now().UnixMilli()); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	return true, nil
}
