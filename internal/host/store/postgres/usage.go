package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/host/store"
)

// EntityTypeUsage counts the type's entities, their data keys and filled
// slots across tenants.
func (s *Store) EntityTypeUsage(ctx context.Context, entityType string) (*store.TypeUsage, error) {
	u, err := store.ScanTypeUsage(s.pool.QueryRow(ctx, `SELECT `+store.TypeUsageCounts()+` FROM entities WHERE type = $1`, entityType).Scan)
	if err != nil {
		return nil, fmt.Errorf("postgres: usage of entity type %s: %w", entityType, interpretError(err))
	}
	if u.Entities == 0 {
		return u, nil
	}
	// The dialects differ only in how they list a JSON object's keys.
	rows, err := s.pool.Query(ctx, `SELECT k, count(*) FROM entities, jsonb_object_keys(data) AS k WHERE type = $1 GROUP BY k`, entityType)
	if err != nil {
		return nil, fmt.Errorf("postgres: data keys of entity type %s: %w", entityType, interpretError(err))
	}
	defer rows.Close()
	if err := u.AddKeys(rows); err != nil {
		return nil, fmt.Errorf("postgres: data keys of entity type %s: %w", entityType, interpretError(err))
	}
	return u, nil
}

// EntityTypeCounts counts the stored entities of each type across tenants.
func (s *Store) EntityTypeCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT type, count(*) FROM entities GROUP BY type`)
	if err != nil {
		return nil, fmt.Errorf("postgres: count entities by type: %w", interpretError(err))
	}
	defer rows.Close()
	counts, err := store.ScanCounts(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: count entities by type: %w", interpretError(err))
	}
	return counts, nil
}

// FactTypeInUse reports whether a fact of factType is recorded on an entity
// of entityType, in any tenant.
func (s *Store) FactTypeInUse(ctx context.Context, entityType, factType string) (bool, error) {
	var used bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM facts WHERE entity_type = $1 AND type = $2)`, entityType, factType).Scan(&used); err != nil {
		return false, fmt.Errorf("postgres: fact type %s of %s in use: %w", factType, entityType, interpretError(err))
	}
	return used, nil
}

// FactTypeKeys counts the data keys of the facts of factType recorded on
// entities of entityType, in any tenant.
func (s *Store) FactTypeKeys(ctx context.Context, entityType, factType string) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT k, count(*) FROM facts, jsonb_object_keys(data) AS k WHERE entity_type = $1 AND type = $2 AND jsonb_typeof(data) = 'object' GROUP BY k`, entityType, factType)
	if err != nil {
		return nil, fmt.Errorf("postgres: data keys of fact type %s of %s: %w", factType, entityType, interpretError(err))
	}
	defer rows.Close()
	keys, err := store.ScanCounts(rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: data keys of fact type %s of %s: %w", factType, entityType, interpretError(err))
	}
	return keys, nil
}

// PutDomainLayer stores a domain manifest, replacing one of the same
// name, if the stored ones are still those expect digests.
func (s *Store) PutDomainLayer(ctx context.Context, l *store.DomainLayer, expect string) error {
	err := s.changeLayers(ctx, expect, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO domain_layers (name, source, sha256, updated_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE SET source = excluded.source, sha256 = excluded.sha256, updated_at = excluded.updated_at`, l.Name, l.Source, l.SHA256, l.UpdatedAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: put domain manifest %s: %w", l.Name, interpretError(err))
	}
	return nil
}

// changeLayers runs change in a transaction that holds the domain_layers
// table against other writers and first checks the stored manifests are
// those expect digests.
func (s *Store) changeLayers(ctx context.Context, expect string, change func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE domain_layers IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT name, sha256 FROM domain_layers ORDER BY name`)
		if err != nil {
			return err
		}
		err = store.ScanLayerDigests(rows, expect)
		rows.Close()
		if err != nil {
			return err
		}
		return change(tx)
	})
}

// ListDomainLayers lists the stored domain manifests by name.
func (s *Store) ListDomainLayers(ctx context.Context) ([]store.DomainLayer, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, source, sha256, updated_at FROM domain_layers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list domain manifests: %w", interpretError(err))
	}
	defer rows.Close()
	var out []store.DomainLayer
	for rows.Next() {
		var l store.DomainLayer
		if err := rows.Scan(&l.Name, &l.Source, &l.SHA256, &l.UpdatedAt); err != nil {
			return nil, fmt.Errorf("postgres: list domain manifests: %w", interpretError(err))
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list domain manifests: %w", interpretError(err))
	}
	return out, nil
}

// DeleteDomainLayer removes a stored domain manifest.
func (s *Store) DeleteDomainLayer(ctx context.Context, name, expect string) error {
	err := s.changeLayers(ctx, expect, func(tx pgx.Tx) error {
		res, err := tx.Exec(ctx, `DELETE FROM domain_layers WHERE name = $1`, name)
		if err == nil && res.RowsAffected() == 0 {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: delete domain manifest %s: %w", name, interpretError(err))
	}
	return nil
}
