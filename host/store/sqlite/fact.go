package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/factline/factline/host/store"
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

// AppendFacts appends the items in one write transaction. Each item runs
// under its own savepoint, so a failing item (missing entity, version
// conflict, duplicate id) is rolled back alone, including its increment of
// the position counter, and positions stay gapless.
func (s *Store) AppendFacts(ctx context.Context, items []store.Append) ([]store.AppendResult, error) {
	for i, it := range items {
		if err := errors.Join(it.Fact.Check(), store.CheckJSON("state", it.State)); err != nil {
			return nil, fmt.Errorf("sqlite: append facts: item %d: %w", i, err)
		}
		if it.Outbox != nil {
			if err := it.Outbox.Check(); err != nil {
				return nil, fmt.Errorf("sqlite: append facts: item %d: outbox: %w", i, err)
			}
		}
	}
	results := make([]store.AppendResult, len(items))
	written := 0
	err := s.write(ctx, func(tx *sql.Tx) error {
		for i, it := range items {
			res, err := appendOne(ctx, tx, it)
			if err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
			results[i] = res
			if res.Err == nil {
				written++
			}
		}
		if s.hooks.BeforeAppendCommit != nil {
			s.hooks.BeforeAppendCommit(ctx)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: append facts: %w", err)
	}
	if written > 0 {
		s.facts.notify()
	}
	return results, nil
}

// appendOne writes one item under a savepoint. Item failures come back in
// AppendResult.Err; a returned error fails the whole transaction.
func appendOne(ctx context.Context, tx *sql.Tx, it store.Append) (res store.AppendResult, err error) {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT append_item`); err != nil {
		return res, err
	}
	itemErr, err := writeItem(ctx, tx, it, &res)
	if err != nil || itemErr != nil {
		if _, rbErr := tx.ExecContext(ctx, `ROLLBACK TO append_item`); rbErr != nil && err == nil {
			err = rbErr
		}
	}
	if _, relErr := tx.ExecContext(ctx, `RELEASE append_item`); relErr != nil && err == nil {
		err = relErr
	}
	if err != nil {
		return store.AppendResult{}, err
	}
	if itemErr != nil {
		return store.AppendResult{Fact: it.Fact, Err: itemErr}, nil
	}
	return res, nil
}

// writeItem performs the statements of one item. itemErr is the item's own
// failure (a store sentinel); err is anything else.
func writeItem(ctx context.Context, tx *sql.Tx, it store.Append, res *store.AppendResult) (itemErr, err error) {
	f := it.Fact
	f.Seq, f.EntityType = 0, ""
	var version int64
	if f.EntityID != "" {
		err := tx.QueryRowContext(ctx, `SELECT type, version FROM entities WHERE tenant_id = ? AND id = ?`,
			f.TenantID, f.EntityID).Scan(&f.EntityType, &version)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("entity %s: %w", f.EntityID, store.ErrNotFound), nil
		}
		if err != nil {
			return nil, err
		}
		if it.ExpectedVersion != 0 && it.ExpectedVersion != version {
			return fmt.Errorf("entity %s is at version %d, not %d: %w",
				f.EntityID, version, it.ExpectedVersion, store.ErrVersionConflict), nil
		}
		err = tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM facts WHERE tenant_id = ? AND entity_id = ?`,
			f.TenantID, f.EntityID).Scan(&f.Seq)
		if err != nil {
			return nil, err
		}
	}
	if err := tx.QueryRowContext(ctx, `UPDATE fact_position SET last = last + 1 WHERE id = 1 RETURNING last`).Scan(&f.Position); err != nil {
		return nil, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO facts (`+factColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		f.Position, f.ID, f.TenantID, nullString(f.EntityID), nullString(f.EntityType), f.Seq, f.Type,
		nullString(f.Subtype), nullString(f.SourceID), nullString(f.TraceID), f.Timestamp, objectOrEmpty(f.Data), f.CreatedAt)
	if err := interpretError(err); err != nil {
		if errors.Is(err, store.ErrAlreadyExists) {
			return fmt.Errorf("fact %s: %w", f.ID, store.ErrAlreadyExists), nil
		}
		return nil, err
	}
	if it.Outbox != nil {
		if err := insertOutbox(ctx, tx, it.Outbox); err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
	}
	if len(f.Data) == 0 {
		f.Data = []byte("{}")
	}
	res.Fact = f
	if f.EntityID == "" {
		return nil, nil
	}
	q := `UPDATE entities SET version = version + 1, updated_at = MAX(updated_at, ?) WHERE tenant_id = ? AND id = ? RETURNING version`
	args := []any{f.CreatedAt, f.TenantID, f.EntityID}
	if it.State != nil {
		q = `UPDATE entities SET version = version + 1, updated_at = MAX(updated_at, ?), state = ? WHERE tenant_id = ? AND id = ? RETURNING version`
		args = []any{f.CreatedAt, nullJSON(it.State), f.TenantID, f.EntityID}
	}
	if err := tx.QueryRowContext(ctx, q, args...).Scan(&res.EntityVersion); err != nil {
		return nil, err
	}
	return nil, nil
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
	and := func(cond string, v any) {
		args = append(args, v)
		sql += ` AND ` + cond + ` ?`
	}
	if f.Type != "" {
		and(`type =`, f.Type)
		if f.Subtype != "" {
			and(`subtype =`, f.Subtype)
		}
	}
	if f.SourceID != "" {
		and(`source_id =`, f.SourceID)
	}
	if f.EntityID != "" {
		and(`entity_id =`, f.EntityID)
	}
	if f.From != 0 {
		and(`timestamp >=`, f.From)
	}
	if f.To != 0 {
		and(`timestamp <=`, f.To)
	}
	if f.AfterPosition > 0 {
		and(`position >`, f.AfterPosition)
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
	if q.EntityType != "" {
		query += ` AND entity_type = ?`
		args = append(args, q.EntityType)
	}
	if q.From != 0 {
		query += ` AND timestamp >= ?`
		args = append(args, q.From)
	}
	if q.To != 0 {
		query += ` AND timestamp <= ?`
		args = append(args, q.To)
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
