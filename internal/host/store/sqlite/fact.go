package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/factline/factline/internal/host/store"
)

const factColumns = `position, id, tenant_id, entity_id, entity_type, seq, type, subtype, source_id, trace_id, timestamp, data, created_at`

func scanFact(row rowScanner) (*store.Fact, error) {
	var (
		f                                            store.Fact
		entityID, entityType, subtype, source, trace sql.NullString
		data                                         string
	)
	err := row.Scan(&f.Position, &f.ID, &f.TenantID, &entityID, &entityType, &f.Seq, &f.Type,
		&subtype, &source, &trace, &f.Timestamp, &data, &f.CreatedAt)
	if err != nil {
		return nil, err
	}
	f.EntityID, f.EntityType = entityID.String, entityType.String
	f.Subtype, f.SourceID, f.TraceID = subtype.String, source.String, trace.String
	f.Data = []byte(data)
	return &f, nil
}

// AppendFacts appends the items in one write transaction. SQLite has one
// writer at a time, so what the transaction reads first (the position
// counter, the entities, the taken fact ids) cannot change before it
// commits: store.DecideAppends decides the items on it, and only the
// successful ones are written, so positions stay gapless.
func (s *Store) AppendFacts(ctx context.Context, items []store.Append) ([]store.AppendResult, error) {
	if err := store.CheckAppends(items); err != nil {
		return nil, fmt.Errorf("sqlite: append facts: %w", err)
	}
	var (
		results []store.AppendResult
		written int
	)
	err := s.write(ctx, func(tx *sql.Tx) (err error) {
		results, written, err = appendInTx(ctx, tx, items)
		if err != nil {
			return err
		}
		if s.hooks.BeforeAppendCommit != nil {
			s.hooks.BeforeAppendCommit(ctx)
		}
		return nil
	})
	if written > 0 || err != nil {
		s.watch.appended(items)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: append facts: %w", err)
	}
	if written > 0 {
		s.facts.notify()
	}
	return results, nil
}

// appendInTx reads what the items depend on, decides them and writes the
// successful ones. Item failures come back in AppendResult.Err; a returned
// error fails the whole transaction.
func appendInTx(ctx context.Context, tx *sql.Tx, items []store.Append) ([]store.AppendResult, int, error) {
	if len(items) == 0 {
		return []store.AppendResult{}, 0, nil
	}
	st := newTxStmts(tx)
	defer st.close()
	head, entities, taken, err := appendReads(ctx, tx, st, items)
	if err != nil {
		return nil, 0, err
	}
	results, written := store.DecideAppends(items, head, entities, taken)
	if written == 0 {
		return results, 0, nil
	}
	if err := appendWrites(ctx, tx, st, items, results, entities, head+int64(written)); err != nil {
		return nil, 0, err
	}
	return results, written, nil
}

// The per-item statements of an append transaction.
const (
	appendEntityRead = `SELECT type, version,
	(SELECT COALESCE(MAX(seq), 0) FROM facts WHERE tenant_id = e.tenant_id AND entity_id = e.id)
FROM entities e WHERE tenant_id = ? AND id = ?`
	appendIDTaken     = `SELECT COUNT(*) FROM facts WHERE id = ?`
	appendFactInsert  = `INSERT INTO facts (` + factColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	appendEntityWrite = `UPDATE entities SET version = ?, updated_at = MAX(updated_at, ?),
	state = CASE WHEN ? THEN ? ELSE state END
WHERE tenant_id = ? AND id = ?`
)

// txStmts prepares each statement once per transaction: the driver
// compiles a statement on every call otherwise, and a group commit runs the
// same few statements for every item of its batch.
type txStmts struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

func newTxStmts(tx *sql.Tx) *txStmts { return &txStmts{tx: tx, stmts: map[string]*sql.Stmt{}} }

func (p *txStmts) get(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := p.stmts[query]; ok {
		return st, nil
	}
	st, err := p.tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	p.stmts[query] = st
	return st, nil
}

