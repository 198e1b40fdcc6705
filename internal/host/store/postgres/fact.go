package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/factline/factline/internal/host/store"
)

// factColumns reads a fact row with NULL optional strings as "".
const factColumns = `position, id, tenant_id, COALESCE(entity_id, ''), COALESCE(entity_type, ''), seq, type,
COALESCE(subtype, ''), COALESCE(source_id, ''), COALESCE(trace_id, ''), timestamp, data, created_at`

// notifyChannel is the LISTEN/NOTIFY channel an append commit signals.
const notifyChannel = "factline_facts"

func scanFact(row pgx.Row) (*store.Fact, error) {
	var (
		f    store.Fact
		data []byte
	)
	err := row.Scan(&f.Position, &f.ID, &f.TenantID, &f.EntityID, &f.EntityType, &f.Seq, &f.Type,
		&f.Subtype, &f.SourceID, &f.TraceID, &f.Timestamp, &data, &f.CreatedAt)
	if err != nil {
		return nil, err
	}
	f.Data = json.RawMessage(data)
	return &f, nil
}

// The statements of AppendFacts.
const (
	// Round trip 1, in this order: the head lock first, so that the reads
	// after it see every append committed before this one.
	lockHead = `SELECT position FROM fact_head FOR UPDATE`

	lockEntities = `SELECT e.tenant_id, e.id, e.type, e.version, e.fact_seq
FROM entities e
JOIN unnest($1::text[], $2::text[]) AS k(tenant_id, id) ON e.tenant_id = k.tenant_id AND e.id = k.id
FOR NO KEY UPDATE OF e`

	takenIDs = `SELECT id FROM facts WHERE id = ANY($1::text[])`

	// Round trip 2.
	updateEntities = `UPDATE entities e
SET version = u.version, fact_seq = u.fact_seq,
	state = CASE WHEN u.set_state THEN u.state::jsonb ELSE e.state END,
	updated_at = GREATEST(e.updated_at, u.updated_at)
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::boolean[], $6::text[], $7::bigint[])
	AS u(tenant_id, id, version, fact_seq, set_state, state, updated_at)
WHERE e.tenant_id = u.tenant_id AND e.id = u.id`

	// notifyAppended announces the entities an append changed on
	// entityChannel, as an update does.
	notifyAppended = `SELECT pg_notify('` + entityChannel + `', json_build_array(u.tenant_id, u.id)::text)
FROM unnest($1::text[], $2::text[]) AS u(tenant_id, id)`

	insertFacts = `INSERT INTO facts (position, id, tenant_id, entity_id, entity_type, seq, type, subtype, source_id,
	trace_id, timestamp, data, created_at)
SELECT position, id, tenant_id, NULLIF(entity_id, ''), NULLIF(entity_type, ''), seq, type, NULLIF(subtype, ''),
	NULLIF(source_id, ''), NULLIF(trace_id, ''), timestamp, data::jsonb, created_at
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[],
	$9::text[], $10::text[], $11::bigint[], $12::text[], $13::bigint[])
	AS f(position, id, tenant_id, entity_id, entity_type, seq, type, subtype, source_id, trace_id, timestamp, data, created_at)`

	// The head moves by the number of facts written; the row is still
	// locked by lockHead, and stays locked until commit.
	advanceHead = `UPDATE fact_head SET position = position + $1 RETURNING position`

	// One notification per transaction; PostgreSQL delivers it at commit.
	notifyFacts = `SELECT pg_notify('` + notifyChannel + `', $1)`
)

