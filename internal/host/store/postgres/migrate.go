package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/factline/factline/internal/host/store"
)

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationFS holds the migrations applied by Open.
var migrationFS = store.MigrationsDir(embeddedMigrations, "migrations")

// migrationLockKey is the pg_advisory_xact_lock key that serialises
// migrations of one database ("factline" in ASCII, as a number). Advisory
// locks are per database, so databases on one server do not contend.
const migrationLockKey int64 = 0x666163746c696e65

// migrate applies the migrations of fsys that the database has not recorded
// yet. Each runs in its own transaction, which takes the migration advisory
// lock, re-reads schema_migrations (another process may have applied it
// meanwhile), applies the file and records it; the lock is released at
// commit. Running migrate again is a no-op. A database that has a version
// this binary does not know is refused rather than written to.
func migrate(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, logger *slog.Logger, onApplied func(store.Migration)) error {
	ms, err := store.LoadMigrations(fsys)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	known := int64(0)
	if len(ms) > 0 {
		known = ms[len(ms)-1].Version
	}
	if migrated(ctx, pool, ms) {
		return nil
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
				return &newerSchemaError{latest: latest, known: known}
			}
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.Version).Scan(&done); err != nil {
				return err
			}
			if done {
				return nil
			}
			// Simple protocol: a file may hold several statements.
			if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
				m.Version, time.Now().UnixMilli()); err != nil {
				return err
			}
			applied = true
			return nil
		})
		var newer *newerSchemaError
		if errors.As(err, &newer) {
			return fmt.Errorf("postgres: migrate: %w", err) // no migration of ours is at fault
		}
		if err != nil {
			return fmt.Errorf("postgres: migrate %s: %w", m.Name, err)
		}
		if applied {
			logger.Info("postgres: applied migration", "version", m.Version, "name", m.Name)
			if onApplied != nil {
				onApplied(m)
			}
		}
	}
	return nil
}

// migrated reports whether the database has recorded exactly the
// migrations ms, so that opening an up-to-date database takes one query
// rather than a locked transaction per migration. Anything else (no table
// yet, a version missing or unknown, an error) leaves the answer to the
// locked path.
func migrated(ctx context.Context, pool *pgxpool.Pool, ms []store.Migration) bool {
	var versions []int64
	err := pool.QueryRow(ctx, `SELECT COALESCE(array_agg(version ORDER BY version), '{}') FROM schema_migrations`).Scan(&versions)
	if err != nil || len(versions) != len(ms) {
		return false
	}
	for i, m := range ms {
		if versions[i] != m.Version {
			return false
		}
	}
	return true
}

// querier is what reading the schema_migrations table needs.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// migrationStatus lists the migrations of fsys, each applied or pending in
// the database q reads. It writes nothing.
func migrationStatus(ctx context.Context, q querier, fsys fs.FS) ([]store.MigrationStatus, error) {
	ms, err := store.LoadMigrations(fsys)
	if err != nil {
		return nil, fmt.Errorf("postgres: migrations: %w", err)
	}
	applied := map[int64]int64{}
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("postgres: read migrations: %w", err)
	}
	if exists {
		rows, err := q.Query(ctx, `SELECT version, applied_at FROM schema_migrations`)
		if err != nil {
			return nil, fmt.Errorf("postgres: read migrations: %w", err)
		}
		var v, at int64
		if _, err := pgx.ForEachRow(rows, []any{&v, &at}, func() error { applied[v] = at; return nil }); err != nil {
			return nil, fmt.Errorf("postgres: read migrations: %w", err)
		}
	}
	st, err := store.MigrationPlan(ms, applied)
	if err != nil {
		return st, fmt.Errorf("postgres: %w", err)
	}
	return st, nil
}

// checkMigrated fails with a *store.PendingError unless every migration of
// fsys is applied.
func checkMigrated(ctx context.Context, q querier, fsys fs.FS) error {
	st, err := migrationStatus(ctx, q, fsys)
	if err != nil {
		return err
	}
	if err := store.CheckApplied(st); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// MigrationStatus connects to the database at url and lists the binary's
// migrations, each applied or pending, without changing anything.
func MigrationStatus(ctx context.Context, url string) ([]store.MigrationStatus, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return migrationStatus(ctx, conn, migrationFS)
}

// newerSchemaError: the database has migrations this binary does not know.
type newerSchemaError struct{ latest, known int64 }

func (e *newerSchemaError) Error() string {
	return fmt.Sprintf("database schema is at version %d, newer than this binary's %d: run a binary of that version or later", e.latest, e.known)
}
