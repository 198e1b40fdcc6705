package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/factline/factline/internal/host/store"
)

// outboxColumns is the column list of webhook_outbox in the order
// scanOutbox reads and outboxArrays writes.
const outboxColumns = `delivery_id, tenant_id, triggered_fact_id, config_id, config_version, COALESCE(campaign_id, ''),
endpoint, status, attempt, max_attempts, timeout_seconds, sig_timestamp, payload, message, next_attempt_at,
claimed_until, COALESCE(claim_token, ''), attempt_started_at, first_attempt_at, last_attempt_at, last_status_code,
dead_letter, COALESCE(dlq_message_id, ''), dead_at, replays, created_at, updated_at`

// outboxColumnsOf is outboxColumns qualified by a table alias.
func outboxColumnsOf(alias string) string {
	return alias + `.delivery_id, ` + alias + `.tenant_id, ` + alias + `.triggered_fact_id, ` + alias + `.config_id, ` +
		alias + `.config_version, COALESCE(` + alias + `.campaign_id, ''), ` + alias + `.endpoint, ` + alias + `.status, ` +
		alias + `.attempt, ` + alias + `.max_attempts, ` + alias + `.timeout_seconds, ` + alias + `.sig_timestamp, ` +
		alias + `.payload, ` + alias + `.message, ` + alias + `.next_attempt_at, ` + alias + `.claimed_until, COALESCE(` +
		alias + `.claim_token, ''), ` + alias + `.attempt_started_at, ` + alias + `.first_attempt_at, ` + alias +
		`.last_attempt_at, ` + alias + `.last_status_code, ` + alias + `.dead_letter, COALESCE(` + alias +
		`.dlq_message_id, ''), ` + alias + `.dead_at, ` + alias + `.replays, ` + alias + `.created_at, ` + alias + `.updated_at`
}

func scanOutbox(row pgx.Row, extra ...any) (*store.OutboxRow, error) {
	var (
		r                store.OutboxRow
		payload          string
		message, dead    []byte
		attempt, maxAtt  int32
		timeout, lastSts int32
		replays          int32
	)
	dest := append(extra, &r.DeliveryID, &r.TenantID, &r.TriggeredFactID, &r.ConfigID, &r.ConfigVersion, &r.CampaignID,
		&r.Endpoint, &r.Status, &attempt, &maxAtt, &timeout, &r.SigTimestamp, &payload, &message, &r.NextAttemptAt,
		&r.ClaimedUntil, &r.ClaimToken, &r.AttemptStartedAt, &r.FirstAttemptAt, &r.LastAttemptAt, &lastSts,
		&dead, &r.DLQMessageID, &r.DeadAt, &replays, &r.CreatedAt, &r.UpdatedAt)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	r.Attempt, r.MaxAttempts, r.TimeoutSeconds, r.LastStatusCode, r.Replays = int(attempt), int(maxAtt), int(timeout), int(lastSts), int(replays)
	r.Payload = []byte(payload)
	r.Message = jsonOrNil(message)
	r.DeadLetter = jsonOrNil(dead)
	return &r, nil
}

// outboxArrays holds outbox rows column by column for INSERT/UPDATE ...
// unnest.
type outboxArrays struct {
	ids, tenants, facts, configs, campaigns, endpoints, statuses  []string
	payloads, messages, tokens, deads, dlqIDs                     []string
	versions, sigs, next, claimed, started, first, last, deadAt   []int64
	created, updated, attempts, maxAtts, timeouts, codes, replays []int64
}

