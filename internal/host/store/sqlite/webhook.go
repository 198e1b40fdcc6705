package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/factline/factline/internal/host/store"
)

const outboxColumns = `delivery_id, tenant_id, triggered_fact_id, config_id, config_version, campaign_id, endpoint,
status, attempt, max_attempts, timeout_seconds, sig_timestamp, payload, message, next_attempt_at, claimed_until,
claim_token, attempt_started_at, first_attempt_at, last_attempt_at, last_status_code, dead_letter, dlq_message_id,
dead_at, replays, created_at, updated_at`

func scanOutbox(row rowScanner, extra ...any) (*store.OutboxRow, error) {
	var (
		r                            store.OutboxRow
		campaign, token, dead, dlqID sql.NullString
		payload, message             string
	)
	dest := append(extra, &r.DeliveryID, &r.TenantID, &r.TriggeredFactID, &r.ConfigID, &r.ConfigVersion, &campaign,
		&r.Endpoint, &r.Status, &r.Attempt, &r.MaxAttempts, &r.TimeoutSeconds, &r.SigTimestamp, &payload, &message,
		&r.NextAttemptAt, &r.ClaimedUntil, &token, &r.AttemptStartedAt, &r.FirstAttemptAt, &r.LastAttemptAt,
		&r.LastStatusCode, &dead, &dlqID, &r.DeadAt, &r.Replays, &r.CreatedAt, &r.UpdatedAt)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	r.CampaignID, r.ClaimToken, r.DLQMessageID = campaign.String, token.String, dlqID.String
	r.Payload = []byte(payload)
	r.Message = json.RawMessage(message)
	r.DeadLetter = jsonOrNil(dead)
	return &r, nil
}

