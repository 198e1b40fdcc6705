package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/host/store"
)

// A record is live while now < expires_at; an in-flight record is abandoned
// once now >= locked_until.

// claimIdem inserts an in-flight record, or takes over the existing one when
// it is expired or abandoned, in one statement. ON CONFLICT locks the
// conflicting row and evaluates the WHERE on its latest committed version,
// so of concurrent callers exactly one gets a row back. $6 is now.
const claimIdem = `INSERT INTO idempotency AS i
	(tenant_id, scope, key, request_hash, state, status_code, body, headers, locked_until, created_at, expires_at)
VALUES ($1, $2, $3, $4, 'in_flight', 0, NULL, NULL, $5, $6, $7)
ON CONFLICT (tenant_id, scope, key) DO UPDATE SET
	request_hash = excluded.request_hash, state = excluded.state, status_code = 0, body = NULL, headers = NULL,
	locked_until = excluded.locked_until, created_at = excluded.created_at, expires_at = excluded.expires_at
WHERE i.expires_at <= excluded.created_at OR (i.state = 'in_flight' AND i.locked_until <= excluded.created_at)
RETURNING true`

// BeginIdempotency claims the key, or returns the live record holding it.
func (s *Store) BeginIdempotency(ctx context.Context, b store.IdemBegin) (*store.IdemRecord, bool, error) {
	// The loop only repeats when the record that blocked the claim was
	// released (deleted) before it could be read.
	for range 5 {
		var claimed bool
		err := s.pool.QueryRow(ctx, claimIdem, b.TenantID, b.Scope, b.Key, nullString(b.RequestHash),
			b.LockedUntil, b.Now, b.ExpiresAt).Scan(&claimed)
		if err == nil {
			return nil, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			err = interpretError(err)
			if commitUnconfirmed(err) {
				// The claim's statement was sent and not answered: it
				// may be stored.
				err = fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
			}
			return nil, false, fmt.Errorf("postgres: begin idempotency: %w", err)
		}
		rec, err := s.getIdem(ctx, b.IdemKey)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("postgres: begin idempotency: %w", err)
		}
		return rec, false, nil
	}
	return nil, false, errors.New("postgres: begin idempotency: the record kept changing; try again")
}

func (s *Store) getIdem(ctx context.Context, k store.IdemKey) (*store.IdemRecord, error) {
	var (
		r       = store.IdemRecord{IdemKey: k}
		headers []byte
	)
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(request_hash, ''), state, status_code, body, headers, locked_until,
	created_at, expires_at
FROM idempotency WHERE tenant_id = $1 AND scope = $2 AND key = $3`, k.TenantID, k.Scope, k.Key).
		Scan(&r.RequestHash, &r.State, &r.StatusCode, &r.Body, &headers, &r.LockedUntil, &r.CreatedAt, &r.ExpiresAt)
	if err != nil {
		return nil, err
	}
	r.Headers = jsonOrNil(headers)
	return &r, nil
}

// CompleteIdempotency stores the response and marks the record done.
func (s *Store) CompleteIdempotency(ctx context.Context, k store.IdemKey, status int, body []byte, headers json.RawMessage) error {
	if err := store.CheckJSON("headers", headers); err != nil {
		return fmt.Errorf("postgres: complete idempotency: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE idempotency SET state = $1, status_code = $2, body = $3, headers = $4::jsonb
WHERE tenant_id = $5 AND scope = $6 AND key = $7`, store.IdemDone, status, body, nullJSON(headers), k.TenantID, k.Scope, k.Key)
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres: complete idempotency: %w", interpretError(err))
	}
	return nil
}

// ReleaseIdempotency deletes the record if it is still in flight under the
// claim that set lockedUntil; a claim taken over since, a
// completed or missing record is left alone.
func (s *Store) ReleaseIdempotency(ctx context.Context, k store.IdemKey, lockedUntil int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency WHERE tenant_id = $1 AND scope = $2 AND key = $3 AND state = $4
AND locked_until = $5`,
		k.TenantID, k.Scope, k.Key, store.IdemInFlight, lockedUntil)
	if err != nil {
		return false, fmt.Errorf("postgres: release idempotency: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// PurgeIdempotency deletes the records expired at now.
func (s *Store) PurgeIdempotency(ctx context.Context, now int64) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency WHERE expires_at <= $1`, now)
	if err != nil {
		return 0, fmt.Errorf("postgres: purge idempotency: %w", err)
	}
	return tag.RowsAffected(), nil
}
