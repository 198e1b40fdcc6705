package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/factline/factline/internal/host/store"
)

// A record is live while now < expires_at; an in-flight record is abandoned
// once now >= locked_until.

// BeginIdempotency claims the key, or returns the live record holding it.
func (s *Store) BeginIdempotency(ctx context.Context, b store.IdemBegin) (*store.IdemRecord, bool, error) {
	var existing *store.IdemRecord
	err := s.write(ctx, func(tx *sql.Tx) error {
		rec, err := getIdem(ctx, tx, b.IdemKey)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case b.Now < rec.ExpiresAt && (rec.State != store.IdemInFlight || b.Now < rec.LockedUntil):
			existing = rec
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO idempotency
	(tenant_id, scope, key, request_hash, state, status_code, body, headers, locked_until, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, 0, NULL, NULL, ?, ?, ?)
ON CONFLICT (tenant_id, scope, key) DO UPDATE SET
	request_hash = excluded.request_hash, state = excluded.state, status_code = 0, body = NULL, headers = NULL,
	locked_until = excluded.locked_until, created_at = excluded.created_at, expires_at = excluded.expires_at`,
			b.TenantID, b.Scope, b.Key, nullString(b.RequestHash), store.IdemInFlight, b.LockedUntil, b.Now, b.ExpiresAt)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: begin idempotency: %w", err)
	}
	if existing != nil {
		return existing, false, nil
	}
	return nil, true, nil
}

func getIdem(ctx context.Context, tx *sql.Tx, k store.IdemKey) (*store.IdemRecord, error) {
	var (
		r       = store.IdemRecord{IdemKey: k}
		hash    sql.NullString
		headers sql.NullString
	)
	err := tx.QueryRowContext(ctx, `SELECT request_hash, state, status_code, body, headers, locked_until, created_at, expires_at
FROM idempotency WHERE tenant_id = ? AND scope = ? AND key = ?`, k.TenantID, k.Scope, k.Key).
		Scan(&hash, &r.State, &r.StatusCode, &r.Body, &headers, &r.LockedUntil, &r.CreatedAt, &r.ExpiresAt)
	if err != nil {
		return nil, err
	}
	r.RequestHash = hash.String
	r.Headers = jsonOrNil(headers)
	return &r, nil
}

// CompleteIdempotency stores the response and marks the record done.
func (s *Store) CompleteIdempotency(ctx context.Context, k store.IdemKey, status int, body []byte, headers json.RawMessage) error {
	if err := store.CheckJSON("headers", headers); err != nil {
		return fmt.Errorf("sqlite: complete idempotency: %w", err)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE idempotency SET state = ?, status_code = ?, body = ?, headers = ?
WHERE tenant_id = ? AND scope = ? AND key = ?`, store.IdemDone, status, body, nullJSON(headers), k.TenantID, k.Scope, k.Key)
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
		return fmt.Errorf("sqlite: complete idempotency: %w", err)
	}
	return nil
}

// ReleaseIdempotency deletes the record if it is still in flight under the
// claim that set lockedUntil; a claim taken over since, a
// completed or missing record is left alone.
func (s *Store) ReleaseIdempotency(ctx context.Context, k store.IdemKey, lockedUntil int64) (bool, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM idempotency WHERE tenant_id = ? AND scope = ? AND key = ? AND state = ?
AND locked_until = ?`,
			k.TenantID, k.Scope, k.Key, store.IdemInFlight, lockedUntil)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: release idempotency: %w", err)
	}
	return n > 0, nil
}

// PurgeIdempotency deletes the records expired at now.
func (s *Store) PurgeIdempotency(ctx context.Context, now int64) (int64, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM idempotency WHERE expires_at <= ?`, now)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge idempotency: %w", err)
	}
	return n, nil
}
