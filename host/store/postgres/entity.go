package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/host/store"
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

	// insertEntity has the values $1..$22 in entityColumns order, with the
	// JSON ones sent as text.
	insertEntity = func() string {
		vals := []string{"$1", "$2", "$3", "$4", "$5::jsonb", "$6::jsonb", "$7::jsonb"}
		for i := range slotColumns {
			vals = append(vals, "$"+strconv.Itoa(8+i))
		}
		n := 8 + len(slotColumns)
		vals = append(vals, "$"+strconv.Itoa(n), "$"+strconv.Itoa(n+1))
		return `INSERT INTO entities (` + entityColumns + `) VALUES (` + strings.Join(vals, ", ") + `)`
	}()

	// updateEntity sets data ($1), metadata unless $2 is NULL, the slots
	// ($3..$17) and updated_at ($18) when tenant ($19), id ($20) and version
	// ($21) match.
	updateEntity = func() string {
		var set strings.Builder
		for i, c := range slotColumns {
			fmt.Fprintf(&set, "%s = $%d, ", c, 3+i)
		}
		n := 3 + len(slotColumns)
		return fmt.Sprintf(`UPDATE entities
SET data = $1::jsonb, metadata = COALESCE($2::jsonb, metadata), %sversion = version + 1, updated_at = $%d
WHERE tenant_id = $%d AND id = $%d AND version = $%d
RETURNING `+entityColumns, set.String(), n, n+1, n+2, n+3)
	}()
)

// slotArgs returns the slot values in slotColumns order; nil pointers are
// sent as NULL.
func slotArgs(sl store.Slots) []any {
	args := make([]any, 0, len(slotColumns))
	for _, p := range sl.S {
		args = append(args, p)
	}
	for _, p := range sl.N {
		args = append(args, p)
	}
	return args
}

// scanEntity reads a row of entityColumns. Slots are scanned into fresh
// pointers, so callers may change them freely.
func scanEntity(row pgx.Row) (*store.Entity, error) {
	var (
		e                     store.Entity
		data, metadata, state []byte
	)
	dest := []any{&e.TenantID, &e.ID, &e.Type, &e.Version, &data, &metadata, &state}
	for i := range e.Slots.S {
		dest = append(dest, &e.Slots.S[i])
	}
	for i := range e.Slots.N {
		dest = append(dest, &e.Slots.N[i])
	}
	dest = append(dest, &e.CreatedAt, &e.UpdatedAt)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	e.Data = json.RawMessage(data)
	e.Metadata = jsonOrNil(metadata)
	e.State = jsonOrNil(state)
	return &e, nil
}

func checkEntityJSON(data, metadata, state json.RawMessage) error {
	return errors.Join(checkJSON("data", data), checkJSON("metadata", metadata), checkJSON("state", state))
}

// CreateEntity inserts e with version 1.
func (s *Store) CreateEntity(ctx context.Context, e *store.Entity) error {
	if err := checkEntityJSON(e.Data, e.Metadata, e.State); err != nil {
		return fmt.Errorf("postgres: create entity: %w", err)
	}
	args := []any{e.TenantID, e.ID, e.Type, int64(1), objectOrEmpty(e.Data), nullJSON(e.Metadata), nullJSON(e.State)}
	args = append(args, slotArgs(e.Slots)...)
	args = append(args, e.CreatedAt, e.UpdatedAt)
	if _, err := s.pool.Exec(ctx, insertEntity, args...); err != nil {
		return fmt.Errorf("postgres: create entity %s: %w", e.ID, interpretError(err))
	}
	e.Version = 1
	return nil
}

// GetEntity returns one entity of the tenant.
func (s *Store) GetEntity(ctx context.Context, tenantID, id string) (*store.Entity, error) {
	row := s.pool.QueryRow(ctx, `SELECT `+entityColumns+` FROM entities WHERE tenant_id = $1 AND id = $2`, tenantID, id)
	e, err := scanEntity(row)
	if err != nil {
		return nil, fmt.Errorf("postgres: get entity %s: %w", id, interpretError(err))
	}
	return e, nil
}

