package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// migrationLockKey is the pg_advisory_xact_lock key that serialises
// migrations of one database ("factline" in ASCII, as a number). Advisory
// locks are per database, so databases on one server do not contend.
const migrationLockKey int64 = 0x666163746c696e65

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
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return int(a.version - b.version) })
	return ms, nil
}

// migrate applies the migrations of fsys that the database has not recorded
// yet. Each runs in its own transaction, which takes the migration advisory
// lock, re-reads schema_migrations (another process may have applied it
// meanwhile), applies the file and records it; the lock is released at
// commit. Running migrate again is a no-op. A database that has a version
// this binary does not know is refused rather than written to.
func migrate(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, logger *slog.Logger) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	known := int64(0)
	if len(ms) > 0 {
		known = ms[len(ms)-1].version
	}
	for _, m := range ms {
		applied := false
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    bigint PRIMARY KEY,
	applied_at bigint NOT NULL
)`); err != nil {
				return err
			}
			var latest int64
			if err := tx.QueryRow(ctx, `SELECT COALESCE(max(version), 0) FROM schema_migrations`).Scan(&latest); err != nil {
				return err
			}
			if latest > known {
				return fmt.Errorf("database schema is at version %d, newer than this binary's %d", latest, known)
			}
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.version).Scan(&done); err != nil {
				return err
			}
			if done {
				return nil
			}
			// Simple protocol: a file may hold several statements.
			if _, err := tx.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
				m.version, time.Now().UnixMilli()); err != nil {
				return err
			}
			applied = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("postgres: migrate %s: %w", m.name, err)
		}
		if applied {
			logger.Info("postgres: applied migration", "version", m.version, "name", m.name)
		}
	}
	return nil
}
