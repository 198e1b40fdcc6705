// Package teststore opens real stores of either backend for tests, so a
// test written once runs against Postgres and the embedded SQLite store.
package teststore

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/factline/factline/host/store"
	"github.com/factline/factline/host/store/postgres"
	"github.com/factline/factline/host/store/sqlite"
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
		return filepath.Join(t.TempDir(), "factline.db")
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
