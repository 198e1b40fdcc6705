package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/factline/factline/internal/gather"
	"github.com/factline/factline/internal/host/store"
)

// Entity reads that arrive together share statements. Each statement
// costs the server a backend woken for it; many backends running one-row
// lookups at once on few cores mostly contend. So at most readFlights
// reads are in flight per process, and the calls that arrive meanwhile go
// out together as one indexed join of their keys: a lone read still goes
// out at once, as the plain primary-key statement, and a read always
// starts after its call, so it sees every write committed before it. Two
// flights rather than more: one statement can be read while the next is
// gathered.
//
// The reads run on a pool of their own, one connection per flight, whose
// statements keep their plans (see openReadPool).
const (
	readFlights  = 2
	readBatchMax = 256
)

// Planning a lookup of the entities table weighs its seventeen indexes
// and costs PostgreSQL several times the lookup itself, so the keyed
// reads use plans cached per connection (force_generic_plan) where the
// main pool plans every execution (see Open). A cached plan must not
// depend on the table's size when it was made: with scans other than
// index scans off, the primary key is the cheapest path for a key lookup,
// except on a table of a few pages, where every index is estimated at one
// row and the planner may pick any of them (then scanning a whole tenant
// once the table has grown). So a read connection caches plans only when
// the table had readPlanMinPages pages when it connected (entities are
// never deleted: the table does not shrink back) and plans every read
// otherwise, until it is replaced (the pool's connection lifetime, an
// hour by default), so a store that grows comes to cached plans. A
// plan_cache_mode set in the URL wins.
const readPlanMinPages = 32

// readPlanSettings are the read connections' settings; $1 is
// readPlanMinPages.
const readPlanSettings = `SELECT set_config('enable_seqscan', 'off', false), set_config('enable_bitmapscan', 'off', false),
	set_config('plan_cache_mode', CASE WHEN pg_relation_size('entities') >= $1 * current_setting('block_size')::bigint
		THEN 'force_generic_plan' ELSE 'force_custom_plan' END, false)`

// readScanSettings are readPlanSettings without plan_cache_mode.
const readScanSettings = `SELECT set_config('enable_seqscan', 'off', false), set_config('enable_bitmapscan', 'off', false)`

// openReadPool opens the pool of the keyed entity reads on the main
// pool's configuration. Its connections are made now and kept, so that
// reads go on, as they did on the main pool's connections, when the
// server later refuses new connections (max_connections reached).
func openReadPool(ctx context.Context, main *pgxpool.Config, urlPlanMode bool) (*pgxpool.Pool, error) {
	cfg := main.Copy()
	cfg.MaxConns, cfg.MinConns = readFlights, readFlights
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		var err error
		if urlPlanMode {
			_, err = c.Exec(ctx, readScanSettings)
		} else {
			_, err = c.Exec(ctx, readPlanSettings, readPlanMinPages)
		}
		if err != nil {
			return fmt.Errorf("entity read settings: %w", err)
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: entity read pool: %w", err)
	}
	conns := make([]*pgxpool.Conn, 0, readFlights)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range readFlights {
		c, err := pool.Acquire(ctx)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres: open: entity read pool: %w", err)
		}
		conns = append(conns, c)
	}
	return pool, nil
}

var (
	// getEntity reads one entity by its primary key.
	getEntity = `SELECT ` + entityColumns + ` FROM entities WHERE tenant_id = $1 AND id = $2`

	// getEntities reads the entities of the keys ($1 tenants, $2 ids, in
	// pairs) through the primary key. The keys take the columns'
	// collation, so the index serves whatever the database's default.
	getEntities = func() string {
		cols := strings.Split(entityColumns, ", ")
		for i, c := range cols {
			cols[i] = "e." + c
		}
		return `SELECT ` + strings.Join(cols, ", ") + ` FROM unnest($1::text[], $2::text[]) AS k(tenant_id, id)
JOIN entities e ON e.tenant_id = k.tenant_id COLLATE "C" AND e.id = k.id COLLATE "C"`
	}()
)

