package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/postgres"
	"github.com/factline/factline/internal/host/store/storetest"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// quiet discards the stores' log lines (one per applied migration).
var quiet = slog.New(slog.DiscardHandler)

// waitLimit bounds every wait for a notification or another goroutine.
const waitLimit = 10 * time.Second

// open opens a Store on url and closes it when the test ends.
func open(t *testing.T, url string, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), url, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, hooks store.Hooks) store.Store {
		// The suite closes the store; the database, a copy of the migrated
		// template, is dropped after that.
		s, err := postgres.Open(t.Context(), teststore.Postgres(t), postgres.Options{Hooks: hooks, Logger: quiet})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func TestBackend(t *testing.T) {
	t.Parallel()
	s := open(t, teststore.Postgres(t), postgres.Options{Logger: quiet})
	if got := s.Backend(); got != "postgres" {
		t.Errorf("Backend() = %q", got)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	t.Parallel()
	url := testutil.Postgres(t)
	ctx := t.Context()

	// Several processes starting together: concurrent Opens of an empty
	// database all succeed and apply each migration once.
	const n = 4
	type opened struct {
		s   *postgres.Store
		err error
	}
	results := make(chan opened, n)
	for range n {
		go func() {
			s, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 2, Logger: quiet})
			results <- opened{s, err}
		}()
	}
	for range n {
		o := <-results
		if o.err != nil {
			t.Errorf("concurrent Open: %v", o.err)
			continue
		}
		t.Cleanup(func() { o.s.Close() })
	}
	if t.Failed() {
		return
	}
	// And again, once everything is applied.
	s := open(t, url, postgres.Options{Logger: quiet})
	createEntity(t, s, "tnt_a", "ent_1")

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for i := range files {
		want = append(want, int64(i+1))
	}
	if !slices.Equal(versions, want) {
		t.Errorf("schema_migrations: got versions %v, want %v (each migration once)", versions, want)
	}

	// A database migrated by a newer binary is refused, not written to.
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (9999, 0)`); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(ctx, url, postgres.Options{Logger: quiet})
	if err == nil {
		st.Close()
		t.Fatal("Open of a database at a newer schema version succeeded")
	}
	// The error names the versions, not one of this binary's migrations.
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("database schema is at version 9999, newer than this binary's %d", len(want))) || strings.Contains(msg, ".sql") {
		t.Errorf("newer schema: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	if _, err := postgres.Open(ctx, "", postgres.Options{Logger: quiet}); err == nil {
		t.Error("Open with an empty URL succeeded")
	}
	if _, err := postgres.Open(ctx, "postgres://u:secret@[::1", postgres.Options{Logger: quiet}); err == nil {
		t.Error("Open with a malformed URL succeeded")
	} else if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q leaks the password", err)
	}
	// Nothing listens on port 1.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := postgres.Open(short, "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2", postgres.Options{Logger: quiet}); err == nil {
		t.Error("Open of an unreachable server succeeded")
	}
}

func TestTwoStoresShareFacts(t *testing.T) {
	t.Parallel()
	url := teststore.Postgres(t)
	ctx := t.Context()
	a := open(t, url, postgres.Options{Logger: quiet})
	b := open(t, url, postgres.Options{Logger: quiet})
	createEntity(t, a, "tnt_a", "ent_1")

	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake, err := b.SubscribeFacts(subCtx)
	if err != nil {
		t.Fatalf("SubscribeFacts: %v", err)
	}

	// Appends alternate between the stores; each one wakes b's
	// subscriber, including those made by a (through NOTIFY).
	for i := range 6 {
		w := a
		if i%2 == 1 {
			w = b
		}
		drain(wake)
		res := appendFacts(t, w, store.Append{Fact: fact("tnt_a", "ent_1", fmt.Sprintf("fct_%d", i))})
		if res[0].Fact.Position != int64(i+1) || res[0].Fact.Seq != int64(i+1) {
			t.Errorf("append %d: position %d seq %d, want %d", i, res[0].Fact.Position, res[0].Fact.Seq, i+1)
		}
		waitFor(t, wake, fmt.Sprintf("a wake-up on b after append %d", i))
	}
	for _, s := range []*postgres.Store{a, b} {
		facts, err := s.ReadFacts(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(facts) != 6 {
			t.Errorf("ReadFacts: got %d facts, want 6", len(facts))
		}
		e, err := s.GetEntity(ctx, "tnt_a", "ent_1")
		if err != nil {
			t.Fatal(err)
		}
		if e.Version != 7 {
			t.Errorf("entity version %d, want 7", e.Version)
		}
	}
}

func TestConcurrentStoresGaplessPositions(t *testing.T) {
	t.Parallel()
	url := teststore.Postgres(t)
	ctx := t.Context()
	stores := []*postgres.Store{open(t, url, postgres.Options{Logger: quiet}), open(t, url, postgres.Options{Logger: quiet})}
	for i := range 4 {
		createEntity(t, stores[0], "tnt_a", fmt.Sprintf("ent_%d", i))
	}

	// Writers on two stores append batches that mix good items with
	// duplicates and conflicts; positions must stay gapless and each
	// entity's seqs must run 1..n.
	const writers, batches, batchSize = 4, 10, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := 0
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%len(stores)]
			for bi := range batches {
				var items []store.Append
				for i := range batchSize {
					id := fmt.Sprintf("fct_%d_%d_%d", w, bi, i)
					if i == batchSize-1 {
						id = fmt.Sprintf("fct_%d_%d_0", w, bi) // duplicate within the batch
					}
					a := store.Append{Fact: fact("tnt_a", fmt.Sprintf("ent_%d", i%4), id)}
					if i == 3 {
						a.ExpectedVersion = 1 << 40 // always a conflict
					}
					items = append(items, a)
				}
				res, err := s.AppendFacts(ctx, items)
				if err != nil {
					t.Errorf("AppendFacts: %v", err)
					return
				}
				n := 0
				for i, r := range res {
					switch {
					case i == 3 && !errors.Is(r.Err, store.ErrVersionConflict):
						t.Errorf("item 3: %v, want a version conflict", r.Err)
					case i == batchSize-1 && !errors.Is(r.Err, store.ErrAlreadyExists):
						t.Errorf("last item: %v, want already exists", r.Err)
					case r.Err == nil:
						n++
					}
				}
				mu.Lock()
				written += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	facts, err := stores[1].ReadFacts(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != written {
		t.Fatalf("ReadFacts: %d facts, %d written", len(facts), written)
	}
	seqs := map[string][]int64{}
	for i, f := range facts {
		if f.Position != int64(i+1) {
			t.Fatalf("fact %d has position %d", i, f.Position)
		}
		seqs[f.EntityID] = append(seqs[f.EntityID], f.Seq)
	}
	for id, got := range seqs {
		for i, seq := range got {
			if seq != int64(i+1) {
				t.Fatalf("entity %s: seqs %v are not 1..n in position order", id, got)
			}
		}
		e, err := stores[0].GetEntity(ctx, "tnt_a", id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Version != int64(len(got))+1 {
			t.Errorf("entity %s: version %d after %d facts", id, e.Version, len(got))
		}
	}
	head, err := stores[0].HeadPosition(ctx)
	if err != nil || head != int64(written) {
		t.Errorf("HeadPosition = %d, %v; want %d", head, err, written)
	}
}

func TestRestart(t *testing.T) {
	t.Parallel()
	url := teststore.Postgres(t)
	ctx := t.Context()

	s, err := postgres.Open(ctx, url, postgres.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	createEntity(t, s, "tnt_a", "ent_1")
	appendFacts(t, s, store.Append{Fact: fact("tnt_a", "ent_1", "fct_1")}, store.Append{Fact: fact("tnt_a", "", "fct_2")})
	if err := s.SetCheckpoint(ctx, "projection", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s = open(t, url, postgres.Options{Logger: quiet})
	e, err := s.GetEntity(ctx, "tnt_a", "ent_1")
	if err != nil || e.Version != 2 {
		t.Fatalf("entity after reopen: %+v, %v", e, err)
	}
	if head, err := s.HeadPosition(ctx); err != nil || head != 2 {
		t.Fatalf("HeadPosition after reopen = %d, %v", head, err)
	}
	if cp, err := s.GetCheckpoint(ctx, "projection"); err != nil || cp != 2 {
		t.Fatalf("checkpoint after reopen = %d, %v", cp, err)
	}
	// Positions continue where they stopped.
	res := appendFacts(t, s, store.Append{Fact: fact("tnt_a", "ent_1", "fct_3")})
	if res[0].Fact.Position != 3 || res[0].Fact.Seq != 2 {
		t.Errorf("append after reopen: position %d seq %d, want 3 and 2", res[0].Fact.Position, res[0].Fact.Seq)
	}
}

func TestSubscribeAfterClose(t *testing.T) {
	t.Parallel()
	s, err := postgres.Open(t.Context(), teststore.Postgres(t), postgres.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.SubscribeFacts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Close closes the subscriptions.
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(waitLimit):
		t.Fatal("subscription not closed by Close")
	}
	if _, err := s.SubscribeFacts(t.Context()); err == nil {
		t.Error("SubscribeFacts after Close succeeded")
	}
}

// TestListenerReconnects kills the LISTEN connection from the server side
// and checks that notifications from another store still arrive.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	url := teststore.Postgres(t)
	ctx := t.Context()
	a := open(t, url, postgres.Options{Logger: quiet})
	b := open(t, url, postgres.Options{Logger: quiet})
	createEntity(t, a, "tnt_a", "ent_1")
	wake, err := b.SubscribeFacts(ctx)
	if err != nil {
		t.Fatal(err)
	}

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

	// The reconnection itself wakes the subscriber; after that, appends
	// through a arrive by NOTIFY.
	waitFor(t, wake, "the wake-up of the reconnection")
	deadline := time.Now().Add(waitLimit)
	for i := 0; ; i++ {
		drain(wake)
		appendFacts(t, a, store.Append{Fact: fact("tnt_a", "ent_1", fmt.Sprintf("fct_%d", i))})
		select {
		case <-wake:
			return
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no wake-up after the listener lost its connection")
		}
	}
}

func TestIdempotencyRace(t *testing.T) {
	t.Parallel()
	url := teststore.Postgres(t)
	ctx := t.Context()
	stores := []*postgres.Store{open(t, url, postgres.Options{Logger: quiet}), open(t, url, postgres.Options{Logger: quiet})}
	const rounds, callers = 20, 8
	for r := range rounds {
		key := store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/entities", Key: fmt.Sprintf("k%d", r)}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			claimed int
		)
		start := make(chan struct{})
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, ok, err := stores[c%2].BeginIdempotency(ctx, store.IdemBegin{IdemKey: key, RequestHash: "h",
					Now: 1000, LockedUntil: 2000, ExpiresAt: 10_000})
				if err != nil {
					t.Errorf("BeginIdempotency: %v", err)
					return
				}
				if ok {
					mu.Lock()
					claimed++
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		if claimed != 1 {
			t.Fatalf("round %d: %d callers claimed the key, want 1", r, claimed)
		}
	}
}

func TestJSONRejected(t *testing.T) {
	t.Parallel()
	s := open(t, teststore.Postgres(t), postgres.Options{Logger: quiet})
	ctx := t.Context()
	e := &store.Entity{TenantID: "tnt_a", ID: "ent_1", Type: "account", Data: []byte(`{"a":`), CreatedAt: 1, UpdatedAt: 1}
	if err := s.CreateEntity(ctx, e); err == nil {
		t.Error("CreateEntity with malformed data succeeded")
	}
	createEntity(t, s, "tnt_a", "ent_1")
	f := fact("tnt_a", "ent_1", "fct_1")
	f.Data = []byte(`[1,`)
	if _, err := s.AppendFacts(ctx, []store.Append{{Fact: f}}); err == nil {
		t.Error("AppendFacts with malformed data succeeded")
	}
	// A failed call wrote nothing.
	if head, err := s.HeadPosition(ctx); err != nil || head != 0 {
		t.Errorf("HeadPosition = %d, %v; want 0", head, err)
	}
}

// BenchmarkAppendFacts measures batches of the size the group-commit layer
// sends, on the durable server (fsync on) and the fast one.
func BenchmarkAppendFacts(b *testing.B) {
	for _, durable := range []bool{false, true} {
		for _, size := range []int{1, 16, 128} {
			b.Run(fmt.Sprintf("durable=%v/batch=%d", durable, size), func(b *testing.B) {
				url := testutil.Postgres(b)
				if durable {
					url = testutil.PostgresDurable(b)
				}
				ctx := context.Background()
				s, err := postgres.Open(ctx, url, postgres.Options{Logger: quiet})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				const entities = 64
				for i := range entities {
					err := s.CreateEntity(ctx, &store.Entity{TenantID: "tnt_a", ID: fmt.Sprintf("ent_%03d", i), Type: "account",
						Data: []byte(`{}`), CreatedAt: 1, UpdatedAt: 1})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				n := 0
				for b.Loop() {
					items := make([]store.Append, size)
					for i := range items {
						n++
						items[i] = store.Append{Fact: fact("tnt_a", fmt.Sprintf("ent_%03d", n%entities), fmt.Sprintf("fct_%09d", n))}
						items[i].Fact.Data = []byte(`{"amount":100,"currency":"USD"}`)
					}
					res, err := s.AppendFacts(ctx, items)
					if err != nil {
						b.Fatal(err)
					}
					if res[0].Err != nil {
						b.Fatal(res[0].Err)
					}
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "facts/s")
			})
		}
	}
}

func createEntity(t *testing.T, s store.Store, tenant, id string) {
	t.Helper()
	err := s.CreateEntity(t.Context(), &store.Entity{TenantID: tenant, ID: id, Type: "account",
		Data: []byte(`{"name":"` + id + `"}`), CreatedAt: 1, UpdatedAt: 1})
	if err != nil {
		t.Fatalf("CreateEntity %s: %v", id, err)
	}
}

func fact(tenant, entity, id string) store.Fact {
	return store.Fact{ID: id, TenantID: tenant, EntityID: entity, Type: "deposit", Timestamp: 10,
		Data: []byte(`{"amount":1}`), CreatedAt: 11}
}

// appendFacts appends items and fails the test when any fails.
func appendFacts(t *testing.T, s store.Store, items ...store.Append) []store.AppendResult {
	t.Helper()
	res, err := s.AppendFacts(t.Context(), items)
	if err != nil {
		t.Fatalf("AppendFacts: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("AppendFacts item %d: %v", i, r.Err)
		}
	}
	return res
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("channel closed while waiting for %s", what)
		}
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
	}
}

// TestOpenGivesUpOnAServerThatNeverAnswers: a server that takes the
// connection and never answers (a frozen host, a firewall that swallows
// packets) makes Open fail after the connect timeout, not hang: serve,
// migrate and keys report it and exit. A connect_timeout in the URL wins.
func TestOpenGivesUpOnAServerThatNeverAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepted
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	for _, tc := range []struct {
		name, url string
		opts      postgres.Options
	}{
		{"option", "postgres://u@" + ln.Addr().String() + "/db?sslmode=disable", postgres.Options{ConnectTimeout: 300 * time.Millisecond}},
		{"url", "postgres://u@" + ln.Addr().String() + "/db?sslmode=disable&connect_timeout=1", postgres.Options{ConnectTimeout: time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				st, err := postgres.Open(ctx, tc.url, tc.opts)
				if err == nil {
					st.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || ctx.Err() != nil {
					t.Fatalf("Open: %v (context %v), want a timeout of its own", err, ctx.Err())
				}
			case <-ctx.Done():
				t.Fatal("Open still waits after 30 s")
			}
		})
	}
}
