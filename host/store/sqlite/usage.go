package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/factline/factline/host/store"
)

// EntityTypeUsage counts the type's entities, their data keys and filled
// slots across tenants.
func (s *Store) EntityTypeUsage(ctx context.Context, entityType string) (*store.TypeUsage, error) {
	u := &store.TypeUsage{Keys: map[string]int64{}, Slots: map[string]int64{}}
	cols := store.SlotColumns()
	counts := make([]string, len(cols))
	for i, c := range cols {
		counts[i] = "count(" + c + ")"
	}
	vals := make([]int64, len(cols))
	dest := []any{&u.Entities}
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	if err := s.r.QueryRowContext(ctx, `SELECT count(*), `+strings.Join(counts, ", ")+` FROM entities WHERE type = ?`, entityType).Scan(dest...); err != nil {
		return nil, fmt.Errorf("sqlite: usage of entity type %s: %w", entityType, interpretError(err))
	}
	for i, c := range cols {
		if vals[i] > 0 {
			u.Slots[c] = vals[i]
		}
	}
	if u.Entities == 0 {
		return u, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT j.key, count(*) FROM entities, json_each(entities.data) AS j WHERE entities.type = ? GROUP BY j.key`, entityType)
	if err != nil {
		return nil, fmt.Errorf("sqlite: data keys of entity type %s: %w", entityType, interpretError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, fmt.Errorf("sqlite: data keys of entity type %s: %w", entityType, err)
		}
		u.Keys[k] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: data keys of entity type %s: %w", entityType, interpretError(err))
	}
	return u, nil
}

// FactTypeInUse reports whether a fact of factType is recorded on an entity
// of entityType, in any tenant.
func (s *Store) FactTypeInUse(ctx context.Context, entityType, factType string) (bool, error) {
	var used bool
	if err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM facts WHERE entity_type = ? AND type = ?)`, entityType, factType).Scan(&used); err != nil {
		return false, fmt.Errorf("sqlite: fact type %s of %s in use: %w", factType, entityType, interpretError(err))
	}
	return used, nil
}