func (a *outboxArrays) add(r *store.OutboxRow) {
	a.ids = append(a.ids, r.DeliveryID)
	a.tenants = append(a.tenants, r.TenantID)
	a.facts = append(a.facts, r.TriggeredFactID)
	a.configs = append(a.configs, r.ConfigID)
	a.versions = append(a.versions, r.ConfigVersion)
	a.campaigns = append(a.campaigns, r.CampaignID)
	a.endpoints = append(a.endpoints, r.Endpoint)
	a.statuses = append(a.statuses, r.Status)
	a.attempts = append(a.attempts, int64(r.Attempt))
	a.maxAtts = append(a.maxAtts, int64(r.MaxAttempts))
	a.timeouts = append(a.timeouts, int64(r.TimeoutSeconds))
	a.sigs = append(a.sigs, r.SigTimestamp)
	a.payloads = append(a.payloads, string(r.Payload))
	a.messages = append(a.messages, objectOrEmpty(r.Message))
	a.next = append(a.next, r.NextAttemptAt)
	a.claimed = append(a.claimed, r.ClaimedUntil)
	a.tokens = append(a.tokens, r.ClaimToken)
	a.started = append(a.started, r.AttemptStartedAt)
	a.first = append(a.first, r.FirstAttemptAt)
	a.last = append(a.last, r.LastAttemptAt)
	a.codes = append(a.codes, int64(r.LastStatusCode))
	a.deads = append(a.deads, string(r.DeadLetter))
	a.dlqIDs = append(a.dlqIDs, r.DLQMessageID)
	a.deadAt = append(a.deadAt, r.DeadAt)
	a.replays = append(a.replays, int64(r.Replays))
	a.created = append(a.created, r.CreatedAt)
	a.updated = append(a.updated, r.UpdatedAt)
}

// args returns the arrays in the order of the u(...) column list of
// insertOutbox.
func (a *outboxArrays) args() []any {
	return []any{a.ids, a.tenants, a.facts, a.configs, a.versions, a.campaigns, a.endpoints, a.statuses, a.attempts,
		a.maxAtts, a.timeouts, a.sigs, a.payloads, a.messages, a.next, a.claimed, a.tokens, a.started, a.first, a.last,
		a.codes, a.deads, a.dlqIDs, a.deadAt, a.replays, a.created, a.updated}
}

const outboxUnnest = `unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::text[],
	$9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[], $14::text[], $15::bigint[], $16::bigint[],
	$17::text[], $18::bigint[], $19::bigint[], $20::bigint[], $21::bigint[], $22::text[], $23::text[], $24::bigint[],
	$25::bigint[], $26::bigint[], $27::bigint[])
	AS u(delivery_id, tenant_id, triggered_fact_id, config_id, config_version, campaign_id, endpoint, status, attempt,
	max_attempts, timeout_seconds, sig_timestamp, payload, message, next_attempt_at, claimed_until, claim_token,
	attempt_started_at, first_attempt_at, last_attempt_at, last_status_code, dead_letter, dlq_message_id, dead_at,
	replays, created_at, updated_at)`

const insertOutbox = `INSERT INTO webhook_outbox (delivery_id, tenant_id, triggered_fact_id, config_id, config_version,
	campaign_id, endpoint, status, attempt, max_attempts, timeout_seconds, sig_timestamp, payload, message,
	next_attempt_at, claimed_until, claim_token, attempt_started_at, first_attempt_at, last_attempt_at,
	last_status_code, dead_letter, dlq_message_id, dead_at, replays, created_at, updated_at)
SELECT delivery_id, tenant_id, triggered_fact_id, config_id, config_version, NULLIF(campaign_id, ''), endpoint, status,
	attempt, max_attempts, timeout_seconds, sig_timestamp, payload, message::jsonb, next_attempt_at, claimed_until,
	NULLIF(claim_token, ''), attempt_started_at, first_attempt_at, last_attempt_at, last_status_code,
	NULLIF(dead_letter, '')::jsonb, NULLIF(dlq_message_id, ''), dead_at, replays, created_at, updated_at
FROM ` + outboxUnnest

// updateOutbox writes the mutable columns of rows already decided in Go
// (only those travel: the payload and settings never change).
const updateOutbox = `UPDATE webhook_outbox o SET status = u.status, attempt = u.attempt, sig_timestamp = u.sig_timestamp,
	next_attempt_at = u.next_attempt_at, claimed_until = u.claimed_until, claim_token = NULLIF(u.claim_token, ''),
	attempt_started_at = u.attempt_started_at, first_attempt_at = u.first_attempt_at,
	last_attempt_at = u.last_attempt_at, last_status_code = u.last_status_code,
	dead_letter = NULLIF(u.dead_letter, '')::jsonb, dlq_message_id = NULLIF(u.dlq_message_id, ''),
	dead_at = u.dead_at, replays = u.replays, updated_at = u.updated_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::text[],
	$9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[], $14::text[], $15::bigint[], $16::bigint[],
	$17::bigint[])
	AS u(delivery_id, tenant_id, status, attempt, sig_timestamp, next_attempt_at, claimed_until, claim_token,
	attempt_started_at, first_attempt_at, last_attempt_at, last_status_code, dead_letter, dlq_message_id, dead_at,
	replays, updated_at)
WHERE o.delivery_id = u.delivery_id AND o.tenant_id = u.tenant_id`