// entityRead is one GetEntity call waiting for its statement.
type entityRead struct {
	ctx        context.Context
	tenant, id string
	e          *store.Entity
	err        error
}

// entityReads gathers GetEntity calls into statements.
type entityReads struct {
	g *gather.Gatherer[*entityRead]

	// one reads a single key, many several distinct ones; they are the
	// store's statements, replaced in tests of the gathering alone.
	one  func(ctx context.Context, tenant, id string) (*store.Entity, error)
	many func(ctx context.Context, tenants, ids []string) ([]*store.Entity, error)

	statements atomic.Int64 // statements sent, for tests
}

func newEntityReads(
	one func(ctx context.Context, tenant, id string) (*store.Entity, error),
	many func(ctx context.Context, tenants, ids []string) ([]*store.Entity, error),
) *entityReads {
	b := &entityReads{one: one, many: many}
	b.g = gather.New(gather.Config[*entityRead]{Flights: readFlights, Max: readBatchMax}, b.flush)
	return b
}

// get reads tenant/id with the calls that arrive meanwhile.
func (b *entityReads) get(ctx context.Context, tenant, id string) (*store.Entity, error) {
	r := &entityRead{ctx: ctx, tenant: tenant, id: id}
	if err := b.g.Do(ctx, r); err != nil {
		return nil, err
	}
	return r.e, r.err
}

// flush reads the keys of batch in one statement. Calls that gave up
// before it starts are left out; the statement is cancelled once every
// call of the batch has given up, and not before.
func (b *entityReads) flush(batch []*entityRead) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		live = append(live, r)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		r := live[0]
		b.statements.Add(1)
		r.e, r.err = b.one(r.ctx, r.tenant, r.id)
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(live[0].ctx))
	defer cancel()
	var left atomic.Int32
	left.Store(int32(len(live)))
	for _, r := range live {
		stop := context.AfterFunc(r.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}

	type key struct{ tenant, id string }
	first := make(map[key]*entityRead, len(live))
	tenants := make([]string, 0, len(live))
	ids := make([]string, 0, len(live))
	for _, r := range live {
		k := key{r.tenant, r.id}
		if _, ok := first[k]; !ok {
			first[k] = r
			tenants, ids = append(tenants, r.tenant), append(ids, r.id)
		}
	}
	b.statements.Add(1)
	found, err := b.many(ctx, tenants, ids)
	byKey := make(map[key]*store.Entity, len(found))
	for _, e := range found {
		byKey[key{e.TenantID, e.ID}] = e
	}
	for _, r := range live {
		k := key{r.tenant, r.id}
		e, ok := byKey[k]
		switch {
		case err != nil:
			r.err = err
		case !ok:
			r.err = pgx.ErrNoRows
		case first[k] == r:
			r.e = e
		default:
			// The same key asked twice: each caller gets its own copy.
			r.e = cloneEntity(e)
		}
	}
}

// cloneEntity copies e deeply enough that callers may change it.
func cloneEntity(e *store.Entity) *store.Entity {
	cp := *e
	cp.Data = append([]byte(nil), e.Data...)
	if e.Metadata != nil {
		cp.Metadata = append([]byte(nil), e.Metadata...)
	}
	if e.State != nil {
		cp.State = append([]byte(nil), e.State...)
	}
	for i, p := range e.Slots.S {
		if p != nil {
			v := *p
			cp.Slots.S[i] = &v
		}
	}
	for i, p := range e.Slots.N {
		if p != nil {
			v := *p
			cp.Slots.N[i] = &v
		}
	}
	return &cp
}

// getEntities reads the entities of the pairs (tenants[i], ids[i]) that
// exist, in no particular order.
func (s *Store) getEntities(ctx context.Context, tenants, ids []string) ([]*store.Entity, error) {
	rows, err := s.rpool.Query(ctx, getEntities, tenants, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]*store.Entity, 0, len(ids))
	for rows.Next() {
		e, err := scanEntity(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %d entities: %w", len(ids), err)
	}
	return out, nil
}
