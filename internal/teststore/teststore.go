// Package teststore opens real stores of either backend for tests, so a
// test written once runs against Postgres and the embedded SQLite store.
// Every location starts as a copy of a database migrated once per test
// binary.
package teststore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/postgres"
	"github.com/factline/factline/internal/host/store/sqlite"
	"github.com/factline/factline/internal/testutil"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Backends names every store implementation.
var Backends = []string{"sqlite", "postgres"}

// Open returns a fresh, empty store of the backend, closed when the test
// ends. Postgres needs the test binary to run under testutil.Main.
func Open(t testing.TB, backend string) store.Store {
	t.Helper()
	st := OpenAt(t, backend, Location(t, backend))
	t.Cleanup(func() { st.Close() })
	return st
}

// Location returns a fresh location (a database URL or a SQLite file path)
// for OpenAt; opening it several times reaches the same data, which
// restart tests need.
func Location(t testing.TB, backend string) string {
	t.Helper()
	switch backend {
	case "postgres":
		return Postgres(t)
	case "sqlite":
		return SQLite(t)
	}
	t.Fatalf("teststore: unknown backend %q", backend)
	return ""
}

// Postgres returns the URL of a fresh database that holds the migrated,
// empty schema: a copy of a template migrated once per test binary, which
// is much faster than migrating each database. Open on it applies nothing.
func Postgres(t testing.TB) string {
	t.Helper()
	return testutil.PostgresFrom(t, "schema", func(ctx context.Context, url string) error {
		st, err := postgres.Open(ctx, url, postgres.Options{Logger: quiet})
		if err != nil {
			return err
		}
		return st.Close()
	})
}

// sqliteSchema holds the bytes of a migrated, empty SQLite database, made
// once per test binary.
var sqliteSchema struct {
	once sync.Once
	b    []byte
	err  error
}

// SQLite returns the path of a fresh SQLite database that holds the
// migrated, empty schema, in a directory removed when the test ends: a
// copy of one migrated once per test binary, several times faster than
// migrating each (under -race especially).
func SQLite(t testing.TB) string {
	t.Helper()
	sqliteSchema.once.Do(func() { sqliteSchema.b, sqliteSchema.err = migratedSQLite() })
	if sqliteSchema.err != nil {
		t.Fatalf("teststore: migrated SQLite database: %v", sqliteSchema.err)
	}
	path := filepath.Join(t.TempDir(), "factline.db")
	if err := os.WriteFile(path, sqliteSchema.b, 0o644); err != nil {
		t.Fatalf("teststore: %v", err)
	}
	return path
}

// migratedSQLite migrates a database in a directory of its own and returns
// its file, whole once the store is closed (the close checkpoints the WAL).
func migratedSQLite() ([]byte, error) {
	dir, err := os.MkdirTemp("", "factline-teststore-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "factline.db")
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{Logger: quiet})
	if err != nil {
		return nil, err
	}
	if err := st.Close(); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		return nil, fmt.Errorf("%s-wal holds %d bytes after close", path, fi.Size())
	}
	return os.ReadFile(path)
}

// OpenAt opens a store of the backend at a location from Location. The
// caller closes it.
func OpenAt(t testing.TB, backend, location string) store.Store {
	t.Helper()
	return OpenHooked(t, backend, location, store.Hooks{})
}

// OpenHooked is OpenAt with test hooks installed in the store.
func OpenHooked(t testing.TB, backend, location string, hooks store.Hooks) store.Store {
	t.Helper()
	var (
		st  store.Store
		err error
	)
	switch backend {
	case "postgres":
		st, err = postgres.Open(t.Context(), location, postgres.Options{Logger: quiet, Hooks: hooks})
	case "sqlite":
		st, err = sqlite.Open(t.Context(), location, sqlite.Options{Logger: quiet, Hooks: hooks})
	default:
		t.Fatalf("teststore: unknown backend %q", backend)
	}
	if err != nil {
		t.Fatalf("teststore: open %s: %v", backend, err)
	}
	return st
}