// updateArgs returns the arrays of updateOutbox's parameters.
func (a *outboxArrays) updateArgs() []any {
	return []any{a.ids, a.tenants, a.statuses, a.attempts, a.sigs, a.next, a.claimed, a.tokens, a.started, a.first, a.last,
		a.codes, a.deads, a.dlqIDs, a.deadAt, a.replays, a.updated}
}

// queueOutboxInsert adds the insert of rows to b (nothing when empty).
func queueOutboxInsert(b *pgx.Batch, rows []*store.OutboxRow) {
	if len(rows) == 0 {
		return
	}
	var a outboxArrays
	for _, r := range rows {
		a.add(r)
	}
	n := len(rows)
	b.Queue(insertOutbox, a.args()...).Exec(func(tag pgconn.CommandTag) error {
		if got := tag.RowsAffected(); got != int64(n) {
			return fmt.Errorf("inserted %d outbox rows, want %d", got, n)
		}
		return nil
	})
}

// planForQueue makes the queue statements of the transaction it runs in
// use index scans. The outbox churns fast: a backlog can grow far beyond
// what the statistics saw, and a bitmap scan (which the planner then
// picks) reads every due row and every dead index entry left by finished
// deliveries, where an ordered index scan stops at the claim's limit and
// learns to skip dead entries.
const planForQueue = `SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`

// claimOutbox leases due rows. The candidates are read without locks,
// ranked to keep at most $4 per endpoint, and only the rows picked are
// locked, with SKIP LOCKED: a row another claim or change holds is passed
// over, never waited for. A row claimed by a transaction that committed
// meanwhile is re-checked by FOR UPDATE against its new version (READ
// COMMITTED re-evaluates the WHERE clause), which its lease then fails.
// The RETURNING list starts with the attempt_started_at each row had.
const claimOutbox = `WITH due AS (
	SELECT o.delivery_id, o.endpoint, o.next_attempt_at
	FROM webhook_outbox o
	WHERE o.status = 'pending' AND o.next_attempt_at <= $1 AND o.next_attempt_at >= $9 AND o.claimed_until <= $1
		AND NOT (o.endpoint = ANY($2::text[]))
		AND NOT EXISTS (SELECT 1 FROM webhook_paused p WHERE p.tenant_id = o.tenant_id AND p.config_id = o.config_id)
	ORDER BY o.next_attempt_at, o.delivery_id
	LIMIT $3
), ranked AS (
	SELECT delivery_id, next_attempt_at,
		row_number() OVER (PARTITION BY endpoint ORDER BY next_attempt_at, delivery_id) AS rn
	FROM due
), picked AS (
	SELECT o.delivery_id, o.attempt_started_at
	FROM webhook_outbox o JOIN ranked r ON r.delivery_id = o.delivery_id
	WHERE r.rn <= $4 AND o.status = 'pending' AND o.next_attempt_at <= $1 AND o.claimed_until <= $1
	ORDER BY r.next_attempt_at, r.delivery_id
	LIMIT $5
	FOR UPDATE OF o SKIP LOCKED
)
UPDATE webhook_outbox o
SET claimed_until = $1 + $6::bigint * o.timeout_seconds + $7::bigint, claim_token = $8, attempt_started_at = $1, updated_at = $1
FROM picked
WHERE o.delivery_id = picked.delivery_id
RETURNING picked.attempt_started_at, ` + "%s"

// anyDue tells whether any row may be claimable at $1: the claim's
// candidates less its narrower conditions. The dispatcher claims after
// every fact commit, mostly to find nothing; on an empty outbox a claim,
// nearly all of it planning, took 0.77 ms and this statement 0.19 ms
// (pgbench, the loaded 2-core machine).
const anyDue = `SELECT EXISTS (SELECT 1 FROM webhook_outbox
	WHERE status = 'pending' AND next_attempt_at <= $1 AND claimed_until <= $1)`

