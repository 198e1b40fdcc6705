package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/postgres"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
	"github.com/factline/factline/internal/testutil/wait"
)

// TestStalledDatabaseFailsFast: when the path to the server stops
// carrying bytes without closing (a frozen host, a route that drops
// packets), a statement in flight is cut once the stall guard's probe
// goes unanswered, new statements fail at once, both as
// store.ErrUnavailable (a 503) rather than waiting out their callers'
// deadlines, and the store works again once the server answers.
func TestStalledDatabaseFailsFast(t *testing.T) {
	t.Parallel()
	direct := teststore.Postgres(t)
	proxied, px := testutil.ProxyPostgres(t, direct)
	s := open(t, proxied, postgres.Options{Logger: quiet, StallTimeout: 500 * time.Millisecond})
	createEntity(t, s, "tnt_a", "ent_1")

	px.Freeze()
	// Deadlines far beyond the guard's: a statement that waited for one
	// has not been cut.
	read := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		_, err := s.GetEntity(ctx, "tnt_a", "ent_1")
		if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			t.Fatalf("%s: %v (deadline %v), want store.ErrUnavailable before the deadline", what, err, ctx.Err())
		}
	}
	read("a read in flight when the server stalled")
	for _, what := range []string{"a read while stalled", "a second read while stalled"} {
		read(what)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("Ping while stalled: %v (deadline %v)", err, ctx.Err())
	}
	err := s.CreateEntity(ctx, &store.Entity{TenantID: "tnt_a", ID: "ent_2", Type: "account", Data: []byte(`{}`), CreatedAt: 1, UpdatedAt: 1})
	if !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("a write while stalled: %v (deadline %v)", err, ctx.Err())
	}

	px.Thaw()
	wait.Eventually(t, 20*time.Second, "the store works again after the stall", func() bool {
		e, err := s.GetEntity(t.Context(), "tnt_a", "ent_1")
		return err == nil && e.ID == "ent_1"
	})
	if _, err := s.GetEntity(t.Context(), "tnt_a", "ent_2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the write refused while stalled: %v, want not found", err)
	}
}