// insertOutbox writes a new outbox row inside tx.
func insertOutbox(ctx context.Context, tx *sql.Tx, r *store.OutboxRow) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO webhook_outbox (`+outboxColumns+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.DeliveryID, r.TenantID, r.TriggeredFactID, r.ConfigID, r.ConfigVersion, nullString(r.CampaignID), r.Endpoint,
		r.Status, r.Attempt, r.MaxAttempts, r.TimeoutSeconds, r.SigTimestamp, string(r.Payload), objectOrEmpty(r.Message),
		r.NextAttemptAt, r.ClaimedUntil, nullString(r.ClaimToken), r.AttemptStartedAt, r.FirstAttemptAt, r.LastAttemptAt,
		r.LastStatusCode, nullJSON(r.DeadLetter), nullString(r.DLQMessageID), r.DeadAt, r.Replays, r.CreatedAt, r.UpdatedAt)
	return err
}

// claimCandidates selects due rows, at most ?4 per endpoint; the write
// transaction it runs in is the only writer, so nothing can claim them
// between this read and the update that follows.
const claimCandidates = `WITH due AS (
	SELECT o.delivery_id, o.endpoint, o.next_attempt_at
	FROM webhook_outbox o
	WHERE o.status = 'pending' AND o.next_attempt_at <= ?1 AND o.next_attempt_at >= ?6 AND o.claimed_until <= ?1
		AND o.endpoint NOT IN (SELECT value FROM json_each(?2))
		AND NOT EXISTS (SELECT 1 FROM webhook_paused p WHERE p.tenant_id = o.tenant_id AND p.config_id = o.config_id)
	ORDER BY o.next_attempt_at, o.delivery_id
	LIMIT ?3
), ranked AS (
	SELECT delivery_id, next_attempt_at,
		row_number() OVER (PARTITION BY endpoint ORDER BY next_attempt_at, delivery_id) AS rn
	FROM due
)
SELECT delivery_id FROM ranked WHERE rn <= ?4 ORDER BY next_attempt_at, delivery_id LIMIT ?5`

// ClaimOutbox leases due rows inside one write transaction (BEGIN
// IMMEDIATE): SQLite has one writer at a time, across processes sharing
// the file, so two claims can never take the same row.
func (s *Store) ClaimOutbox(ctx context.Context, req store.ClaimRequest) ([]store.OutboxClaim, error) {
	if req.Token == "" || req.Limit <= 0 {
		return nil, errors.New("sqlite: claim outbox: a token and a positive limit are required")
	}
	perEndpoint, window := req.PerEndpoint, req.Limit
	if perEndpoint <= 0 {
		perEndpoint = req.Limit
	} else {
		window = req.Limit * 4
	}
	skip := req.SkipEndpoints
	if skip == nil {
		skip = []string{}
	}
	skipJSON, err := json.Marshal(skip)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim outbox: %w", err)
	}
	var out []store.OutboxClaim
	err = s.write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, claimCandidates, req.Now, string(skipJSON), window, perEndpoint, req.Limit, req.DueFrom)
		if err != nil {
			return err
		}
		var ids []any
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		if len(ids) == 0 {
			return nil
		}
		in := "?" + strings.Repeat(", ?", len(ids)-1)
		// The previous attempt_started_at is read before the update.
		prev := make(map[string]int64, len(ids))
		prows, err := tx.QueryContext(ctx, `SELECT delivery_id, attempt_started_at FROM webhook_outbox WHERE delivery_id IN (`+in+`)`, ids...)
		if err != nil {
			return err
		}
		for prows.Next() {
			var (
				id string
				at int64
			)
			if err := prows.Scan(&id, &at); err != nil {
				prows.Close()
				return err
			}
			prev[id] = at
		}
		if err := prows.Err(); err != nil {
			return err
		}
		prows.Close()
		args := append([]any{req.Now, req.LeaseFactorMS, req.LeaseMarginMS, req.Token}, ids...)
		urows, err := tx.QueryContext(ctx, `UPDATE webhook_outbox
SET claimed_until = ? + ? * timeout_seconds + ?, claim_token = ?4, attempt_started_at = ?1, updated_at = ?1
WHERE delivery_id IN (`+strings.Repeat("?, ", len(ids)-1)+`?) RETURNING `+outboxColumns, args...)
		if err != nil {
			return err
		}
		defer urows.Close()
		for urows.Next() {
			r, err := scanOutbox(urows)
			if err != nil {
				return err
			}
			out = append(out, store.OutboxClaim{OutboxRow: *r, Interrupted: prev[r.DeliveryID]})
		}
		return urows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim outbox: %w", err)
	}
	slices.SortFunc(out, func(a, b store.OutboxClaim) int {
		if a.NextAttemptAt != b.NextAttemptAt {
			if a.NextAttemptAt < b.NextAttemptAt {
				return -1
			}
			return 1
		}
		return strings.Compare(a.DeliveryID, b.DeliveryID)
	})
	return out, nil
}

// ChangeOutbox applies the changes in one write transaction, each under a
// savepoint so that a failing change leaves no trace.
func (s *Store) ChangeOutbox(ctx context.Context, changes []store.OutboxChange) ([]error, error) {
	for i, c := range changes {
		if c.Row.DeliveryID == "" || c.Row.TenantID == "" {
			return nil, fmt.Errorf("sqlite: change outbox: change %d: delivery id and tenant are required", i)
		}
		if err := store.CheckJSON("dead letter", c.Row.DeadLetter); err != nil {
			return nil, fmt.Errorf("sqlite: change outbox: change %d: %w", i, err)
		}
		for _, f := range c.Facts {
			if f.ID == "" || f.TenantID == "" || f.EntityID != "" {
				return nil, fmt.Errorf("sqlite: change outbox: change %d: facts need an id and a tenant and no entity", i)
			}
			if err := store.CheckJSON("data", f.Data); err != nil {
				return nil, fmt.Errorf("sqlite: change outbox: change %d: %w", i, err)
			}
		}
	}
	errs := make([]error, len(changes))
	wrote := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		for i, c := range changes {
			if _, err := tx.ExecContext(ctx, `SAVEPOINT outbox_change`); err != nil {
				return err
			}
			itemErr, err := applyChange(ctx, tx, c)
			if err != nil || itemErr != nil {
				if _, rbErr := tx.ExecContext(ctx, `ROLLBACK TO outbox_change`); rbErr != nil && err == nil {
					err = rbErr
				}
			}
			if _, relErr := tx.ExecContext(ctx, `RELEASE outbox_change`); relErr != nil && err == nil {
				err = relErr
			}
			if err != nil {
				return fmt.Errorf("change %d: %w", i, err)
			}
			errs[i] = itemErr
			if itemErr == nil && len(c.Facts) > 0 {
				wrote = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: change outbox: %w", err)
	}
	if wrote {
		s.facts.notify()
	}
	return errs, nil
}

// applyChange checks one change's preconditions and writes it. itemErr is
// the change's own failure; err fails the transaction.
func applyChange(ctx context.Context, tx *sql.Tx, c store.OutboxChange) (itemErr, err error) {
	var tenant, status string
	var token sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT tenant_id, claim_token, status FROM webhook_outbox WHERE delivery_id = ?`,
		c.Row.DeliveryID).Scan(&tenant, &token, &status)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && tenant != c.Row.TenantID) {
		return fmt.Errorf("delivery %s: %w", c.Row.DeliveryID, store.ErrNotFound), nil
	}
	if err != nil {
		return nil, err
	}
	if c.ClaimToken != "" && token.String != c.ClaimToken {
		return fmt.Errorf("delivery %s is not claimed by this token: %w", c.Row.DeliveryID, store.ErrVersionConflict), nil
	}
	if c.FromStatus != "" && status != c.FromStatus {
		return fmt.Errorf("delivery %s is %s, not %s: %w", c.Row.DeliveryID, status, c.FromStatus, store.ErrVersionConflict), nil
	}
	r := c.Row
	_, err = tx.ExecContext(ctx, `UPDATE webhook_outbox SET status = ?, attempt = ?, sig_timestamp = ?, next_attempt_at = ?,
	claimed_until = ?, claim_token = ?, attempt_started_at = ?, first_attempt_at = ?, last_attempt_at = ?,
	last_status_code = ?, dead_letter = ?, dlq_message_id = ?, dead_at = ?, replays = ?, updated_at = ?
WHERE delivery_id = ?`, r.Status, r.Attempt, r.SigTimestamp, r.NextAttemptAt, r.ClaimedUntil, nullString(r.ClaimToken),
		r.AttemptStartedAt, r.FirstAttemptAt, r.LastAttemptAt, r.LastStatusCode, nullJSON(r.DeadLetter),
		nullString(r.DLQMessageID), r.DeadAt, r.Replays, r.UpdatedAt, r.DeliveryID)
	if err != nil {
		return nil, err
	}
	if len(c.Facts) > 0 {
		items := make([]store.Append, len(c.Facts))
		for i, f := range c.Facts {
			items[i] = store.Append{Fact: f}
		}
		results, _, err := appendInTx(ctx, tx, items)
		if err != nil {
			return nil, err
		}
		for _, r := range results {
			if r.Err != nil {
				return r.Err, nil
			}
		}
	}
	if p := c.Pause; p != nil {
		_, err = tx.ExecContext(ctx, `INSERT INTO webhook_paused (tenant_id, config_id, delivery_id, reason, paused_at)
VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, config_id) DO NOTHING`,
			p.TenantID, p.ConfigID, nullString(p.DeliveryID), p.Reason, p.PausedAt)
		if err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// GetOutbox returns one row of the tenant.
func (s *Store) GetOutbox(ctx context.Context, tenantID, deliveryID string) (*store.OutboxRow, error) {
	r, err := scanOutbox(s.r.QueryRowContext(ctx, `SELECT `+outboxColumns+` FROM webhook_outbox WHERE delivery_id = ? AND tenant_id = ?`,
		deliveryID, tenantID))
	if err != nil {
		return nil, fmt.Errorf("sqlite: get outbox %s: %w", deliveryID, interpretError(err))
	}
	return r, nil
}

// listOutboxQuery lists one tenant's deliveries in delivery id order
// through webhook_outbox_tenant.
const listOutboxQuery = `SELECT ` + outboxColumns + ` FROM webhook_outbox
WHERE tenant_id = ?1 AND (?2 = '' OR status = ?2) AND (?3 = '' OR config_id = ?3) AND delivery_id > ?4
  AND (?6 = 0 OR created_at >= ?6) AND (?7 = 0 OR created_at < ?7)
ORDER BY delivery_id LIMIT ?5`

// ListOutbox returns the tenant's rows matching f by delivery id.
func (s *Store) ListOutbox(ctx context.Context, f store.OutboxFilter) ([]store.OutboxRow, error) {
	rows, err := s.r.QueryContext(ctx, listOutboxQuery, f.TenantID, f.Status, f.ConfigID, f.AfterID, sqlLimit(f.Limit), f.CreatedFrom, f.CreatedBefore)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list outbox: %w", err)
	}
	defer rows.Close()
	var out []store.OutboxRow
	for rows.Next() {
		r, err := scanOutbox(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list outbox: %w", err)
		}
		out = append(out, *r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list outbox: %w", err)
	}
	return out, nil
}

// CountOutbox counts pending and dead rows.
func (s *Store) CountOutbox(ctx context.Context) (store.OutboxDepths, error) {
	var d store.OutboxDepths
	err := s.r.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM webhook_outbox WHERE status = 'pending'),
	(SELECT count(*) FROM webhook_outbox WHERE status = 'dead')`).Scan(&d.Pending, &d.Dead)
	if err != nil {
		return d, fmt.Errorf("sqlite: count outbox: %w", err)
	}
	return d, nil
}

// GetWebhookPause returns the config's pause or ErrNotFound.
func (s *Store) GetWebhookPause(ctx context.Context, tenantID, configID string) (*store.WebhookPause, error) {
	p := store.WebhookPause{TenantID: tenantID, ConfigID: configID}
	var delivery sql.NullString
	err := s.r.QueryRowContext(ctx, `SELECT delivery_id, reason, paused_at FROM webhook_paused
WHERE tenant_id = ? AND config_id = ?`, tenantID, configID).Scan(&delivery, &p.Reason, &p.PausedAt)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get webhook pause %s: %w", configID, interpretError(err))
	}
	p.DeliveryID = delivery.String
	return &p, nil
}

// ResumeWebhookConfig removes the config's pause.
func (s *Store) ResumeWebhookConfig(ctx context.Context, tenantID, configID string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhook_paused WHERE tenant_id = ? AND config_id = ?`, tenantID, configID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, store.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: resume webhook config %s: %w", configID, err)
	}
	return nil
}