// ClaimOutbox leases due rows with FOR UPDATE SKIP LOCKED, so claims made
// concurrently by any number of processes never share a row. It claims
// only when anyDue finds a row.
func (s *Store) ClaimOutbox(ctx context.Context, req store.ClaimRequest) ([]store.OutboxClaim, error) {
	if req.Token == "" || req.Limit <= 0 {
		return nil, errors.New("postgres: claim outbox: a token and a positive limit are required")
	}
	perEndpoint, window := int64(req.PerEndpoint), int64(req.Limit)
	if perEndpoint <= 0 {
		perEndpoint = int64(req.Limit)
	} else {
		// Look further than Limit so that a busy endpoint's backlog does
		// not hide the rows of others.
		window = int64(req.Limit) * 4
	}
	skip := req.SkipEndpoints
	if skip == nil {
		skip = []string{}
	}
	var due bool
	if err := s.pool.QueryRow(ctx, anyDue, req.Now).Scan(&due); err != nil {
		return nil, fmt.Errorf("postgres: claim outbox: %w", err)
	}
	if !due {
		return nil, nil
	}
	q := fmt.Sprintf(claimOutbox, outboxColumnsOf("o"))
	var out []store.OutboxClaim
	b := &pgx.Batch{}
	b.Queue(planForQueue)
	b.Queue(q, req.Now, skip, window, perEndpoint, int64(req.Limit), req.LeaseFactorMS, req.LeaseMarginMS, req.Token, req.DueFrom).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var prev int64
			r, err := scanOutbox(rows, &prev)
			if err != nil {
				return err
			}
			out = append(out, store.OutboxClaim{OutboxRow: *r, Interrupted: prev})
		}
		return rows.Err()
	})
	// A batch runs as one implicit transaction, so the planner settings
	// apply to the claim alone.
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("postgres: claim outbox: %w", err)
	}
	sortClaims(out)
	return out, nil
}

func sortClaims(out []store.OutboxClaim) {
	slices.SortFunc(out, func(a, b store.OutboxClaim) int {
		if a.NextAttemptAt != b.NextAttemptAt {
			if a.NextAttemptAt < b.NextAttemptAt {
				return -1
			}
			return 1
		}
		switch {
		case a.DeliveryID < b.DeliveryID:
			return -1
		case a.DeliveryID > b.DeliveryID:
			return 1
		}
		return 0
	})
}

// outboxState is what ChangeOutbox's preconditions read of a locked row.
type outboxState struct {
	tenant, token, status string
}