// AppendFacts appends the items in one transaction.
//
// Every AppendFacts transaction first locks the fact_head row and keeps it
// locked until it commits. That serialises appends across all processes:
// positions are handed out gapless, and a transaction can only take
// positions after the previous holder committed, so commit order is
// position order and a reader never sees position p+1 before p.
//
// Under that lock, the first round trip also locks the entity rows the
// items name and looks up which fact ids are taken (fresh ones are not
// looked up). Nothing those answers
// depend on can change until commit (other appends wait on the head lock,
// UpdateEntity waits on the entity lock, fact ids are only written by
// appends), so the items are then decided in Go, in order: a missing
// entity, a version conflict or a taken id (before the batch or by an
// earlier item of it) fails the item, which then writes nothing. The second
// round trip writes what the successful items decided: each touched entity
// once, all facts in one INSERT, the head moved by their number, and a
// NOTIFY. No savepoints are needed.
func (s *Store) AppendFacts(ctx context.Context, items []store.Append) ([]store.AppendResult, error) {
	if err := store.CheckAppends(items); err != nil {
		return nil, fmt.Errorf("postgres: append facts: %w", err)
	}
	if len(items) == 0 {
		return []store.AppendResult{}, nil
	}

	var results []store.AppendResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		head, entities, taken, err := appendReads(ctx, tx, items)
		if err != nil {
			return err
		}
		var written int
		results, written = store.DecideAppends(items, head, entities, taken)
		var outbox []*store.OutboxRow
		for i, r := range results {
			if r.Err == nil && items[i].Outbox != nil {
				outbox = append(outbox, items[i].Outbox)
			}
		}
		if written > 0 {
			if err := appendWrites(ctx, tx, results, entities, head, written, outbox); err != nil {
				return err
			}
		}
		if s.hooks.BeforeAppendCommit != nil {
			s.hooks.BeforeAppendCommit(ctx)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: append facts: %w", err)
	}
	for _, r := range results {
		if r.Err == nil {
			s.facts.notify()
			break
		}
	}
	return results, nil
}

// appendReads is the first round trip: lock the head, lock the entities,
// find taken fact ids.
func appendReads(ctx context.Context, tx pgx.Tx, items []store.Append) (head int64, entities map[store.EntityKey]*store.AppendEntity, taken map[string]bool, err error) {
	keys, factIDs := store.AppendReads(items)
	tenants, ids := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		tenants[i], ids[i] = k.TenantID, k.ID
	}

	b := &pgx.Batch{}
	b.Queue(lockHead).QueryRow(func(row pgx.Row) error { return row.Scan(&head) })
	entities = make(map[store.EntityKey]*store.AppendEntity, len(tenants))
	if len(tenants) > 0 {
		b.Queue(lockEntities, tenants, ids).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var (
					k store.EntityKey
					e store.AppendEntity
				)
				if err := rows.Scan(&k.TenantID, &k.ID, &e.Type, &e.Version, &e.FactSeq); err != nil {
					return err
				}
				entities[k] = &e
			}
			return rows.Err()
		})
	}
	taken = make(map[string]bool)
	if len(factIDs) > 0 {
		b.Queue(takenIDs, factIDs).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				taken[id] = true
			}
			return rows.Err()
		})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, nil, nil, err
	}
	return head, entities, taken, nil
}

