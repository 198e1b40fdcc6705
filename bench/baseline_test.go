//go:build bench

package bench

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/id"
)

// The raw baseline's statements: the ones internal/host/store/postgres/fact.go sends
// for an append (same text, so the same plans), with one fact per
// transaction and no batching. Left out are what a single-fact transaction
// does not need for correctness: the lookup of taken fact ids (the UNIQUE
// constraint on facts.id stands behind it) and the NOTIFY to stream
// subscribers.
const (
	// Round trip 1: lock the position counter row first, then the entity.
	baseLockHead     = `SELECT position FROM fact_head FOR UPDATE`
	baseLockEntities = `SELECT e.tenant_id, e.id, e.type, e.version, e.fact_seq
FROM entities e
JOIN unnest($1::text[], $2::text[]) AS k(tenant_id, id) ON e.tenant_id = k.tenant_id AND e.id = k.id
FOR NO KEY UPDATE OF e`

	// Round trip 2: bump the entity, insert the fact, move the counter.
	baseUpdateEntities = `UPDATE entities e
SET version = u.version, fact_seq = u.fact_seq,
	state = CASE WHEN u.set_state THEN u.state::jsonb ELSE e.state END,
	updated_at = GREATEST(e.updated_at, u.updated_at)
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::boolean[], $6::text[], $7::bigint[])
	AS u(tenant_id, id, version, fact_seq, set_state, state, updated_at)
WHERE e.tenant_id = u.tenant_id AND e.id = u.id`
	baseInsertFacts = `INSERT INTO facts (position, id, tenant_id, entity_id, entity_type, seq, type, subtype, source_id,
	trace_id, timestamp, data, created_at)
SELECT position, id, tenant_id, NULLIF(entity_id, ''), NULLIF(entity_type, ''), seq, type, NULLIF(subtype, ''),
	NULLIF(source_id, ''), NULLIF(trace_id, ''), timestamp, data::jsonb, created_at
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[],
	$9::text[], $10::text[], $11::bigint[], $12::text[], $13::bigint[])
	AS f(position, id, tenant_id, entity_id, entity_type, seq, type, subtype, source_id, trace_id, timestamp, data, created_at)`
	baseAdvanceHead = `UPDATE fact_head SET position = position + $1 RETURNING position`
)

// baseline appends facts straight to PostgreSQL with pgx.
type baseline struct {
	pool *pgxpool.Pool
}

// startBaseline prepares the baseline's database: the product's schema
// (its migrations, applied by opening it) and the same accounts, created
// through the platform; then it opens a pool with one connection per
// client.
func startBaseline(t *testing.T, dbURL string, clients int, logger *slog.Logger) *baseline {
	t.Helper()
	a, err := app.New(t.Context(), app.Config{DatabaseURL: dbURL, Addr: "127.0.0.1:0", Domains: []string{domainFile}, DataDir: t.TempDir(), Logger: logger, StandInLedgers: true})
	if err != nil {
		t.Fatalf("prepare the baseline database: %v", err)
	}
	ids := []string{hotEntity}
	for i := range manyEntities {
		ids = append(ids, accountID(i))
	}
	createAccounts(t, a.Platform, ids)
	a.Close()
	return &baseline{pool: openPool(t, dbURL, int32(clients), baselineApp)}
}

// append is one minimal correct append of a deposit to entityID in its own
// transaction: BEGIN; lock the head and the entity; bump the entity, insert
// the fact at the next position and seq, move the head; COMMIT.
func (b *baseline) append(ctx context.Context, entityID string) error {
	now := time.Now().UnixMilli()
	factID := id.New(id.Fact)
	traceID := id.New(id.Request) // the gateway stores the request id as trace_id
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit

	var (
		head, version, factSeq int64
		typ                    string
		found                  bool
	)
	rt1 := &pgx.Batch{}
	rt1.Queue(baseLockHead).QueryRow(func(row pgx.Row) error { return row.Scan(&head) })
	rt1.Queue(baseLockEntities, []string{benchTenant}, []string{entityID}).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var tenant, eid string
			if err := rows.Scan(&tenant, &eid, &typ, &version, &factSeq); err != nil {
				return err
			}
			found = true
		}
		return rows.Err()
	})
	if err := tx.SendBatch(ctx, rt1).Close(); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if !found {
		return fmt.Errorf("entity %s not found", entityID)
	}

	pos, seq := head+1, factSeq+1
	rt2 := &pgx.Batch{}
	rt2.Queue(baseUpdateEntities, []string{benchTenant}, []string{entityID}, []int64{version + 1}, []int64{seq},
		[]bool{false}, []*string{nil}, []int64{now}).
		Exec(func(tag pgconn.CommandTag) error {
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("updated %d entities, want 1", tag.RowsAffected())
			}
			return nil
		})
	rt2.Queue(baseInsertFacts, []int64{pos}, []string{factID}, []string{benchTenant}, []string{entityID}, []string{typ},
		[]int64{seq}, []string{"deposit"}, []string{""}, []string{""}, []string{traceID}, []int64{now},
		[]string{`{"amount":1.25}`}, []int64{now})
	rt2.Queue(baseAdvanceHead, int64(1)).QueryRow(func(row pgx.Row) error {
		var got int64
		if err := row.Scan(&got); err != nil {
			return err
		}
		if got != pos {
			return fmt.Errorf("fact head moved to %d, want %d", got, pos)
		}
		return nil
	})
	if err := tx.SendBatch(ctx, rt2).Close(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