// ChangeOutbox applies the changes in one transaction, in the pattern of
// AppendFacts: the first round trip locks the fact head (when there are
// facts), the outbox rows and looks up taken fact ids; the changes are
// decided in Go, in order, against that locked state; the second round
// trip writes the rows, the facts, the head, the pauses and a NOTIFY.
func (s *Store) ChangeOutbox(ctx context.Context, changes []store.OutboxChange) ([]error, error) {
	var factIDs, deliveryIDs []string
	for i, c := range changes {
		if c.Row.DeliveryID == "" || c.Row.TenantID == "" {
			return nil, fmt.Errorf("postgres: change outbox: change %d: delivery id and tenant are required", i)
		}
		if err := errors.Join(store.CheckJSON("dead letter", c.Row.DeadLetter)); err != nil {
			return nil, fmt.Errorf("postgres: change outbox: change %d: %w", i, err)
		}
		for _, f := range c.Facts {
			if f.ID == "" || f.TenantID == "" || f.EntityID != "" {
				return nil, fmt.Errorf("postgres: change outbox: change %d: facts need an id and a tenant and no entity", i)
			}
			if err := store.CheckJSON("data", f.Data); err != nil {
				return nil, fmt.Errorf("postgres: change outbox: change %d: %w", i, err)
			}
			factIDs = append(factIDs, f.ID)
		}
		deliveryIDs = append(deliveryIDs, c.Row.DeliveryID)
	}
	errs := make([]error, len(changes))
	if len(changes) == 0 {
		return errs, nil
	}
	wroteFacts := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var head int64
		rows := make(map[string]*outboxState, len(changes))
		taken := make(map[string]bool)
		b := &pgx.Batch{}
		if len(factIDs) > 0 {
			b.Queue(lockHead).QueryRow(func(row pgx.Row) error { return row.Scan(&head) })
			b.Queue(takenIDs, factIDs).Query(func(r pgx.Rows) error {
				for r.Next() {
					var id string
					if err := r.Scan(&id); err != nil {
						return err
					}
					taken[id] = true
				}
				return r.Err()
			})
		}
		b.Queue(`SELECT delivery_id, tenant_id, COALESCE(claim_token, ''), status FROM webhook_outbox
WHERE delivery_id = ANY($1::text[]) ORDER BY delivery_id FOR UPDATE`, deliveryIDs).Query(func(r pgx.Rows) error {
			for r.Next() {
				var (
					id string
					st outboxState
				)
				if err := r.Scan(&id, &st.tenant, &st.token, &st.status); err != nil {
					return err
				}
				rows[id] = &st
			}
			return r.Err()
		})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}

		final := map[string]*store.OutboxRow{}
		var order []string
		var items []store.Append
		var pauses []*store.WebhookPause
		for i, c := range changes {
			st := rows[c.Row.DeliveryID]
			if st == nil || st.tenant != c.Row.TenantID {
				errs[i] = fmt.Errorf("delivery %s: %w", c.Row.DeliveryID, store.ErrNotFound)
				continue
			}
			if c.ClaimToken != "" && st.token != c.ClaimToken {
				errs[i] = fmt.Errorf("delivery %s is not claimed by this token: %w", c.Row.DeliveryID, store.ErrVersionConflict)
				continue
			}
			if c.FromStatus != "" && st.status != c.FromStatus {
				errs[i] = fmt.Errorf("delivery %s is %s, not %s: %w", c.Row.DeliveryID, st.status, c.FromStatus, store.ErrVersionConflict)
				continue
			}
			if err := checkNewFactIDs(c.Facts, taken); err != nil {
				errs[i] = err
				continue
			}
			for _, f := range c.Facts {
				taken[f.ID] = true
				items = append(items, store.Append{Fact: f})
			}
			st.token, st.status = c.Row.ClaimToken, c.Row.Status
			row := c.Row
			if _, seen := final[row.DeliveryID]; !seen {
				order = append(order, row.DeliveryID)
			}
			final[row.DeliveryID] = &row
			if c.Pause != nil {
				pauses = append(pauses, c.Pause)
			}
		}
		if len(order) == 0 {
			return nil
		}
		b = &pgx.Batch{}
		var a outboxArrays
		for _, id := range order {
			a.add(final[id])
		}
		n := len(order)
		b.Queue(updateOutbox, a.updateArgs()...).Exec(func(tag pgconn.CommandTag) error {
			if got := tag.RowsAffected(); got != int64(n) {
				return fmt.Errorf("updated %d outbox rows, want %d", got, n)
			}
			return nil
		})
		for _, p := range pauses {
			b.Queue(`INSERT INTO webhook_paused (tenant_id, config_id, delivery_id, reason, paused_at)
VALUES ($1, $2, NULLIF($3, ''), $4, $5) ON CONFLICT (tenant_id, config_id) DO NOTHING`,
				p.TenantID, p.ConfigID, p.DeliveryID, p.Reason, p.PausedAt)
		}
		if len(items) > 0 {
			results, written := store.DecideAppends(items, head, map[store.EntityKey]*store.AppendEntity{}, map[string]bool{})
			cols := newFactColumns(written)
			for _, r := range results {
				if r.Err != nil {
					return fmt.Errorf("audit fact %s: %w", r.Fact.ID, r.Err)
				}
				cols.add(r.Fact)
			}
			b.Queue(insertFacts, cols.args()...)
			want := head + int64(written)
			b.Queue(advanceHead, int64(written)).QueryRow(func(row pgx.Row) error {
				var got int64
				if err := row.Scan(&got); err != nil {
					return err
				}
				if got != want {
					return fmt.Errorf("fact head moved to %d, want %d", got, want)
				}
				return nil
			})
			b.Queue(notifyFacts, fmt.Sprint(want))
			wroteFacts = true
		}
		return interpretError(tx.SendBatch(ctx, b).Close())
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: change outbox: %w", err)
	}
	if wroteFacts {
		s.facts.notify()
	}
	return errs, nil
}