// appendWrites is the second round trip: the writes decided by
// store.DecideAppends.
func appendWrites(ctx context.Context, tx pgx.Tx, results []store.AppendResult, entities map[store.EntityKey]*store.AppendEntity, head int64, written int, outbox []*store.OutboxRow) error {
	b := &pgx.Batch{}
	queueOutboxInsert(b, outbox)

	var (
		eTenants, eIDs, eStates []string
		eVersions, eSeqs, eAts  []int64
		eSetState               []bool
	)
	for k, e := range entities {
		if !e.Touched {
			continue
		}
		eTenants, eIDs = append(eTenants, k.TenantID), append(eIDs, k.ID)
		eVersions, eSeqs, eAts = append(eVersions, e.Version), append(eSeqs, e.FactSeq), append(eAts, e.MaxAt)
		eSetState, eStates = append(eSetState, e.SetState), append(eStates, string(e.State))
	}
	if len(eTenants) > 0 {
		n := len(eTenants)
		b.Queue(updateEntities, eTenants, eIDs, eVersions, eSeqs, eSetState, nullIfUnset(eStates, eSetState), eAts).
			Exec(func(tag pgconn.CommandTag) error {
				if got := tag.RowsAffected(); got != int64(n) {
					return fmt.Errorf("updated %d entities, want %d", got, n)
				}
				return nil
			})
		// The other processes' entity caches drop these entities when
		// the notifications arrive, without first reading the facts
		// table as the fact head's notification alone would make them.
		b.Queue(notifyAppended, eTenants, eIDs)
	}

	cols := newFactColumns(written)
	for _, r := range results {
		if r.Err == nil {
			cols.add(r.Fact)
		}
	}
	b.Queue(insertFacts, cols.args()...)

	want := head + int64(written)
	b.Queue(advanceHead, int64(written)).QueryRow(func(row pgx.Row) error {
		var got int64
		if err := row.Scan(&got); err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("fact head moved to %d, want %d", got, want)
		}
		return nil
	})
	b.Queue(notifyFacts, strconv.FormatInt(want, 10))
	return interpretError(tx.SendBatch(ctx, b).Close())
}

// nullIfUnset returns states with the entries whose flag is false set to
// NULL (they are not cast to jsonb).
func nullIfUnset(states []string, set []bool) []*string {
	out := make([]*string, len(states))
	for i := range states {
		if set[i] {
			out[i] = &states[i]
		}
	}
	return out
}

// factColumnArrays holds the facts of an INSERT ... unnest, column by column.
type factColumnArrays struct {
	positions, seqs, timestamps, createdAts []int64
	ids, tenants, entityIDs, entityTypes    []string
	types, subtypes, sources, traces, data  []string
}

func newFactColumns(n int) *factColumnArrays {
	return &factColumnArrays{
		positions: make([]int64, 0, n), seqs: make([]int64, 0, n), timestamps: make([]int64, 0, n), createdAts: make([]int64, 0, n),
		ids: make([]string, 0, n), tenants: make([]string, 0, n), entityIDs: make([]string, 0, n), entityTypes: make([]string, 0, n),
		types: make([]string, 0, n), subtypes: make([]string, 0, n), sources: make([]string, 0, n), traces: make([]string, 0, n),
		data: make([]string, 0, n),
	}
}

func (c *factColumnArrays) add(f store.Fact) {
	c.positions = append(c.positions, f.Position)
	c.ids = append(c.ids, f.ID)
	c.tenants = append(c.tenants, f.TenantID)
	c.entityIDs = append(c.entityIDs, f.EntityID)
	c.entityTypes = append(c.entityTypes, f.EntityType)
	c.seqs = append(c.seqs, f.Seq)
	c.types = append(c.types, f.Type)
	c.subtypes = append(c.subtypes, f.Subtype)
	c.sources = append(c.sources, f.SourceID)
	c.traces = append(c.traces, f.TraceID)
	c.timestamps = append(c.timestamps, f.Timestamp)
	c.data = append(c.data, objectOrEmpty(f.Data))
	c.createdAts = append(c.createdAts, f.CreatedAt)
}

// args returns the arrays in the order of insertFacts' parameters.
func (c *factColumnArrays) args() []any {
	return []any{c.positions, c.ids, c.tenants, c.entityIDs, c.entityTypes, c.seqs, c.types, c.subtypes,
		c.sources, c.traces, c.timestamps, c.data, c.createdAts}
}

// GetFact returns one fact of the tenant.
func (s *Store) GetFact(ctx context.Context, tenantID, id string) (*store.Fact, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("postgres: get fact: %w", err)
	}
	row := s.pool.QueryRow(ctx, `SELECT `+factColumns+` FROM facts WHERE id = $1 AND tenant_id = $2`, id, tenantID)
	f, err := scanFact(row)
	if err != nil {
		return nil, fmt.Errorf("postgres: get fact %s: %w", id, interpretError(err))
	}
	return f, nil
}

