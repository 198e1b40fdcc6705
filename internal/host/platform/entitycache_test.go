package platform_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/entitycache"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// waitLimit bounds every wait for another process's change to show.
const waitLimit = 30 * time.Second

// process is one gateway process's platform on a shared database.
type process struct {
	svc   *platform.Service
	store store.Store
}

// openProcess opens a store of its own at location (a Postgres database
// URL, named by application_name so a test can find its connections, or a
// SQLite file) and a platform whose cache keeps entities for an hour:
// within a test, only the store's entity feed can make it read again.
func openProcess(t *testing.T, backend, location, name string) process {
	t.Helper()
	if backend == "postgres" {
		u, err := url.Parse(location)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		location = u.String()
	}
	st := teststore.OpenAt(t, backend, location)
	d, err := manifest.ParseDomain("test.yaml", []byte(domainYAML))
	if err != nil {
		t.Fatal(err)
	}
	reg := ledger.Builtin()
	reg["capped"] = capped{cap: 1 << 20}
	svc, err := platform.New(platform.Options{Store: st, Domain: d, Ledgers: reg,
		EntityCache: entitycache.Options{MaxAge: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	// Stop the platform before its store.
	t.Cleanup(func() { st.Close() })
	t.Cleanup(svc.Close)
	if svc.EntityCache() == nil {
		t.Fatal("no entity cache on " + backend)
	}
	waitUntil(t, "the entity cache of "+name+" to go live", svc.EntityCache().Live)
	return process{svc: svc, store: st}
}

// waitUntil polls cond until it holds, failing the test after waitLimit.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, waitLimit, what, cond)
}

// version reads an entity through the platform's GetEntity (the cached
// read of GET requests).
func version(t *testing.T, p process, typ, id string) int64 {
	t.Helper()
	e, err := p.svc.GetEntity(t.Context(), "tnt", id, typ, platform.Cached)
	if err != nil {
		t.Fatalf("GetEntity %s: %v", id, err)
	}
	return e.Version
}

// seen waits until process p reads version want of the entity.
func seen(t *testing.T, p process, typ, id string, want int64, after string) {
	t.Helper()
	start := time.Now()
	waitUntil(t, after+" to be seen", func() bool { return version(t, p, typ, id) == want })
	t.Logf("%s seen after %v", after, time.Since(start))
}

// TestEntityCacheTwoProcesses: two platforms with their own stores on one
// database (a PostgreSQL database, or one SQLite file), as two gateway
// processes. Reads through one are served from its cache, and every kind
// of write through the other (an update, a fact, a state snapshot) is seen
// by it, long before the cache's one-hour age limit. A process reads its
// own writes at once.
func TestEntityCacheTwoProcesses(t *testing.T) {
	t.Parallel()
	forEachBackend(t, testEntityCacheTwoProcesses)
}

func testEntityCacheTwoProcesses(t *testing.T, backend string) {
	loc := teststore.Location(t, backend)
	a := openProcess(t, backend, loc, "proc-a")
	b := openProcess(t, backend, loc, "proc-b")
	ctx := t.Context()

	if _, err := b.svc.CreateEntity(ctx, "tnt", platform.CreateEntityInput{Type: "account", ID: "acct-1", Fields: map[string]any{"name": "One"}}); err != nil {
		t.Fatal(err)
	}
	// a reads it from the database, then from its cache (once b's write
	// has been heard of: on SQLite it makes a's cache start over).
	waitUntil(t, "a read served from a's cache", func() bool {
		before := a.svc.EntityCache().Stats()
		if v := version(t, a, "account", "acct-1"); v != 1 {
			t.Fatalf("version %d, want 1", v)
		}
		return a.svc.EntityCache().Stats().Hits > before.Hits
	})

	// An update through b.
	if _, err := b.svc.UpdateEntity(ctx, "tnt", platform.UpdateEntityInput{ID: "acct-1", ExpectedVersion: 1, Patch: map[string]any{"name": "Two"}}); err != nil {
		t.Fatal(err)
	}
	seen(t, a, "account", "acct-1", 2, "an update through the other process")

	// A fact through b.
	if _, err := b.svc.AppendFact(ctx, "tnt", platform.AppendFactInput{EntityID: "acct-1", Type: "deposit", Data: map[string]any{"amount": json.Number("5")}}); err != nil {
		t.Fatal(err)
	}
	seen(t, a, "account", "acct-1", 3, "a fact through the other process")

	// A state snapshot written through b's store (as a snapshot rebuild
	// does): the version stays, the state changes.
	if _, err := b.svc.CreateEntity(ctx, "tnt", platform.CreateEntityInput{Type: "counter", ID: "ctr-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.svc.RunCommand(ctx, "tnt", "ctr-1", ledger.CommandAppend, json.RawMessage(`{"type":"tick"}`), platform.Provenance{}); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		e, err := a.svc.GetEntity(ctx, "tnt", "ctr-1", "counter", platform.Cached)
		if err != nil {
			t.Fatal(err)
		}
		return string(e.State)
	}
	if got := state(); got != `{"n":1}` && got != `{"n": 1}` {
		t.Fatalf("state %s, want n 1", got)
	}
	if err := b.store.SetEntityState(ctx, "tnt", "ctr-1", json.RawMessage(`{"n":42}`)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a state snapshot through the other process to be seen", func() bool {
		got := state()
		return got == `{"n":42}` || got == `{"n": 42}`
	})

	// Read-your-writes: a's own writes show in a's next read, with no
	// wait, while its cache serves.
	for i := int64(0); i < 20; i++ {
		v := 3 + 2*i
		if _, err := a.svc.UpdateEntity(ctx, "tnt", platform.UpdateEntityInput{ID: "acct-1", ExpectedVersion: v, Patch: map[string]any{"n": i}}); err != nil {
			t.Fatal(err)
		}
		if got := version(t, a, "account", "acct-1"); got != v+1 {
			t.Fatalf("read after own update: version %d, want %d", got, v+1)
		}
		if _, err := a.svc.AppendFact(ctx, "tnt", platform.AppendFactInput{EntityID: "acct-1", Type: "deposit"}); err != nil {
			t.Fatal(err)
		}
		if got := version(t, a, "account", "acct-1"); got != v+2 {
			t.Fatalf("read after own fact: version %d, want %d", got, v+2)
		}
	}
	if !a.svc.EntityCache().Live() {
		t.Fatal("the cache was not live during the test")
	}
}

// TestEntityCacheListenerDown: while a process's listener connection is
// down (and cannot come back), its cache serves nothing, so writes by
// another process are read at once; when the connection is back, the
// cache serves again.
func TestEntityCacheListenerDown(t *testing.T) {
	t.Parallel()
	dbURL := teststore.Location(t, "postgres")
	a := openProcess(t, "postgres", dbURL, "proc-a")
	b := openProcess(t, "postgres", dbURL, "proc-b")
	ctx := t.Context()
	if _, err := b.svc.CreateEntity(ctx, "tnt", platform.CreateEntityInput{Type: "account", ID: "acct-1", Fields: map[string]any{"name": "One"}}); err != nil {
		t.Fatal(err)
	}
	if v := version(t, a, "account", "acct-1"); v != 1 {
		t.Fatalf("version %d, want 1", v)
	}

	// The database's connections are managed from the server's
	// maintenance database.
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db := u.Path[1:]
	u.Path = "/postgres"
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	// New connections are refused (the pools keep theirs), then a's
	// listener is cut: it cannot reconnect.
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` WITH ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	allow := func() {
		if _, err := admin.Exec(context.Background(), `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` WITH ALLOW_CONNECTIONS true`); err != nil {
			t.Error(err)
		}
	}
	defer allow()
	var killed int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = $1 AND application_name = 'proc-a' AND query = 'LISTEN factline_facts'`, db).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listener connections, %v; want 1", killed, err)
	}
	waitUntil(t, "a's cache to stop serving", func() bool { return !a.svc.EntityCache().Live() })

	// b's update is not announced to a, yet a reads it at once, every time.
	if _, err := b.svc.UpdateEntity(ctx, "tnt", platform.UpdateEntityInput{ID: "acct-1", ExpectedVersion: 1, Patch: map[string]any{"name": "Two"}}); err != nil {
		t.Fatal(err)
	}
	before := a.svc.EntityCache().Stats()
	for range 3 {
		if v := version(t, a, "account", "acct-1"); v != 2 {
			t.Fatalf("read while the listener is down: version %d, want 2", v)
		}
	}
	if st := a.svc.EntityCache().Stats(); st.Hits != before.Hits {
		t.Fatalf("%d reads served from the cache while its listener was down", st.Hits-before.Hits)
	}

	allow()
	waitUntil(t, "a's cache to serve again", a.svc.EntityCache().Live)
	version(t, a, "account", "acct-1")
	before = a.svc.EntityCache().Stats()
	if v := version(t, a, "account", "acct-1"); v != 2 {
		t.Fatalf("version %d, want 2", v)
	}
	if st := a.svc.EntityCache().Stats(); st.Hits != before.Hits+1 {
		t.Fatal("the cache does not serve after the listener is back")
	}
}

// TestFreshReadsBypassTheCache: a Fresh read (a GET with Cache-Control:
// no-cache) reads the database even while the cache holds the entity and
// has heard of no change; a Cached read keeps serving the cached entity.
// The change is made behind the platform's back, with no notification, so
// only the database knows of it.
func TestFreshReadsBypassTheCache(t *testing.T) {
	t.Parallel()
	dbURL := teststore.Location(t, "postgres")
	a := openProcess(t, "postgres", dbURL, "proc-a")
	ctx := t.Context()
	if _, err := a.svc.CreateEntity(ctx, "tnt", platform.CreateEntityInput{Type: "account", ID: "acct-1", Fields: map[string]any{"name": "One"}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a read served from the cache", func() bool {
		before := a.svc.EntityCache().Stats()
		version(t, a, "account", "acct-1")
		return a.svc.EntityCache().Stats().Hits > before.Hits
	})
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `UPDATE entities SET version = 7 WHERE tenant_id = 'tnt' AND id = 'acct-1'`); err != nil {
		t.Fatal(err)
	}
	if v := version(t, a, "account", "acct-1"); v != 1 {
		t.Fatalf("cached read: version %d, want the cached 1 (the test changes nothing the cache hears of)", v)
	}
	e, err := a.svc.GetEntity(ctx, "tnt", "acct-1", "account", platform.Fresh)
	if err != nil {
		t.Fatal(err)
	}
	if e.Version != 7 {
		t.Fatalf("fresh read: version %d, want 7", e.Version)
	}
}
