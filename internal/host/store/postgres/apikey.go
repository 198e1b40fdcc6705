package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/host/store"
)

const apiKeyColumns = `id, tenant_id, mode, COALESCE(name, ''), COALESCE(prefix, ''), hash, created_at, revoked_at`

func scanAPIKey(row pgx.Row) (*store.APIKey, error) {
	var k store.APIKey
	if err := row.Scan(&k.ID, &k.TenantID, &k.Mode, &k.Name, &k.Prefix, &k.Hash, &k.CreatedAt, &k.RevokedAt); err != nil {
		return nil, err
	}
	return &k, nil
}

// CreateAPIKey inserts k. A taken id or hash is ErrAlreadyExists.
func (s *Store) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO api_keys (id, tenant_id, mode, name, prefix, hash, created_at, revoked_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		k.ID, k.TenantID, k.Mode, nullString(k.Name), nullString(k.Prefix), k.Hash, k.CreatedAt, k.RevokedAt)
	if err != nil {
		return fmt.Errorf("postgres: create api key %s: %w", k.ID, interpretError(err))
	}
	return nil
}

// GetAPIKeyByHash returns the key with that hash, revoked or not.
func (s *Store) GetAPIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE hash = $1`, hash))
	if err != nil {
		return nil, fmt.Errorf("postgres: get api key by hash: %w", interpretError(err))
	}
	return k, nil
}

// RevokeAPIKey sets RevokedAt; a key revoked earlier keeps its first time.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, now int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`, now, id)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres: revoke api key %s: %w", id, interpretError(err))
	}
	return nil
}

// ListAPIKeys lists the keys of one tenant, or of every tenant when tenantID
// is empty, by id.
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string) ([]store.APIKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE $1 = '' OR tenant_id = $1 ORDER BY id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("postgres: list api keys: %w", err)
	}
	defer rows.Close()
	var out []store.APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list api keys: %w", err)
		}
		out = append(out, *k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list api keys: %w", err)
	}
	return out, nil
}
