package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

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
	s := open(t, testutil.WithSetting(url, "synchronous_commit", "on"), postgres.Options{Logger: quiet})
	exec := testutil.PostgresExec(t, url)
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
	// They committed locally: each is there.
	if _, err := s.GetEntity(t.Context(), "t1", "e-held"); err != nil {
		t.Errorf("the created entity in doubt: %v", err)
	}
	if e, err := s.GetEntity(t.Context(), "t1", "e-before"); err != nil || e.Version != 2 {
		t.Errorf("the updated entity in doubt: %+v %v, want version 2", e, err)
	}
	if _, err := s.GetConfig(t.Context(), "t1", "c-held"); err != nil {
		t.Errorf("the created config in doubt: %v", err)
	}
}
