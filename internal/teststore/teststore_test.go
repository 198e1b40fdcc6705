package teststore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/postgres"
	"github.com/factline/factline/internal/host/store/sqlite"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestLocationsHoldTheMigratedSchema: every location is a database of its
// own that already holds the schema, so opening it applies no migration.
func TestLocationsHoldTheMigratedSchema(t *testing.T) {
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			a, b := teststore.Location(t, backend), teststore.Location(t, backend)
			if a == b {
				t.Fatalf("two calls returned the same location %s", a)
			}
			for i, loc := range []string{a, b} {
				var logs bytes.Buffer
				st := open(ctx, t, backend, loc, slog.New(slog.NewTextHandler(&logs, nil)))
				if strings.Contains(logs.String(), "applied migration") {
					t.Errorf("location %d: Open applied migrations:\n%s", i, logs.String())
				}
				// The first copy's entity is not in the second.
				e := &store.Entity{TenantID: "tnt_a", ID: "ent_1", Type: "account", Data: json.RawMessage(`{}`), CreatedAt: 1, UpdatedAt: 1}
				if err := st.CreateEntity(ctx, e); err != nil {
					t.Errorf("location %d: CreateEntity: %v", i, err)
				}
				st.Close()
			}
		})
	}
}

func open(ctx context.Context, t *testing.T, backend, loc string, logger *slog.Logger) store.Store {
	t.Helper()
	var (
		st  store.Store
		err error
	)
	if backend == "postgres" {
		st, err = postgres.Open(ctx, loc, postgres.Options{Logger: logger})
	} else {
		st, err = sqlite.Open(ctx, loc, sqlite.Options{Logger: logger})
	}
	if err != nil {
		t.Fatalf("open %s: %v", loc, err)
	}
	return st
}
