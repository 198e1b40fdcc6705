package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/factline/factline/internal/host/store"
)

// busyTimeoutMS is how long a connection waits for a lock held by another
// connection (another process sharing the file, or a WAL checkpoint) before
// failing with SQLITE_BUSY.
const busyTimeoutMS = 10000

// Options configure a Store. The zero value is valid.
type Options struct {
	// Hooks are test seams; production code leaves them zero.
	Hooks store.Hooks
	// Logger receives migration and lifecycle messages; nil means
	// slog.Default().
	Logger *slog.Logger
	// SkipMigrations leaves the schema alone: Open fails with a
	// *store.PendingError when the database lacks a migration.
	SkipMigrations bool
	// Applied, when set, is told each migration this Open applied (not
	// one another process applied meanwhile).
	Applied func(store.Migration)
}

// Store is the SQLite implementation of [store.Store]. It is safe for
// concurrent use.
type Store struct {
	w      *sql.DB   // single connection, BEGIN IMMEDIATE: the only writer
	r      *readPool // query-only connections for reads, with their statements
	hooks  store.Hooks
	logger *slog.Logger
	facts  *broadcaster
	watch  *watches

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open opens the database file at path, creating it and its parent directory
// when missing, and applies pending schema migrations.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: open: empty path")
	}
	if strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") || path == ":memory:" {
		// The path is handed to the driver as a DSN; a query string or a URI
		// would change its meaning, and an in-memory database cannot be
		// shared by the write and read pools.
		return nil, fmt.Errorf("sqlite: open: path %q must be a plain file path", path)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sqlite: open: create directory: %w", err)
		}
	}

	w, err := sql.Open("sqlite", path+"?"+dsnParams(false))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open writer: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open writer: %w", err)
	}
	if opts.SkipMigrations {
		err = checkMigrated(ctx, w, migrationFS)
	} else {
		err = migrate(ctx, w, migrationFS, logger, opts.Applied)
	}
	if err != nil {
		w.Close()
		return nil, err
	}

	r, err := sql.Open("sqlite", path+"?"+dsnParams(true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open readers: %w", err)
	}
	readers := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite: open readers: %w", err)
	}

	return &Store{
		w:      w,
		r:      newReadPool(r),
		hooks:  opts.Hooks,
		logger: logger,
		facts:  newBroadcaster(),
		watch:  newWatches(),
	}, nil
}

// dsnParams returns the connection parameters for the write connection or,
// when readOnly, for the read pool. journal_mode=WAL is persistent in the
// file, so only the writer (which connects first) sets it.
func dsnParams(readOnly bool) string {
	p := []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMS),
		"_pragma=foreign_keys(1)",
	}
	if readOnly {
		p = append(p, "_pragma=query_only(1)")
	} else {
		p = append(p, "_pragma=journal_mode(WAL)", "_txlock=immediate")
	}
	return strings.Join(p, "&")
}

// Backend returns "sqlite".
func (s *Store) Backend() string { return "sqlite" }

// Ping checks that both pools answer.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping writer: %w", err)
	}
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping readers: %w", err)
	}
	return nil
}

// Close ends entity watches, closes fact subscriptions and both pools. Calling it again returns
// the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.watch.close()
		s.facts.close()
		s.closeErr = errors.Join(s.r.Close(), s.w.Close())
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("sqlite: close: %w", s.closeErr)
		}
	})
	return s.closeErr
}

// write runs fn in a write transaction (BEGIN IMMEDIATE) and commits when fn
// returns nil.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Helpers for optional columns: empty strings and empty JSON are stored as
// NULL and read back as "" and nil.

func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

func nullJSON(j json.RawMessage) sql.NullString {
	return sql.NullString{String: string(j), Valid: len(j) > 0}
}

func jsonOrNil(ns sql.NullString) json.RawMessage {
	if !ns.Valid {
		return nil
	}
	return json.RawMessage(ns.String)
}

func nullInt(p *int64) sql.NullInt64 {
	if p == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: *p, Valid: true}
}

func intPtr(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	v := n.Int64
	return &v
}

// objectOrEmpty returns j, or "{}" when j is empty, for NOT NULL JSON
// columns that default to the empty object.
func objectOrEmpty(j json.RawMessage) string {
	if len(j) == 0 {
		return "{}"
	}
	return string(j)
}

// sqlLimit maps a non-positive limit to SQLite's "no limit".
func sqlLimit(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