func (p *txStmts) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := p.get(ctx, query)
	if err != nil {
		// Row.Scan reports the error; an unprepared query runs as before.
		return p.tx.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

func (p *txStmts) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := p.get(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (p *txStmts) close() {
	for _, st := range p.stmts {
		st.Close()
	}
}

// appendReads returns the last position, the existing entities the items
// name and which of their fact ids are taken.
func appendReads(ctx context.Context, tx *sql.Tx, st *txStmts, items []store.Append) (head int64, entities map[store.EntityKey]*store.AppendEntity, taken map[string]bool, err error) {
	if err := tx.QueryRowContext(ctx, `SELECT last FROM fact_position WHERE id = 1`).Scan(&head); err != nil {
		return 0, nil, nil, err
	}
	keys, factIDs := store.AppendReads(items)
	entities = make(map[store.EntityKey]*store.AppendEntity, len(keys))
	for _, k := range keys {
		var e store.AppendEntity
		err := st.queryRow(ctx, appendEntityRead, k.TenantID, k.ID).Scan(&e.Type, &e.Version, &e.FactSeq)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return 0, nil, nil, err
		}
		entities[k] = &e
	}
	taken = make(map[string]bool)
	for _, id := range factIDs {
		var n int
		if err := st.queryRow(ctx, appendIDTaken, id).Scan(&n); err != nil {
			return 0, nil, nil, err
		}
		taken[id] = n > 0
	}
	return head, entities, taken, nil
}

// appendWrites writes what store.DecideAppends decided: the successful
// items' facts and outbox rows, the touched entities and the new last
// position.
func appendWrites(ctx context.Context, tx *sql.Tx, st *txStmts, items []store.Append, results []store.AppendResult,
	entities map[store.EntityKey]*store.AppendEntity, last int64) error {
	for i, r := range results {
		if r.Err != nil {
			continue
		}
		f := r.Fact
		_, err := st.exec(ctx, appendFactInsert,
			f.Position, f.ID, f.TenantID, nullString(f.EntityID), nullString(f.EntityType), f.Seq, f.Type,
			nullString(f.Subtype), nullString(f.SourceID), nullString(f.TraceID), f.Timestamp, objectOrEmpty(f.Data), f.CreatedAt)
		if err != nil {
			return interpretError(err)
		}
		if items[i].Outbox != nil {
			if err := insertOutbox(ctx, tx, items[i].Outbox); err != nil {
				return fmt.Errorf("outbox: %w", err)
			}
		}
	}
	for k, e := range entities {
		if !e.Touched {
			continue
		}
		_, err := st.exec(ctx, appendEntityWrite, e.Version, e.MaxAt, e.SetState, nullJSON(e.State), k.TenantID, k.ID)
		if err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `UPDATE fact_position SET last = ? WHERE id = 1`, last)
	return err
}

// GetFact returns one fact of the tenant.
func (s *Store) GetFact(ctx context.Context, tenantID, id string) (*store.Fact, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("sqlite: get fact: %w", err)
	}
	row := s.r.QueryRowContext(ctx, `SELECT `+factColumns+` FROM facts WHERE id = ? AND tenant_id = ?`, id, tenantID)
	f, err := scanFact(row)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get fact %s: %w", id, interpretError(err))
	}
	return f, nil
}

// ListEntityFacts returns the entity's facts with Seq > afterSeq in Seq
// order. An unknown entity has no facts.
func (s *Store) ListEntityFacts(ctx context.Context, tenantID, entityID string, afterSeq int64, limit int) ([]store.Fact, error) {
	if err := store.CheckText("id", entityID); err != nil {
		return nil, fmt.Errorf("sqlite: list entity facts: %w", err)
	}
	facts, err := s.queryFacts(ctx, `SELECT `+factColumns+` FROM facts
WHERE tenant_id = ? AND entity_id = ? AND seq > ? ORDER BY seq LIMIT ?`, tenantID, entityID, afterSeq, sqlLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list entity facts %s: %w", entityID, err)
	}
	return facts, nil
}

// ListFacts returns the tenant's facts f selects in position order;
// migration 0006 adds the indexes that serve each filter.
func (s *Store) ListFacts(ctx context.Context, f store.FactFilter) ([]store.Fact, error) {
	if f.TenantID == "" {
		return nil, errors.New("sqlite: list facts: a tenant is required")
	}
	sql, args := `SELECT `+factColumns+` FROM facts WHERE tenant_id = ?`, []any{f.TenantID}
	for _, c := range f.Conds() {
		args = append(args, c.Arg)
		sql += ` AND ` + c.SQL + ` ?`
	}
	args = append(args, sqlLimit(f.Limit))
	facts, err := s.queryFacts(ctx, sql+` ORDER BY position LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list facts: %w", err)
	}
	return facts, nil
}

// ReadFacts returns facts of all tenants with Position > after in position
// order.
func (s *Store) ReadFacts(ctx context.Context, after int64, limit int) ([]store.Fact, error) {
	facts, err := s.queryFacts(ctx, `SELECT `+factColumns+` FROM facts WHERE position > ? ORDER BY position LIMIT ?`,
		after, sqlLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("sqlite: read facts: %w", err)
	}
	return facts, nil
}

// ScanFacts streams the tenant's facts q selects in timestamp order; the
// facts_scan index (tenant, type, timestamp) serves it.
func (s *Store) ScanFacts(ctx context.Context, q store.FactScan, fn func(*store.Fact) error) error {
	if len(q.Types) == 0 {
		return errors.New("sqlite: scan facts: no fact types")
	}
	query := `SELECT ` + factColumns + ` FROM facts WHERE tenant_id = ? AND type IN (?` + strings.Repeat(`, ?`, len(q.Types)-1) + `)`
	args := []any{q.TenantID}
	for _, t := range q.Types {
		args = append(args, t)
	}
	for _, c := range q.Conds() {
		args = append(args, c.Arg)
		query += ` AND ` + c.SQL + ` ?`
	}
	rows, err := s.r.QueryContext(ctx, query+` ORDER BY timestamp, position`, args...)
	if err != nil {
		return fmt.Errorf("sqlite: scan facts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		f, err := scanFact(rows)
		if err != nil {
			return fmt.Errorf("sqlite: scan facts: %w", err)
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: scan facts: %w", err)
	}
	return nil
}

func (s *Store) queryFacts(ctx context.Context, q string, args ...any) ([]store.Fact, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
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

// HeadPosition returns the highest committed position.
func (s *Store) HeadPosition(ctx context.Context) (int64, error) {
	var head int64
	if err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(position), 0) FROM facts`).Scan(&head); err != nil {
		return 0, fmt.Errorf("sqlite: head position: %w", err)
	}
	return head, nil
}
