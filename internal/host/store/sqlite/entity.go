package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/factline/factline/internal/host/store"
)

// slotColumns lists ix_s_1..ix_s_10 then ix_n_1..ix_n_5.
var slotColumns = func() []string {
	cols := make([]string, 0, store.StringSlots+store.NumberSlots)
	for i := range store.StringSlots {
		cols = append(cols, store.SlotColumn(i, false))
	}
	for i := range store.NumberSlots {
		cols = append(cols, store.SlotColumn(i, true))
	}
	return cols
}()

var (
	entityColumns = "tenant_id, id, type, version, data, metadata, state, " +
		strings.Join(slotColumns, ", ") + ", created_at, updated_at"

	// slotAssignments is "ix_s_1 = ?, ..., ix_n_5 = ?" in slotColumns order.
	slotAssignments = strings.Join(slotColumns, " = ?, ") + " = ?"
)

// slotArgs returns the slot values in slotColumns order.
func slotArgs(sl store.Slots) []any {
	args := make([]any, 0, len(slotColumns))
	for _, p := range sl.S {
		if p == nil {
			args = append(args, nil)
		} else {
			args = append(args, *p)
		}
	}
	for _, p := range sl.N {
		if p == nil {
			args = append(args, nil)
		} else {
			args = append(args, *p)
		}
	}
	return args
}

type rowScanner interface {
	Scan(dest ...any) error
}

func scanEntity(row rowScanner) (*store.Entity, error) {
	var (
		e               store.Entity
		metadata, state sql.NullString
		data            string
		ss              [store.StringSlots]sql.NullString
		ns              [store.NumberSlots]sql.NullFloat64
	)
	dest := []any{&e.TenantID, &e.ID, &e.Type, &e.Version, &data, &metadata, &state}
	for i := range ss {
		dest = append(dest, &ss[i])
	}
	for i := range ns {
		dest = append(dest, &ns[i])
	}
	dest = append(dest, &e.CreatedAt, &e.UpdatedAt)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	e.Data = json.RawMessage(data)
	e.Metadata = jsonOrNil(metadata)
	e.State = jsonOrNil(state)
	for i, v := range ss {
		if v.Valid {
			e.Slots.S[i] = &v.String
		}
	}
	for i, v := range ns {
		if v.Valid {
			e.Slots.N[i] = &v.Float64
		}
	}
	return &e, nil
}

// CreateEntity inserts e with version 1.
func (s *Store) CreateEntity(ctx context.Context, e *store.Entity) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("sqlite: create entity: %w", err)
	}
	args := []any{e.TenantID, e.ID, e.Type, 1, objectOrEmpty(e.Data), nullJSON(e.Metadata), nullJSON(e.State)}
	args = append(args, slotArgs(e.Slots)...)
	args = append(args, e.CreatedAt, e.UpdatedAt)
	q := `INSERT INTO entities (` + entityColumns + `) VALUES (?` + strings.Repeat(", ?", len(args)-1) + `)`
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return interpretError(err)
	})
	s.watch.changed(store.EntityKey{TenantID: e.TenantID, ID: e.ID})
	if err != nil {
		return fmt.Errorf("sqlite: create entity %s: %w", e.ID, err)
	}
	e.Version = 1
	return nil
}

// GetEntity returns one entity of the tenant.
func (s *Store) GetEntity(ctx context.Context, tenantID, id string) (*store.Entity, error) {
	if err := store.CheckText("id", id); err != nil {
		return nil, fmt.Errorf("sqlite: get entity: %w", err)
	}
	row := s.r.QueryRowContext(ctx, `SELECT `+entityColumns+` FROM entities WHERE tenant_id = ? AND id = ?`, tenantID, id)
	e, err := scanEntity(row)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get entity %s: %w", id, interpretError(err))
	}
	return e, nil
}

// UpdateEntity replaces data, metadata (unless nil) and slots when the
// version still matches.
func (s *Store) UpdateEntity(ctx context.Context, u store.EntityUpdate) (*store.Entity, error) {
	if err := u.Check(); err != nil {
		return nil, fmt.Errorf("sqlite: update entity: %w", err)
	}
	args := []any{objectOrEmpty(u.Data), nullJSON(u.Metadata)}
	args = append(args, slotArgs(u.Slots)...)
	args = append(args, u.UpdatedAt, u.TenantID, u.ID, u.ExpectedVersion)
	q := `UPDATE entities
SET data = ?, metadata = COALESCE(?, metadata), ` + slotAssignments + `, version = version + 1, updated_at = ?
WHERE tenant_id = ? AND id = ? AND version = ?
RETURNING ` + entityColumns
	var out *store.Entity
	err := s.write(ctx, func(tx *sql.Tx) error {
		e, err := scanEntity(tx.QueryRowContext(ctx, q, args...))
		if errors.Is(err, sql.ErrNoRows) {
			return entityMissOrConflict(ctx, tx, u.TenantID, u.ID)
		}
		if err != nil {
			return err
		}
		out = e
		return nil
	})
	s.watch.changed(store.EntityKey{TenantID: u.TenantID, ID: u.ID})
	if err != nil {
		return nil, fmt.Errorf("sqlite: update entity %s: %w", u.ID, err)
	}
	return out, nil
}

// entityMissOrConflict tells why a versioned update matched no row.
func entityMissOrConflict(ctx context.Context, tx *sql.Tx, tenantID, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM entities WHERE tenant_id = ? AND id = ?`, tenantID, id).Scan(&one)
	if err != nil {
		return interpretError(err)
	}
	return store.ErrVersionConflict
}

// ListEntities lists entities of one type ordered by id, after f.AfterID.
func (s *Store) ListEntities(ctx context.Context, f store.EntityFilter) ([]store.Entity, error) {
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("sqlite: list entities: %w", err)
	}
	var q strings.Builder
	q.WriteString(`SELECT ` + entityColumns + ` FROM entities WHERE tenant_id = ? AND type = ?`)
	args := []any{f.TenantID, f.Type}
	for _, w := range f.Where {
		col, v, err := w.Column()
		if err != nil {
			return nil, fmt.Errorf("sqlite: list entities: %w", err)
		}
		q.WriteString(` AND ` + col + ` = ?`)
		args = append(args, v)
	}
	if f.AfterID != "" {
		q.WriteString(` AND id > ?`)
		args = append(args, f.AfterID)
	}
	q.WriteString(` ORDER BY id LIMIT ?`)
	args = append(args, sqlLimit(f.Limit))

	rows, err := s.r.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list entities: %w", err)
	}
	defer rows.Close()
	var out []store.Entity
	for rows.Next() {
		e, err := scanEntity(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list entities: %w", err)
		}
		out = append(out, *e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list entities: %w", err)
	}
	return out, nil
}

// SetEntityState overwrites the State snapshot; the version is unchanged.
func (s *Store) SetEntityState(ctx context.Context, tenantID, id string, state json.RawMessage) error {
	if err := store.CheckJSON("state", state); err != nil {
		return fmt.Errorf("sqlite: set entity state: %w", err)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE entities SET state = ? WHERE tenant_id = ? AND id = ?`,
			nullJSON(state), tenantID, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrNotFound
		}
		return nil
	})
	s.watch.changed(store.EntityKey{TenantID: tenantID, ID: id})
	if err != nil {
		return fmt.Errorf("sqlite: set entity state %s: %w", id, err)
	}
	return nil
}
