package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/factline/factline/internal/host/store"
)

// EntityTypeUsage counts the type's entities, their data keys and filled
// slots across tenants.
func (s *Store) EntityTypeUsage(ctx context.Context, entityType string) (*store.TypeUsage, error) {
	u, err := store.ScanTypeUsage(s.r.QueryRowContext(ctx, `SELECT `+store.TypeUsageCounts()+` FROM entities WHERE type = ?`, entityType).Scan)
	if err != nil {
		return nil, fmt.Errorf("sqlite: usage of entity type %s: %w", entityType, interpretError(err))
	}
	if u.Entities == 0 {
		return u, nil
	}
	// The dialects differ only in how they list a JSON object's keys.
	rows, err := s.r.QueryContext(ctx, `SELECT j.key, count(*) FROM entities, json_each(entities.data) AS j WHERE entities.type = ? GROUP BY j.key`, entityType)
	if err != nil {
		return nil, fmt.Errorf("sqlite: data keys of entity type %s: %w", entityType, interpretError(err))
	}
	defer rows.Close()
	if err := u.AddKeys(rows); err != nil {
		return nil, fmt.Errorf("sqlite: data keys of entity type %s: %w", entityType, interpretError(err))
	}
	return u, nil
}

// EntityTypeCounts counts the stored entities of each type across tenants.
func (s *Store) EntityTypeCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT type, count(*) FROM entities GROUP BY type`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: count entities by type: %w", interpretError(err))
	}
	defer rows.Close()
	counts, err := store.ScanCounts(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: count entities by type: %w", interpretError(err))
	}
	return counts, nil
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

// FactTypeKeys counts the data keys of the facts of factType recorded on
// entities of entityType, in any tenant.
func (s *Store) FactTypeKeys(ctx context.Context, entityType, factType string) (map[string]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT j.key, count(*) FROM facts, json_each(facts.data) AS j WHERE facts.entity_type = ? AND facts.type = ? AND json_type(facts.data) = 'object' GROUP BY j.key`, entityType, factType)
	if err != nil {
		return nil, fmt.Errorf("sqlite: data keys of fact type %s of %s: %w", factType, entityType, interpretError(err))
	}
	defer rows.Close()
	keys, err := store.ScanCounts(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: data keys of fact type %s of %s: %w", factType, entityType, interpretError(err))
	}
	return keys, nil
}

// PutDomainLayer stores a domain manifest, replacing one of the same
// name, if the stored ones are still those expect digests.
func (s *Store) PutDomainLayer(ctx context.Context, l *store.DomainLayer, expect string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := layersUnchanged(ctx, tx, expect); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO domain_layers (name, source, sha256, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET source = excluded.source, sha256 = excluded.sha256, updated_at = excluded.updated_at`, l.Name, l.Source, l.SHA256, l.UpdatedAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: put domain manifest %s: %w", l.Name, interpretError(err))
	}
	return nil
}

// ListDomainLayers lists the stored domain manifests by name.
func (s *Store) ListDomainLayers(ctx context.Context) ([]store.DomainLayer, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name, source, sha256, updated_at FROM domain_layers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list domain manifests: %w", interpretError(err))
	}
	defer rows.Close()
	var out []store.DomainLayer
	for rows.Next() {
		var l store.DomainLayer
		if err := rows.Scan(&l.Name, &l.Source, &l.SHA256, &l.UpdatedAt); err != nil {
			return nil, fmt.Errorf("sqlite: list domain manifests: %w", interpretError(err))
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list domain manifests: %w", interpretError(err))
	}
	return out, nil
}

// DeleteDomainLayer removes a stored domain manifest.
func (s *Store) DeleteDomainLayer(ctx context.Context, name, expect string) error {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := layersUnchanged(ctx, tx, expect); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM domain_layers WHERE name = ?`, name)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete domain manifest %s: %w", name, interpretError(err))
	}
	if n == 0 {
		return fmt.Errorf("sqlite: delete domain manifest %s: %w", name, store.ErrNotFound)
	}
	return nil
}

// layersUnchanged checks, inside the single writer's transaction, that
// the stored domain manifests are those expect digests.
func layersUnchanged(ctx context.Context, tx *sql.Tx, expect string) error {
	rows, err := tx.QueryContext(ctx, `SELECT name, sha256 FROM domain_layers ORDER BY name`)
	if err != nil {
		return err
	}
	defer rows.Close()
	return store.ScanLayerDigests(rows, expect)
}