// PauseWebhookConfig inserts a pause; ErrAlreadyExists when one is in place.
func (s *Store) PauseWebhookConfig(ctx context.Context, p *store.WebhookPause) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO webhook_paused (tenant_id, config_id, delivery_id, reason, paused_at)
VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id, config_id) DO NOTHING`,
			p.TenantID, p.ConfigID, nullString(p.DeliveryID), p.Reason, p.PausedAt)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, store.ErrAlreadyExists)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: pause webhook config %s: %w", p.ConfigID, err)
	}
	return nil
}

// ListWebhookPauses returns the tenant's pauses by config id.
func (s *Store) ListWebhookPauses(ctx context.Context, tenantID string) ([]store.WebhookPause, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT config_id, delivery_id, reason, paused_at FROM webhook_paused
WHERE tenant_id = ? ORDER BY config_id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list webhook pauses: %w", err)
	}
	defer rows.Close()
	var out []store.WebhookPause
	for rows.Next() {
		p := store.WebhookPause{TenantID: tenantID}
		var delivery sql.NullString
		if err := rows.Scan(&p.ConfigID, &delivery, &p.Reason, &p.PausedAt); err != nil {
			return nil, fmt.Errorf("sqlite: list webhook pauses: %w", err)
		}
		p.DeliveryID = delivery.String
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list webhook pauses: %w", err)
	}
	return out, nil
}

// CreateWebhookSecret inserts an encrypted secret, recording its key as
// the database's when none is (see store.WebhookStore).
func (s *Store) CreateWebhookSecret(ctx context.Context, sec *store.WebhookSecret) error {
	if sec.TenantID == "" || sec.Ref == "" || len(sec.Ciphertext) == 0 {
		return errors.New("sqlite: create webhook secret: tenant, ref and ciphertext are required")
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_secret_key (only_row, key_id, recorded_at) VALUES (1, ?, ?)
ON CONFLICT (only_row) DO NOTHING`, sec.KeyID, sec.CreatedAt); err != nil {
			return err
		}
		var recorded string
		if err := tx.QueryRowContext(ctx, `SELECT key_id FROM webhook_secret_key`).Scan(&recorded); err != nil {
			return err
		}
		if recorded != sec.KeyID {
			return fmt.Errorf("key %s, the database's is %s: %w", sec.KeyID, recorded, store.ErrSecretKeyMismatch)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO webhook_secrets (tenant_id, ref, ciphertext, key_id, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?)`, sec.TenantID, sec.Ref, sec.Ciphertext, sec.KeyID, sec.CreatedAt, nullInt(sec.ExpiresAt))
		return interpretError(err)
	})
	if err != nil {
		return fmt.Errorf("sqlite: create webhook secret %s: %w", sec.Ref, err)
	}
	return nil
}

// WebhookSecretKeyID returns the recorded secret key id, "" when none.
func (s *Store) WebhookSecretKeyID(ctx context.Context) (string, error) {
	var id string
	err := s.r.QueryRowContext(ctx, `SELECT key_id FROM webhook_secret_key`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("sqlite: webhook secret key: %w", err)
	}
	return id, nil
}

// GetWebhookSecret returns the secret or ErrNotFound.
func (s *Store) GetWebhookSecret(ctx context.Context, tenantID, ref string) (*store.WebhookSecret, error) {
	sec := store.WebhookSecret{TenantID: tenantID, Ref: ref}
	var exp sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT ciphertext, key_id, created_at, expires_at FROM webhook_secrets
WHERE tenant_id = ? AND ref = ?`, tenantID, ref).Scan(&sec.Ciphertext, &sec.KeyID, &sec.CreatedAt, &exp)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get webhook secret %s: %w", ref, interpretError(err))
	}
	sec.ExpiresAt = intPtr(exp)
	return &sec, nil
}

// ExpireWebhookSecret sets the expiry, keeping an earlier one.
func (s *Store) ExpireWebhookSecret(ctx context.Context, tenantID, ref string, at int64) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhook_secrets SET expires_at = MIN(COALESCE(expires_at, ?3), ?3)
WHERE tenant_id = ?1 AND ref = ?2`, tenantID, ref, at)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, store.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: expire webhook secret %s: %w", ref, err)
	}
	return nil
}