// checkNewFactIDs fails when a fact id is taken or repeated.
func checkNewFactIDs(facts []store.Fact, taken map[string]bool) error {
	seen := make(map[string]bool, len(facts))
	for _, f := range facts {
		if taken[f.ID] || seen[f.ID] {
			return fmt.Errorf("fact %s: %w", f.ID, store.ErrAlreadyExists)
		}
		seen[f.ID] = true
	}
	return nil
}

// GetOutbox returns one row of the tenant.
func (s *Store) GetOutbox(ctx context.Context, tenantID, deliveryID string) (*store.OutboxRow, error) {
	r, err := scanOutbox(s.pool.QueryRow(ctx, `SELECT `+outboxColumns+` FROM webhook_outbox WHERE delivery_id = $1 AND tenant_id = $2`,
		deliveryID, tenantID))
	if err != nil {
		return nil, fmt.Errorf("postgres: get outbox %s: %w", deliveryID, interpretError(err))
	}
	return r, nil
}

// listOutboxQuery lists one tenant's deliveries in delivery id order
// through webhook_outbox_tenant.
const listOutboxQuery = `SELECT ` + outboxColumns + ` FROM webhook_outbox
WHERE tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR config_id = $3) AND delivery_id > $4
  AND ($6::bigint = 0 OR created_at >= $6) AND ($7::bigint = 0 OR created_at < $7)
ORDER BY delivery_id LIMIT $5`

// ListOutbox returns the tenant's rows matching f by delivery id.
func (s *Store) ListOutbox(ctx context.Context, f store.OutboxFilter) ([]store.OutboxRow, error) {
	rows, err := s.pool.Query(ctx, listOutboxQuery, f.TenantID, f.Status, f.ConfigID, f.AfterID, limitArg(f.Limit), f.CreatedFrom, f.CreatedBefore)
	if err != nil {
		return nil, fmt.Errorf("postgres: list outbox: %w", err)
	}
	defer rows.Close()
	var out []store.OutboxRow
	for rows.Next() {
		r, err := scanOutbox(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list outbox: %w", err)
		}
		out = append(out, *r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list outbox: %w", err)
	}
	return out, nil
}

// CountOutbox counts pending and dead rows; both counts use partial
// indexes.
func (s *Store) CountOutbox(ctx context.Context) (store.OutboxDepths, error) {
	var d store.OutboxDepths
	err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_outbox WHERE status = 'pending'),
	(SELECT count(*) FROM webhook_outbox WHERE status = 'dead')`).Scan(&d.Pending, &d.Dead)
	if err != nil {
		return d, fmt.Errorf("postgres: count outbox: %w", err)
	}
	return d, nil
}

// GetWebhookPause returns the config's pause or ErrNotFound.
func (s *Store) GetWebhookPause(ctx context.Context, tenantID, configID string) (*store.WebhookPause, error) {
	p := store.WebhookPause{TenantID: tenantID, ConfigID: configID}
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(delivery_id, ''), reason, paused_at FROM webhook_paused
WHERE tenant_id = $1 AND config_id = $2`, tenantID, configID).Scan(&p.DeliveryID, &p.Reason, &p.PausedAt)
	if err != nil {
		return nil, fmt.Errorf("postgres: get webhook pause %s: %w", configID, interpretError(err))
	}
	return &p, nil
}