// ListEntityFacts returns the entity's facts with Seq > afterSeq in Seq
// order. An unknown entity has no facts.
func (s *Store) ListEntityFacts(ctx context.Context, tenantID, entityID string, afterSeq int64, limit int) ([]store.Fact, error) {
	if err := store.CheckText("id", entityID); err != nil {
		return nil, fmt.Errorf("postgres: list entity facts: %w", err)
	}
	facts, err := s.queryFacts(ctx, `SELECT `+factColumns+` FROM facts
WHERE tenant_id = $1 AND entity_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`, tenantID, entityID, afterSeq, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("postgres: list entity facts %s: %w", entityID, err)
	}
	return facts, nil
}

// ListFacts returns the tenant's facts f selects in position order;
// migration 0006 adds the indexes that serve each filter.
func (s *Store) ListFacts(ctx context.Context, f store.FactFilter) ([]store.Fact, error) {
	if f.TenantID == "" {
		return nil, errors.New("postgres: list facts: a tenant is required")
	}
	sql, args := listFactsQuery(f)
	facts, err := s.queryFacts(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list facts: %w", err)
	}
	return facts, nil
}

// listFactsQuery is the statement of ListFacts (its plans are tested).
func listFactsQuery(f store.FactFilter) (string, []any) {
	sql, args := `SELECT `+factColumns+` FROM facts WHERE tenant_id = $1`, []any{f.TenantID}
	for _, c := range f.Conds() {
		args = append(args, c.Arg)
		sql += ` AND ` + c.SQL + ` $` + strconv.Itoa(len(args))
	}
	args = append(args, limitArg(f.Limit))
	return sql + ` ORDER BY position LIMIT $` + strconv.Itoa(len(args)), args
}

// ReadFacts returns facts of all tenants with Position > after in position
// order. Positions become visible in order (see AppendFacts), so a reader
// that has seen p never later finds a new fact below p.
func (s *Store) ReadFacts(ctx context.Context, after int64, limit int) ([]store.Fact, error) {
	facts, err := s.queryFacts(ctx, `SELECT `+factColumns+` FROM facts WHERE position > $1 ORDER BY position LIMIT $2`,
		after, limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("postgres: read facts: %w", err)
	}
	return facts, nil
}

// ScanFacts streams the tenant's facts q selects in timestamp order; the
// facts_scan index (tenant, type, timestamp) serves it.
func (s *Store) ScanFacts(ctx context.Context, q store.FactScan, fn func(*store.Fact) error) error {
	if len(q.Types) == 0 {
		return errors.New("postgres: scan facts: no fact types")
	}
	sql := `SELECT ` + factColumns + ` FROM facts WHERE tenant_id = $1 AND type = ANY($2::text[])`
	args := []any{q.TenantID, q.Types}
	for _, c := range q.Conds() {
		args = append(args, c.Arg)
		sql += ` AND ` + c.SQL + ` $` + strconv.Itoa(len(args))
	}
	rows, err := s.pool.Query(ctx, sql+` ORDER BY timestamp, position`, args...)
	if err != nil {
		return fmt.Errorf("postgres: scan facts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		f, err := scanFact(rows)
		if err != nil {
			return fmt.Errorf("postgres: scan facts: %w", err)
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: scan facts: %w", err)
	}
	return nil
}

func (s *Store) queryFacts(ctx context.Context, q string, args ...any) ([]store.Fact, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Fact
	for rows.Next() {
		f, err := scanFact(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *f)
	}
	return out, rows.Err()
}

// HeadPosition returns the highest committed position: the committed value
// of the counter.
func (s *Store) HeadPosition(ctx context.Context) (int64, error) {
	var head int64
	if err := s.pool.QueryRow(ctx, `SELECT position FROM fact_head`).Scan(&head); err != nil {
		return 0, fmt.Errorf("postgres: head position: %w", err)
	}
	return head, nil
}
