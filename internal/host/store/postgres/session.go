package postgres

import (
	"context"
	"fmt"

	"github.com/factline/factline/internal/host/store"
)

// CreateSession inserts a console session.
func (s *Store) CreateSession(ctx context.Context, se *store.Session) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO console_sessions (id, tenant_id, mode, key_id, key, csrf, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, se.ID, se.TenantID, se.Mode, se.KeyID, se.Key, se.CSRF, se.CreatedAt, se.ExpiresAt)
	if err != nil {
		return fmt.Errorf("postgres: create session: %w", interpretError(err))
	}
	return nil
}

// GetSession returns a session that has not expired at now.
func (s *Store) GetSession(ctx context.Context, id string, now int64) (*store.Session, error) {
	se := &store.Session{ID: id}
	err := s.pool.QueryRow(ctx, `SELECT tenant_id, mode, key_id, key, csrf, created_at, expires_at
FROM console_sessions WHERE id = $1 AND expires_at > $2`, id, now).
		Scan(&se.TenantID, &se.Mode, &se.KeyID, &se.Key, &se.CSRF, &se.CreatedAt, &se.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("postgres: get session: %w", interpretError(err))
	}
	return se, nil
}

// DeleteSession removes a session, if there is one.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM console_sessions WHERE id = $1`, id); err != nil {
		return fmt.Errorf("postgres: delete session: %w", interpretError(err))
	}
	return nil
}

// PurgeSessions deletes the sessions expired at now.
func (s *Store) PurgeSessions(ctx context.Context, now int64) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM console_sessions WHERE expires_at <= $1`, now)
	if err != nil {
		return 0, fmt.Errorf("postgres: purge sessions: %w", interpretError(err))
	}
	return tag.RowsAffected(), nil
}