// ResumeWebhookConfig removes the config's pause.
func (s *Store) ResumeWebhookConfig(ctx context.Context, tenantID, configID string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_paused WHERE tenant_id = $1 AND config_id = $2`, tenantID, configID)
	if err != nil {
		return fmt.Errorf("postgres: resume webhook config %s: %w", configID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: resume webhook config %s: %w", configID, store.ErrNotFound)
	}
	return nil
}

// PauseWebhookConfig inserts a pause; ErrAlreadyExists when one is in place.
func (s *Store) PauseWebhookConfig(ctx context.Context, p *store.WebhookPause) error {
	tag, err := s.pool.Exec(ctx, `INSERT INTO webhook_paused (tenant_id, config_id, delivery_id, reason, paused_at)
VALUES ($1, $2, NULLIF($3, ''), $4, $5) ON CONFLICT (tenant_id, config_id) DO NOTHING`,
		p.TenantID, p.ConfigID, p.DeliveryID, p.Reason, p.PausedAt)
	if err != nil {
		return fmt.Errorf("postgres: pause webhook config %s: %w", p.ConfigID, interpretError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: pause webhook config %s: %w", p.ConfigID, store.ErrAlreadyExists)
	}
	return nil
}

// ListWebhookPauses returns the tenant's pauses by config id.
func (s *Store) ListWebhookPauses(ctx context.Context, tenantID string) ([]store.WebhookPause, error) {
	rows, err := s.pool.Query(ctx, `SELECT config_id, COALESCE(delivery_id, ''), reason, paused_at FROM webhook_paused
WHERE tenant_id = $1 ORDER BY config_id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("postgres: list webhook pauses: %w", interpretError(err))
	}
	defer rows.Close()
	var out []store.WebhookPause
	for rows.Next() {
		p := store.WebhookPause{TenantID: tenantID}
		if err := rows.Scan(&p.ConfigID, &p.DeliveryID, &p.Reason, &p.PausedAt); err != nil {
			return nil, fmt.Errorf("postgres: list webhook pauses: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list webhook pauses: %w", interpretError(err))
	}
	return out, nil
}

// CreateWebhookSecret inserts an encrypted secret. The key record is
// written (when missing) and checked in the same statement as the insert,
// so two processes with different keys cannot both write a first secret.
func (s *Store) CreateWebhookSecret(ctx context.Context, sec *store.WebhookSecret) error {
	if sec.TenantID == "" || sec.Ref == "" || len(sec.Ciphertext) == 0 {
		return errors.New("postgres: create webhook secret: tenant, ref and ciphertext are required")
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Two statements: under READ COMMITTED the SELECT's snapshot then
		// sees a record a concurrent first secret committed while the
		// INSERT waited for it.
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_secret_key (key_id, recorded_at) VALUES ($1, $2)
ON CONFLICT (only_row) DO NOTHING`, sec.KeyID, sec.CreatedAt); err != nil {
			return err
		}
		var recorded string
		if err := tx.QueryRow(ctx, `SELECT key_id FROM webhook_secret_key`).Scan(&recorded); err != nil {
			return err
		}
		if recorded != sec.KeyID {
			return fmt.Errorf("key %s, the database's is %s: %w", sec.KeyID, recorded, store.ErrSecretKeyMismatch)
		}
		_, err := tx.Exec(ctx, `INSERT INTO webhook_secrets (tenant_id, ref, ciphertext, key_id, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6)`, sec.TenantID, sec.Ref, sec.Ciphertext, sec.KeyID, sec.CreatedAt, sec.ExpiresAt)
		return interpretError(err)
	})
	if err != nil {
		return fmt.Errorf("postgres: create webhook secret %s: %w", sec.Ref, err)
	}
	return nil
}

// WebhookSecretKeyID returns the recorded secret key id, "" when none.
func (s *Store) WebhookSecretKeyID(ctx context.Context) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT key_id FROM webhook_secret_key`).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("postgres: webhook secret key: %w", err)
	}
	return id, nil
}

// GetWebhookSecret returns the secret or ErrNotFound.
func (s *Store) GetWebhookSecret(ctx context.Context, tenantID, ref string) (*store.WebhookSecret, error) {
	sec := store.WebhookSecret{TenantID: tenantID, Ref: ref}
	err := s.pool.QueryRow(ctx, `SELECT ciphertext, key_id, created_at, expires_at FROM webhook_secrets
WHERE tenant_id = $1 AND ref = $2`, tenantID, ref).Scan(&sec.Ciphertext, &sec.KeyID, &sec.CreatedAt, &sec.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("postgres: get webhook secret %s: %w", ref, interpretError(err))
	}
	return &sec, nil
}

// ExpireWebhookSecret sets the expiry, keeping an earlier one.
func (s *Store) ExpireWebhookSecret(ctx context.Context, tenantID, ref string, at int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE webhook_secrets SET expires_at = LEAST(COALESCE(expires_at, $3), $3)
WHERE tenant_id = $1 AND ref = $2`, tenantID, ref, at)
	if err != nil {
		return fmt.Errorf("postgres: expire webhook secret %s: %w", ref, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: expire webhook secret %s: %w", ref, store.ErrNotFound)
	}
	return nil
}