// UpdateEntity replaces data, metadata (unless nil) and slots when the
// version still matches. One statement: the row lock it takes makes the
// version check and the increment atomic.
func (s *Store) UpdateEntity(ctx context.Context, u store.EntityUpdate) (*store.Entity, error) {
	if err := checkEntityJSON(u.Data, u.Metadata, nil); err != nil {
		return nil, fmt.Errorf("postgres: update entity: %w", err)
	}
	args := []any{objectOrEmpty(u.Data), nullJSON(u.Metadata)}
	args = append(args, slotArgs(u.Slots)...)
	args = append(args, u.UpdatedAt, u.TenantID, u.ID, u.ExpectedVersion)
	e, err := scanEntity(s.pool.QueryRow(ctx, updateEntity, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		err = s.entityMissOrConflict(ctx, u.TenantID, u.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: update entity %s: %w", u.ID, interpretError(err))
	}
	return e, nil
}

// entityMissOrConflict tells why a versioned update matched no row. Entities
// are never deleted, so a row that exists now existed then.
func (s *Store) entityMissOrConflict(ctx context.Context, tenantID, id string) error {
	var exists bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM entities WHERE tenant_id = $1 AND id = $2)`,
		tenantID, id).Scan(&exists)
	switch {
	case err != nil:
		return err
	case !exists:
		return store.ErrNotFound
	default:
		return store.ErrVersionConflict
	}
}

// ListEntities lists entities of one type ordered by id, after f.AfterID.
func (s *Store) ListEntities(ctx context.Context, f store.EntityFilter) ([]store.Entity, error) {
	var q strings.Builder
	q.WriteString(`SELECT ` + entityColumns + ` FROM entities WHERE tenant_id = $1 AND type = $2`)
	args := []any{f.TenantID, f.Type}
	for _, w := range f.Where {
		_, number, ok := store.ParseSlotColumn(w.Slot)
		if !ok {
			return nil, fmt.Errorf("postgres: list entities: unknown slot %q", w.Slot)
		}
		v, err := slotValue(w.Value, number)
		if err != nil {
			return nil, fmt.Errorf("postgres: list entities: slot %s: %w", w.Slot, err)
		}
		args = append(args, v)
		// w.Slot is one of the fixed column names, checked above.
		fmt.Fprintf(&q, ` AND %s = $%d`, w.Slot, len(args))
	}
	if f.AfterID != "" {
		args = append(args, f.AfterID)
		fmt.Fprintf(&q, ` AND id > $%d`, len(args))
	}
	args = append(args, limitArg(f.Limit))
	fmt.Fprintf(&q, ` ORDER BY id LIMIT $%d`, len(args))

	rows, err := s.pool.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list entities: %w", err)
	}
	defer rows.Close()
	var out []store.Entity
	for rows.Next() {
		e, err := scanEntity(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list entities: %w", err)
		}
		out = append(out, *e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list entities: %w", err)
	}
	return out, nil
}

// slotValue checks the type of a filter value: a string for ix_s_*, a number
// for ix_n_*.
func slotValue(v any, number bool) (any, error) {
	if !number {
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, fmt.Errorf("want a string value, got %T", v)
	}
	switch n := v.(type) {
	case float64:
		return n, nil
	case float32:
		return float64(n), nil
	case int:
		return float64(n), nil
	case int64:
		return float64(n), nil
	case int32:
		return float64(n), nil
	}
	return nil, fmt.Errorf("want a number value, got %T", v)
}

// SetEntityState overwrites the State snapshot; the version is unchanged.
func (s *Store) SetEntityState(ctx context.Context, tenantID, id string, state json.RawMessage) error {
	if err := checkJSON("state", state); err != nil {
		return fmt.Errorf("postgres: set entity state: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE entities SET state = $1::jsonb WHERE tenant_id = $2 AND id = $3`,
		nullJSON(state), tenantID, id)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres: set entity state %s: %w", id, interpretError(err))
	}
	return nil
}
