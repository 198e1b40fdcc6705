package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/testutil"
)

// waitLong bounds every wait of these tests: generous, for a loaded machine.
const waitLong = 60 * time.Second

// holdFlights makes the store's single-key reads wait for release, and
// returns it.
func holdFlights(s *Store) (release func()) {
	gate := make(chan struct{})
	one := s.reads.one
	s.reads.one = func(ctx context.Context, tenant, id string) (*store.Entity, error) {
		<-gate
		return one(ctx, tenant, id)
	}
	return sync.OnceFunc(func() { close(gate) })
}

func pendingReads(s *Store) int {
	return s.reads.g.Pending()
}

// TestGetEntityGathersConcurrentReads: while readFlights reads are in
// flight, the GetEntity calls that arrive are answered by one statement
// for all of them: every call gets its own entity, a missing or another
// tenant's id ErrNotFound.
func TestGetEntityGathersConcurrentReads(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	for i := range 50 {
		e := &store.Entity{TenantID: fmt.Sprintf("t%d", i%5), ID: fmt.Sprintf("e%02d", i), Type: "account",
			Data: []byte(fmt.Sprintf(`{"n":%d}`, i)), CreatedAt: 1, UpdatedAt: 1}
		if err := s.CreateEntity(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	release := holdFlights(s)
	defer release()

	type call struct {
		tenant, id string
		e          *store.Entity
		err        error
		done       chan struct{}
	}
	start := func(tenant, id string) *call {
		c := &call{tenant: tenant, id: id, done: make(chan struct{})}
		go func() {
			defer close(c.done)
			c.e, c.err = s.GetEntity(ctx, tenant, id)
		}()
		return c
	}
	// One call at a time, so that each flight holds one read.
	var held []*call
	for i := range readFlights {
		held = append(held, start(fmt.Sprintf("t%d", i%5), fmt.Sprintf("e%02d", i)))
		testutil.Eventually(t, waitLong, fmt.Sprintf("flight %d holds a read", i+1), func() bool {
			return s.reads.statements.Load() == int64(i+1)
		})
	}

	var gathered []*call
	for i := range 60 { // e50..e59 do not exist; e05 twice
		gathered = append(gathered, start(fmt.Sprintf("t%d", i%5), fmt.Sprintf("e%02d", i)))
	}
	gathered = append(gathered, start("t0", "e05"), start("t1", "e05"), start("t0", "e01"))
	testutil.Eventually(t, waitLong, "the calls wait together", func() bool { return pendingReads(s) == len(gathered) })
	release()
	for _, c := range append(held, gathered...) {
		select {
		case <-c.done:
		case <-time.After(waitLong):
			t.Fatalf("GetEntity %s/%s did not return", c.tenant, c.id)
		}
	}
	if got, want := s.reads.statements.Load(), int64(readFlights+1); got != want {
		t.Errorf("%d statements for %d reads, want %d", got, len(held)+len(gathered), want)
	}
	for _, c := range append(held, gathered...) {
		var i int
		fmt.Sscanf(c.id, "e%d", &i)
		if i >= 50 || c.tenant != fmt.Sprintf("t%d", i%5) {
			if !errors.Is(c.err, store.ErrNotFound) {
				t.Errorf("GetEntity %s/%s: %v, %v, want ErrNotFound", c.tenant, c.id, c.e, c.err)
			}
			continue
		}
		if c.err != nil || c.e.TenantID != c.tenant || c.e.ID != c.id || !strings.Contains(string(c.e.Data), fmt.Sprintf(`"n": %d}`, i)) {
			t.Errorf("GetEntity %s/%s: %+v, %v", c.tenant, c.id, c.e, c.err)
		}
	}
}

// TestGetEntityGatheredCallerGivesUp: a call that gives up returns its
// context's error without failing the calls read with it, and the shared
// statement is cancelled only once every one of its calls has given up.
func TestGetEntityGatheredCallerGivesUp(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	hold := make(chan struct{})
	b := newEntityReads(
		func(ctx context.Context, tenant, id string) (*store.Entity, error) {
			if tenant == "held" {
				<-hold
				return nil, nil
			}
			return nil, errors.New("unexpected single read")
		},
		func(ctx context.Context, tenants, ids []string) ([]*store.Entity, error) {
			started <- struct{}{}
			<-ctx.Done()
			cancelled <- ctx.Err()
			return nil, ctx.Err()
		},
	)
	// Every flight busy with a lone read held until both calls wait.
	for i := range readFlights {
		go b.get(t.Context(), "held", fmt.Sprint(i))
		testutil.Eventually(t, waitLong, fmt.Sprintf("flight %d holds a read", i+1), func() bool {
			return b.statements.Load() == int64(i+1)
		})
	}
	ctxA, cancelA := context.WithCancel(t.Context())
	ctxB, cancelB := context.WithCancel(t.Context())
	defer cancelA()
	defer cancelB()
	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() { _, err := b.get(ctxA, "t", "a"); errA <- err }()
	go func() { _, err := b.get(ctxB, "t", "b"); errB <- err }()
	testutil.Eventually(t, waitLong, "both calls wait", func() bool {
		return b.g.Pending() == 2
	})
	close(hold)
	<-started
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call that gave up: %v, want context.Canceled", err)
	}
	select {
	case err := <-cancelled:
		t.Fatalf("the statement was cancelled (%v) while a call still waited for it", err)
	default:
	}
	cancelB()
	select {
	case <-cancelled:
	case <-time.After(waitLong):
		t.Fatal("the statement was not cancelled once every call gave up")
	}
	if err := <-errB; !errors.Is(err, context.Canceled) {
		t.Fatalf("the second call: %v, want context.Canceled", err)
	}
}

// TestGetEntitiesUsesThePrimaryKey: the statement of gathered reads looks
// each key up in the primary key, on a table of many tenants' entities.
func TestGetEntitiesUsesThePrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	_, err := s.pool.Exec(ctx, `INSERT INTO entities (tenant_id, id, type, version, data, created_at, updated_at)
SELECT 'tnt_' || (g % 100), 'ent_' || g, 'account', 1, '{}', 1, 1 FROM generate_series(1, 20000) AS g`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE entities`); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 64, readBatchMax} {
		tenants, ids := make([]string, n), make([]string, n)
		for i := range n {
			tenants[i], ids[i] = fmt.Sprintf("tnt_%d", i*7%100), fmt.Sprintf("ent_%d", i*7+1)
		}
		p := explain(t, s, getEntities, tenants, ids)
		if !strings.Contains(p, "entities_pkey") || strings.Contains(p, "Seq Scan on entities") {
			t.Errorf("%d keys: the plan does not look keys up in entities_pkey:\n%s", n, p)
		}
	}
}

// fillEntities inserts n entities of 100 tenants, with no ANALYZE after.
func fillEntities(t *testing.T, s *Store, n int) {
	t.Helper()
	_, err := s.pool.Exec(t.Context(), `INSERT INTO entities (tenant_id, id, type, version, data, created_at, updated_at)
SELECT 'tnt_' || (g % 100), 'ent_' || g, 'account', 1, '{"pad":"0123456789012345678901234567890123456789"}', 1, 1
FROM generate_series(1, $1::int) AS g`, n)
	if err != nil {
		t.Fatal(err)
	}
}

// readConn is a connection of the store's read pool, released when the
// test ends, with getEntity and getEntities prepared as one and many.
func readConn(t *testing.T, s *Store) *pgxpool.Conn {
	t.Helper()
	c, err := s.rpool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Release)
	for name, q := range map[string]string{"one": getEntity, "many": getEntities} {
		if _, err := c.Conn().Prepare(t.Context(), name, q); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// setting is the value of a setting on connection c.
func setting(t *testing.T, c interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, name string) string {
	t.Helper()
	var v string
	if err := c.QueryRow(t.Context(), `SELECT current_setting($1)`, name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// explainOn returns the plan c chooses for stmt, an EXECUTE.
func explainOn(t *testing.T, c *pgxpool.Conn, stmt string) string {
	t.Helper()
	rows, err := c.Query(t.Context(), `EXPLAIN `+stmt)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestKeyedReadsKeepIndexPlansOnALargeTable: once the entities table is
// past readPlanMinPages, the keyed reads' connections keep one plan per
// statement (no planning per read), and that plan looks keys up in the
// primary key, while the main pool still plans every execution.
func TestKeyedReadsKeepIndexPlansOnALargeTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	fillEntities(t, s, 20000)
	s.rpool.Reset() // the connections made by Open, on an empty table
	c := readConn(t, s)
	if got := setting(t, c, "plan_cache_mode"); got != "force_generic_plan" {
		t.Fatalf("read connection: plan_cache_mode %s, want force_generic_plan", got)
	}
	for stmt, param := range map[string]string{
		`EXECUTE one('tnt_7', 'ent_7')`:                  "$1",
		`EXECUTE many('{tnt_7,tnt_8}', '{ent_7,ent_8}')`: "k.tenant_id",
	} {
		p := explainOn(t, c, stmt)
		if !strings.Contains(p, "Index Scan using entities_pkey") || !strings.Contains(p, param) {
			t.Errorf("%s: want a kept plan (conditions on %s) through entities_pkey:\n%s", stmt, param, p)
		}
	}
	if got := setting(t, s.pool, "plan_cache_mode"); got != "force_custom_plan" {
		t.Errorf("main pool: plan_cache_mode %s, want force_custom_plan", got)
	}
	c.Release()
	e, err := s.GetEntity(ctx, "tnt_7", "ent_7")
	if err != nil || e.ID != "ent_7" || e.TenantID != "tnt_7" {
		t.Fatalf("GetEntity: %+v, %v", e, err)
	}
}

// TestKeyedReadsPlanEachReadWhileTheTableIsSmall: a read connection made
// while the table is small plans every read, so a plan made then is not
// kept while the table grows: after 20,000 entities (and no ANALYZE) its
// lookups go through the primary key, not through whichever index an
// empty table made look as good.
func TestKeyedReadsPlanEachReadWhileTheTableIsSmall(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openInternal(t)
	c := readConn(t, s)
	if got := setting(t, c, "plan_cache_mode"); got != "force_custom_plan" {
		t.Errorf("read connection on an empty table: plan_cache_mode %s, want force_custom_plan", got)
	}
	for range 6 {
		if _, err := c.Exec(ctx, `EXECUTE one('tnt_7', 'ent_7')`); err != nil {
			t.Fatal(err)
		}
	}
	fillEntities(t, s, 20000)
	if p := explainOn(t, c, `EXECUTE one('tnt_7', 'ent_7')`); !strings.Contains(p, "Index Scan using entities_pkey") {
		t.Errorf("after the table grew: want a lookup through entities_pkey:\n%s", p)
	}
}

// TestReadPoolKeepsAPlanModeFromTheURL: plan_cache_mode in the connection
// URL applies to the read connections too.
func TestReadPoolKeepsAPlanModeFromTheURL(t *testing.T) {
	t.Parallel()
	url := testutil.Postgres(t)
	s, err := Open(t.Context(), testutil.WithSetting(url, "plan_cache_mode", "auto"), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fillEntities(t, s, 20000)
	c := readConn(t, s)
	if got := setting(t, c, "plan_cache_mode"); got != "auto" {
		t.Errorf("read connection: plan_cache_mode %s, want auto", got)
	}
	if got := setting(t, c, "enable_seqscan"); got != "off" {
		t.Errorf("read connection: enable_seqscan %s, want off", got)
	}
}
