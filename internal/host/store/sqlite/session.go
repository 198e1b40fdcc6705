package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/factline/factline/internal/host/store"
)

// CreateSession inserts a console session.
func (s *Store) CreateSession(ctx context.Context, se *store.Session) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO console_sessions (id, tenant_id, mode, key_id, key, csrf, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, se.ID, se.TenantID, se.Mode, se.KeyID, se.Key, se.CSRF, se.CreatedAt, se.ExpiresAt)
		return interpretError(err)
	})
	if err != nil {
		return fmt.Errorf("sqlite: create session: %w", err)
	}
	return nil
}

// GetSession returns a session that has not expired at now.
func (s *Store) GetSession(ctx context.Context, id string, now int64) (*store.Session, error) {
	se := &store.Session{ID: id}
	err := s.r.QueryRowContext(ctx, `SELECT tenant_id, mode, key_id, key, csrf, created_at, expires_at
FROM console_sessions WHERE id = ? AND expires_at > ?`, id, now).
		Scan(&se.TenantID, &se.Mode, &se.KeyID, &se.Key, &se.CSRF, &se.CreatedAt, &se.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get session: %w", interpretError(err))
	}
	return se, nil
}

// DeleteSession removes a session, if there is one.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM console_sessions WHERE id = ?`, id)
		return interpretError(err)
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete session: %w", err)
	}
	return nil
}

// PurgeSessions deletes the sessions expired at now.
func (s *Store) PurgeSessions(ctx context.Context, now int64) (int64, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM console_sessions WHERE expires_at <= ?`, now)
		if err != nil {
			return interpretError(err)
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge sessions: %w", err)
	}
	return n, nil
}
