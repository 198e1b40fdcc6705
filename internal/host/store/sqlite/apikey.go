package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/factline/factline/internal/host/store"
)

const apiKeyColumns = `id, tenant_id, mode, name, prefix, hash, created_at, revoked_at`

func scanAPIKey(row rowScanner) (*store.APIKey, error) {
	var (
		k            store.APIKey
		name, prefix sql.NullString
		revokedAt    sql.NullInt64
	)
	if err := row.Scan(&k.ID, &k.TenantID, &k.Mode, &name, &prefix, &k.Hash, &k.CreatedAt, &revokedAt); err != nil {
		return nil, err
	}
	k.Name, k.Prefix = name.String, prefix.String
	k.RevokedAt = intPtr(revokedAt)
	return &k, nil
}

// CreateAPIKey inserts k.
func (s *Store) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (`+apiKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.TenantID, k.Mode, nullString(k.Name), nullString(k.Prefix), k.Hash, k.CreatedAt, nullInt(k.RevokedAt))
		return interpretError(err)
	})
	if err != nil {
		return fmt.Errorf("sqlite: create api key %s: %w", k.ID, err)
	}
	return nil
}

// GetAPIKeyByHash returns the key with that hash, revoked or not.
func (s *Store) GetAPIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	k, err := scanAPIKey(s.r.QueryRowContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE hash = ?`, hash))
	if err != nil {
		return nil, fmt.Errorf("sqlite: get api key by hash: %w", interpretError(err))
	}
	return k, nil
}

// RevokeAPIKey sets RevokedAt; a key revoked earlier keeps its first time.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, now int64) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, now, id)
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
	if err != nil {
		return fmt.Errorf("sqlite: revoke api key %s: %w", id, err)
	}
	return nil
}

// ListAPIKeys lists the keys of one tenant, or of every tenant when tenantID
// is empty, by id.
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string) ([]store.APIKey, error) {
	q := `SELECT ` + apiKeyColumns + ` FROM api_keys ORDER BY id`
	var args []any
	if tenantID != "" {
		q = `SELECT ` + apiKeyColumns + ` FROM api_keys WHERE tenant_id = ? ORDER BY id`
		args = append(args, tenantID)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list api keys: %w", err)
	}
	defer rows.Close()
	var out []store.APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list api keys: %w", err)
		}
		out = append(out, *k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list api keys: %w", err)
	}
	return out, nil
}
