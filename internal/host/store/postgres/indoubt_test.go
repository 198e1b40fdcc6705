package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/postgres"
	"github.com/factline/factline/internal/testutil"
)

// TestUnansweredWritesAreInDoubt: a write that commits by itself (one
// statement: creating an entity or a config, updating an entity) whose
// commit goes unanswered, here held for a synchronous standby that is
// gone, fails with store.ErrOutcomeUnknown, and it is indeed stored: the
// caller must not take it for a failure and write it again.
func TestUnansweredWritesAreInDoubt(t *testing.T) {
	// Not parallel: it names a synchronous standby for the whole server.
	// Only sessions with synchronous_commit on wait for it, and the
	// server's default is off (testutil), so only this store's do.
	url := testutil.Postgres(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s := open(t, url+sep+"synchronous_commit=on", postgres.Options{Logger: quiet})
	admin, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	exec := func(sql string) {
		t.Helper()
		if _, err := admin.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	now := time.Now().UnixMilli()
	entity := func(id string) *store.Entity {
		return &store.Entity{TenantID: "t1", ID: id, Type: "account", Data: json.RawMessage(`{"n":1}`), CreatedAt: now, UpdatedAt: now}
	}
	if err := s.CreateEntity(t.Context(), entity("e-before")); err != nil {
		t.Fatal(err)
	}

	exec(`ALTER SYSTEM SET synchronous_standby_names = 'factline_gone'`)
	t.Cleanup(func() {
		exec(`ALTER SYSTEM RESET synchronous_standby_names`)
		exec(`SELECT pg_reload_conf()`)
	})
	exec(`SELECT pg_reload_conf()`)
	// The setting reaches the server's processes shortly after the
	// reload: wait until a write is held.
	held := func(write func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		return write(ctx)
	}
	testutil.EventuallyNil(t, 20*time.Second, func() error {
		err := held(func(ctx context.Context) error {
			return s.CreateEntity(ctx, entity("e-probe-"+time.Now().Format("150405.000000000")))
		})
		if err == nil {
			return errors.New("a write was not held yet")
		}
		return nil
	})

	writes := []struct {
		name  string
		write func(ctx context.Context) error
	}{
		{"create entity", func(ctx context.Context) error { return s.CreateEntity(ctx, entity("e-held")) }},
		{"update entity", func(ctx context.Context) error {
			_, err := s.UpdateEntity(ctx, store.EntityUpdate{TenantID: "t1", ID: "e-before", ExpectedVersion: 1,
				Data: json.RawMessage(`{"n":2}`), UpdatedAt: now})
			return err
		}},
		{"create config", func(ctx context.Context) error {
			return s.CreateConfig(ctx, &store.Config{TenantID: "t1", ID: "c-held", Type: "settings", Name: "held",
				ScopeType: "tenant", Settings: json.RawMessage(`{"a":1}`), Status: store.ConfigActive, EffectiveAt: now, CreatedAt: now})
		}},
	}
	for _, w := range writes {
		if err := held(w.write); !errors.Is(err, store.ErrOutcomeUnknown) {
			t.Errorf("%s held for a standby: %v, want ErrOutcomeUnknown", w.name, err)
		}
	}

	exec(`ALTER SYSTEM RESET synchronous_standby_names`)
	exec(`SELECT pg_reload_conf()`)
	var n int
	if err := admin.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM entities WHERE id = 'e-held')
		+ (SELECT count(*) FROM entities WHERE id = 'e-before' AND version = 2)
		+ (SELECT count(*) FROM configs WHERE id = 'c-held')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d of the 3 writes in doubt are stored, want all: they committed locally", n)
	}
}
