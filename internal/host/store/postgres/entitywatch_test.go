package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/postgres"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// TestWatchEntities: a watch on one store hears of every entity change
// committed through another store on the same database: updates, state
// snapshots and appended facts, and of nothing that changed no entity.
func TestWatchEntities(t *testing.T) {
	t.Parallel()
	url := teststore.Postgres(t)
	ctx := t.Context()
	a := open(t, url, postgres.Options{Logger: quiet})
	b := open(t, url, postgres.Options{Logger: quiet})
	createEntity(t, b, "tnt_a", "ent_1")
	createEntity(t, b, "tnt_a", "ent_2")
	appendFacts(t, b, store.Append{Fact: fact("tnt_a", "ent_1", "fct_before")})

	rec := testutil.NewWatchRecorder(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := a.WatchEntities(wctx, rec); err != nil {
		t.Fatalf("WatchEntities: %v", err)
	}
	// Nothing before Resync(true); the fact appended before the watch
	// started is not reported.
	rec.Next(t, "resync live")

	// An update.
	if _, err := b.UpdateEntity(ctx, store.EntityUpdate{TenantID: "tnt_a", ID: "ent_1", ExpectedVersion: 2,
		Data: json.RawMessage(`{"name":"x"}`), UpdatedAt: 5}); err != nil {
		t.Fatal(err)
	}
	rec.Next(t, "changed tnt_a/ent_1")

	// A stale update and an update of a missing entity change nothing and
	// announce nothing: the next event is the update after them.
	for _, u := range []store.EntityUpdate{
		{TenantID: "tnt_a", ID: "ent_1", ExpectedVersion: 1, UpdatedAt: 6},
		{TenantID: "tnt_a", ID: "ent_missing", ExpectedVersion: 1, UpdatedAt: 6},
	} {
		if _, err := b.UpdateEntity(ctx, u); err == nil {
			t.Fatalf("UpdateEntity %+v succeeded", u)
		}
	}
	if err := b.SetEntityState(ctx, "tnt_b", "ent_1", json.RawMessage(`{}`)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetEntityState of another tenant's entity: %v, want ErrNotFound", err)
	}
	// A state snapshot.
	if err := b.SetEntityState(ctx, "tnt_a", "ent_2", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	rec.Next(t, "changed tnt_a/ent_2")

	// Appended facts, through either store; an entity-less fact changes no
	// entity. An append's entities are reported twice: once from the
	// append's own notification, which names them (an entity named by two
	// facts of a batch once), and once when the facts after the announced
	// head are read back (which covers appends by processes that do not
	// name them).
	appendFacts(t, b, store.Append{Fact: store.Fact{ID: "fct_loose", TenantID: "tnt_a", Type: "note", Timestamp: 1, CreatedAt: 1}})
	appendFacts(t, a, store.Append{Fact: fact("tnt_a", "ent_2", "fct_1")}, store.Append{Fact: fact("tnt_a", "ent_2", "fct_2")})
	rec.Next(t, "changed tnt_a/ent_2")
	rec.Next(t, "changed tnt_a/ent_2")
	appendFacts(t, b, store.Append{Fact: fact("tnt_a", "ent_1", "fct_3")})
	rec.Next(t, "changed tnt_a/ent_1")
	rec.Next(t, "changed tnt_a/ent_1")
	rec.QuietFor(t, 100*time.Millisecond)

	// The watch ends with its context, with Resync(false), and hears
	// nothing after.
	cancel()
	rec.Next(t, "resync down")
	appendFacts(t, b, store.Append{Fact: fact("tnt_a", "ent_1", "fct_4")})
	rec.QuietFor(t, 200*time.Millisecond)
}

// TestWatchEntitiesReconnects: when the listener connection dies, the watch
// says Resync(false) at once, and Resync(true) when a new connection
// listens; changes made while it was down are covered by that resync, and
// later ones are reported again.
func TestWatchEntitiesReconnects(t *testing.T) {
	t.Parallel()
	url := teststore.Postgres(t)
	ctx := t.Context()
	a := open(t, url, postgres.Options{Logger: quiet})
	b := open(t, url, postgres.Options{Logger: quiet})
	createEntity(t, b, "tnt_a", "ent_1")
	rec := testutil.NewWatchRecorder(t)
	if err := a.WatchEntities(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Next(t, "resync live")

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var killed int
	err = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND query = 'LISTEN factline_facts'`).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminated %d LISTEN connections, %v; want 1", killed, err)
	}
	rec.Next(t, "resync down")
	rec.Next(t, "resync live")
	appendFacts(t, b, store.Append{Fact: fact("tnt_a", "ent_1", "fct_1")})
	rec.Next(t, "changed tnt_a/ent_1")
}

// TestWatchEntitiesClose: closing the store ends its watches with
// Resync(false), and a watch cannot start on a closed store.
func TestWatchEntitiesClose(t *testing.T) {
	t.Parallel()
	s, err := postgres.Open(t.Context(), teststore.Postgres(t), postgres.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rec := testutil.NewWatchRecorder(t)
	if err := s.WatchEntities(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	rec.Next(t, "resync live")
	s.Close()
	rec.Next(t, "resync down")
	if err := s.WatchEntities(t.Context(), testutil.NewWatchRecorder(t)); err == nil {
		t.Fatal("WatchEntities after Close succeeded")
	}
}

// TestWatchEntitiesEmptyWatcher: for a watcher that holds nothing, the
// facts after the announced head are not read back (that would cost a
// query per commit): it is told to forget everything, once per announced
// batch. The entities an append's own notification names, and updates,
// are still reported one by one.
func TestWatchEntitiesEmptyWatcher(t *testing.T) {
	t.Parallel()
	url := teststore.Postgres(t)
	ctx := t.Context()
	a := open(t, url, postgres.Options{Logger: quiet})
	b := open(t, url, postgres.Options{Logger: quiet})
	createEntity(t, b, "tnt_a", "ent_1")
	rec := testutil.NewWatchRecorder(t)
	rec.SetEmpty(true)
	if err := a.WatchEntities(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Next(t, "resync live")
	// The append's notification names its entity; the head's then moves
	// the watch past the facts without reading them.
	appendFacts(t, b, store.Append{Fact: fact("tnt_a", "ent_1", "fct_1")})
	rec.Next(t, "changed tnt_a/ent_1")
	rec.Next(t, "resync live")
	if _, err := b.UpdateEntity(ctx, store.EntityUpdate{TenantID: "tnt_a", ID: "ent_1", ExpectedVersion: 2,
		Data: json.RawMessage(`{}`), UpdatedAt: 5}); err != nil {
		t.Fatal(err)
	}
	rec.Next(t, "changed tnt_a/ent_1")
	// Holding something again: appends are reported by entity, from the
	// first one after the last resync.
	rec.SetEmpty(false)
	appendFacts(t, b, store.Append{Fact: fact("tnt_a", "ent_1", "fct_2")})
	rec.Next(t, "changed tnt_a/ent_1")
	rec.Next(t, "changed tnt_a/ent_1")
	rec.QuietFor(t, 100*time.Millisecond)
}

// TestWatchEntitiesSilentConnection: when the path to the server stops
// carrying bytes without closing (a dropped route, a frozen server), the
// listener's heartbeat notices, the watch stops vouching for the cache,
// and it comes back live once the path does.
func TestWatchEntitiesSilentConnection(t *testing.T) {
	t.Parallel()
	direct := teststore.Postgres(t)
	proxied, px := testutil.ProxyPostgres(t, direct)
	ctx := t.Context()
	a := open(t, proxied, postgres.Options{Logger: quiet, ListenHeartbeat: 200 * time.Millisecond})
	b := open(t, direct, postgres.Options{Logger: quiet})
	createEntity(t, b, "tnt_a", "ent_1")
	rec := testutil.NewWatchRecorder(t)
	if err := a.WatchEntities(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Next(t, "resync live")

	px.Freeze()
	start := time.Now()
	rec.Next(t, "resync down")
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a silent connection went unnoticed for %v", took)
	}
	px.Thaw()
	rec.Next(t, "resync live")
	appendFacts(t, b, store.Append{Fact: fact("tnt_a", "ent_1", "fct_1")})
	rec.Next(t, "changed tnt_a/ent_1")
}
