package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// Operator actions: secrets, replay, resume, listings. Each returns
// *problem.Error for what the caller got wrong, so the HTTP endpoints and
// the CLI report the same messages.

// SecretView is a newly created secret. Secret is shown only in this
// response.
type SecretView struct {
	SecretRef string `json:"secret_ref"`
	Secret    string `json:"secret"`
	CreatedAt int64  `json:"created_at"`
}

// CreateSecret stores a new signing secret for the tenant.
func (s *Service) CreateSecret(ctx context.Context, tenant string) (*SecretView, error) {
	ref, value, at, err := s.secrets.create(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("webhook: create secret: %w", err)
	}
	return &SecretView{SecretRef: ref, Secret: value, CreatedAt: at}, nil
}

// RotationView is the outcome of a secret rotation.
type RotationView struct {
	SecretRef string `json:"secret_ref"`
	// Secret is shown only in this response.
	Secret            string `json:"secret"`
	PreviousSecretRef string `json:"previous_secret_ref"`
	// PreviousSecretExpiresAt is null when other configs still use the
	// previous secret (PreviousSecretUsedBy): it does not expire then.
	PreviousSecretExpiresAt *int64              `json:"previous_secret_expires_at"`
	PreviousSecretUsedBy    []string            `json:"previous_secret_used_by,omitempty"`
	Config                  platform.ConfigView `json:"config"`
}

// RotateSecret generates a new secret under a new reference, writes a new
// version of the config that references it, and lets the old secret
// expire in 7 days. Deliveries pinned to older versions keep signing with
// the old secret until then. An old secret other active configs of the
// tenant still reference does not expire: rotating one config must not
// break the others.
func (s *Service) RotateSecret(ctx context.Context, tenant, configID string) (*RotationView, error) {
	if s.platform == nil {
		return nil, errors.New("webhook: rotate secret: no platform service (call RegisterConfigType)")
	}
	cur, err := s.webhookConfig(ctx, tenant, configID)
	if err != nil {
		return nil, err
	}
	if cur.Status != store.ConfigActive {
		return nil, problem.Newf(problem.Conflict, "Config %s is archived", configID)
	}
	dec := json.NewDecoder(bytes.NewReader(cur.Settings))
	dec.UseNumber()
	var settings map[string]any
	if err := dec.Decode(&settings); err != nil {
		return nil, fmt.Errorf("webhook: rotate secret: stored settings: %w", err)
	}
	oldRef, _ := settings["secret_ref"].(string)
	ref, value, _, err := s.secrets.create(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("webhook: rotate secret: %w", err)
	}
	settings["secret_ref"] = ref
	next, err := s.platform.UpdateConfig(ctx, tenant, configID, platform.ConfigInput{Settings: settings, ExpectedVersion: cur.Version})
	if err != nil {
		return nil, err
	}
	view := &RotationView{SecretRef: ref, Secret: value, PreviousSecretRef: oldRef, Config: platform.NewConfigView(next)}
	if oldRef == "" || oldRef == ref {
		return view, nil
	}
	if view.PreviousSecretUsedBy, err = s.configsUsingSecret(ctx, tenant, oldRef, configID); err != nil {
		return nil, fmt.Errorf("webhook: rotate secret: %w", err)
	}
	if len(view.PreviousSecretUsedBy) > 0 {
		return view, nil
	}
	expires := s.clock.Now().Add(SecretLifetimeAfterRotation).UnixMilli()
	if err := s.secrets.expire(ctx, tenant, oldRef, expires); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("webhook: rotate secret: expire the old secret: %w", err)
	}
	view.PreviousSecretExpiresAt = &expires
	return view, nil
}

// configsUsingSecret lists the tenant's active webhook configs other than
// except whose current version references the secret ref.
func (s *Service) configsUsingSecret(ctx context.Context, tenant, ref, except string) ([]string, error) {
	cfgs, err := s.st.ListActiveConfigsByType(ctx, ConfigType)
	if err != nil {
		return nil, fmt.Errorf("list webhook configs: %w", err)
	}
	var ids []string
	for _, c := range cfgs {
		if c.TenantID != tenant || c.ID == except {
			continue
		}
		var set struct {
			SecretRef string `json:"secret_ref"`
		}
		if json.Unmarshal(c.Settings, &set) == nil && set.SecretRef == ref {
			ids = append(ids, c.ID)
		}
	}
	return ids, nil
}

// webhookConfig returns the current version of a webhook config or a
// not-found problem.
func (s *Service) webhookConfig(ctx context.Context, tenant, configID string) (*store.Config, error) {
	c, err := s.st.GetConfig(ctx, tenant, configID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && c.Type != ConfigType) {
		return nil, problem.Newf(problem.NotFound, "Webhook config %s not found", configID)
	}
	if err != nil {
		return nil, fmt.Errorf("webhook: get config: %w", err)
	}
	return c, nil
}

// ReplayView is the outcome of a replay.
type ReplayView struct {
	DeliveryID   string `json:"delivery_id"`
	Status       string `json:"status"`
	Attempt      int    `json:"attempt"`
	Timestamp    int64  `json:"timestamp"` // the new signature timestamp (Unix seconds)
	DLQMessageID string `json:"dlq_message_id"`
	ReplayFactID string `json:"replay_fact_id"`
	// Paused is true when the config is paused: the delivery waits until
	// it is resumed.
	Paused bool `json:"paused"`
}

// replayData is the data of a lifecycle.webhook_replayed fact.
type replayData struct {
	DeliveryID   string `json:"delivery_id"`
	DLQMessageID string `json:"dlq_message_id"`
	Reason       string `json:"reason"`
}

// Replay puts a dead delivery back in the queue: attempt 1, a new
// signature timestamp, due now, and a lifecycle.webhook_replayed fact, in
// one transaction.
func (s *Service) Replay(ctx context.Context, tenant, deliveryID string) (*ReplayView, error) {
	v, err := ReplayStored(ctx, s.st, s.clock.Now(), tenant, deliveryID)
	if err == nil {
		notify(s.dl.kick)
	}
	return v, err
}

// ReplayStored is Replay on st at now, for a process that runs no Service
// (factline webhooks replay): a running Service's workers find the
// delivery due at their next poll.
func ReplayStored(ctx context.Context, st store.Store, now time.Time, tenant, deliveryID string) (*ReplayView, error) {
	row, err := st.GetOutbox(ctx, tenant, deliveryID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, problem.Newf(problem.NotFound, "Delivery %s not found", deliveryID)
	}
	if err != nil {
		return nil, fmt.Errorf("webhook: replay: %w", err)
	}
	if row.Status != store.OutboxDead {
		return nil, problem.Newf(problem.Conflict, "Delivery %s is %s; only dead deliveries can be replayed", deliveryID, row.Status)
	}
	ms := now.UnixMilli()
	dlqID := row.DLQMessageID
	data, _ := json.Marshal(replayData{DeliveryID: deliveryID, DLQMessageID: dlqID, Reason: "manual_replay"})
	fact := store.Fact{ID: newFactID(now), TenantID: tenant, Type: "lifecycle", Subtype: "webhook_replayed",
		SourceID: row.TriggeredFactID, Timestamp: ms, Data: data, CreatedAt: ms}
	next := *row
	next.Status, next.Attempt, next.SigTimestamp, next.NextAttemptAt = store.OutboxPending, 1, now.Unix(), ms
	next.ClaimedUntil, next.ClaimToken, next.AttemptStartedAt = 0, "", 0
	next.FirstAttemptAt, next.LastAttemptAt, next.LastStatusCode = 0, 0, 0
	next.DeadLetter, next.DLQMessageID, next.DeadAt = nil, "", 0
	next.Replays++
	next.UpdatedAt = ms
	errs, err := st.ChangeOutbox(ctx, []store.OutboxChange{{Row: next, FromStatus: store.OutboxDead, Facts: []store.Fact{fact}}})
	if err != nil {
		return nil, fmt.Errorf("webhook: replay: %w", err)
	}
	if errors.Is(errs[0], store.ErrVersionConflict) {
		return nil, problem.Newf(problem.Conflict, "Delivery %s was changed concurrently (replayed already?)", deliveryID)
	}
	if errs[0] != nil {
		return nil, fmt.Errorf("webhook: replay: %w", errs[0])
	}
	v := &ReplayView{DeliveryID: deliveryID, Status: next.Status, Attempt: 1, Timestamp: next.SigTimestamp,
		DLQMessageID: dlqID, ReplayFactID: fact.ID}
	if _, err := st.GetWebhookPause(ctx, tenant, row.ConfigID); err == nil {
		v.Paused = true
	}
	return v, nil
}

// Resume lifts the pause a 410 Gone or an admin put on a config; its pending
// deliveries go out again.
func (s *Service) Resume(ctx context.Context, tenant, configID string) error {
	if _, err := s.webhookConfig(ctx, tenant, configID); err != nil {
		return err
	}
	err := s.st.ResumeWebhookConfig(ctx, tenant, configID)
	if errors.Is(err, store.ErrNotFound) {
		return problem.Newf(problem.Conflict, "Webhook config %s is not paused", configID)
	}
	if err != nil {
		return fmt.Errorf("webhook: resume: %w", err)
	}
	notify(s.dl.kick)
	return nil
}

// PauseReasonManual is the reason recorded for an admin's pause.
const PauseReasonManual = "paused by an admin"

// Pause stops the deliveries of a config until it is resumed, as a 410
// Gone does: they stay pending and go out after Resume.
func (s *Service) Pause(ctx context.Context, tenant, configID string) error {
	c, err := s.webhookConfig(ctx, tenant, configID)
	if err != nil {
		return err
	}
	if c.Status == store.ConfigArchived {
		// It sends nothing: a pause would only be a row to forget.
		return problem.Newf(problem.Conflict, "Config %s is archived", configID)
	}
	err = s.st.PauseWebhookConfig(ctx, &store.WebhookPause{TenantID: tenant, ConfigID: configID,
		Reason: PauseReasonManual, PausedAt: s.clock.Now().UnixMilli()})
	if errors.Is(err, store.ErrAlreadyExists) {
		return problem.Newf(problem.Conflict, "Webhook config %s is paused already", configID)
	}
	if err != nil {
		return fmt.Errorf("webhook: pause: %w", err)
	}
	return nil
}

// PauseView is one paused config of the tenant.
type PauseView struct {
	ConfigID string `json:"config_id"`
	Paused   bool   `json:"paused"`
	PausedAt int64  `json:"paused_at"`
	Reason   string `json:"reason"`
	// DeliveryID is the delivery whose answer (a 410) paused the config;
	// empty for an admin's pause.
	DeliveryID string `json:"delivery_id,omitempty"`
}

// Pauses lists the tenant's paused configs by config id.
func (s *Service) Pauses(ctx context.Context, tenant string) ([]PauseView, error) {
	ps, err := s.st.ListWebhookPauses(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("webhook: list pauses: %w", err)
	}
	out := make([]PauseView, 0, len(ps))
	for _, p := range ps {
		out = append(out, PauseView{ConfigID: p.ConfigID, Paused: true, PausedAt: p.PausedAt, Reason: p.Reason, DeliveryID: p.DeliveryID})
	}
	return out, nil
}

// DeadLetterItem is one entry of the dead-letter listing: the contract's
// dead-letter message and its id.
type DeadLetterItem struct {
	DLQMessageID string `json:"dlq_message_id"`
	DeadLetter
}

// DeadLetterPage is one page of dead letters, in delivery id order.
type DeadLetterPage struct {
	Items   []DeadLetterItem `json:"items"`
	Cursor  string           `json:"cursor,omitempty"`
	HasMore bool             `json:"hasMore"`
}

// DeadLetters lists the tenant's dead deliveries, optionally of one config.
func (s *Service) DeadLetters(ctx context.Context, tenant, configID, cursor string, limit int) (*DeadLetterPage, error) {
	return DeadLettersStored(ctx, s.st, tenant, configID, cursor, limit)
}

// DeadLettersStored is DeadLetters on st, for a process that runs no
// Service (factline webhooks dead-letters).
func DeadLettersStored(ctx context.Context, st store.Store, tenant, configID, cursor string, limit int) (*DeadLetterPage, error) {
	limit, err := platform.PageLimit(limit)
	if err != nil {
		return nil, err
	}
	after, err := platform.DecodeCursor(platform.ListingDeadLetter, cursor)
	if err != nil {
		return nil, err
	}
	rows, err := st.ListOutbox(ctx, store.OutboxFilter{TenantID: tenant, Status: store.OutboxDead, ConfigID: configID, AfterID: after, Limit: limit + 1})
	if err != nil {
		return nil, fmt.Errorf("webhook: dead letters: %w", err)
	}
	page := &DeadLetterPage{Items: []DeadLetterItem{}}
	if len(rows) > limit {
		rows, page.HasMore = rows[:limit], true
		page.Cursor = platform.EncodeCursor(platform.ListingDeadLetter, rows[limit-1].DeliveryID)
	}
	for _, r := range rows {
		it := DeadLetterItem{DLQMessageID: r.DLQMessageID}
		if err := json.Unmarshal(r.DeadLetter, &it.DeadLetter); err != nil {
			return nil, fmt.Errorf("webhook: dead letter %s: %w", r.DeliveryID, err)
		}
		page.Items = append(page.Items, it)
	}
	return page, nil
}

// DeliveryFilter selects the deliveries of a list: Status (pending, sent
// or dead), ConfigID, and creation time From <= created_at < To (ms);
// zero values select all.
type DeliveryFilter struct {
	Status   string
	ConfigID string
	From, To int64
}

// DeliveryItem is one delivery of a list; GET .../deliveries/:id adds its
// attempts.
type DeliveryItem struct {
	DeliveryID     string `json:"delivery_id"`
	ConfigID       string `json:"webhook_config_id"`
	ConfigVersion  int64  `json:"webhook_config_version"`
	URL            string `json:"url"`
	Status         string `json:"status"`
	Attempt        int    `json:"attempt"`
	MaxAttempts    int    `json:"max_attempts"`
	NextRetryAt    *int64 `json:"next_retry_at,omitempty"`
	LastAttemptAt  int64  `json:"last_attempt_at,omitempty"`
	LastStatusCode int    `json:"last_status_code,omitempty"`
	Replays        int    `json:"replays"`
	CreatedAt      int64  `json:"created_at"`
}

// DeliveryPage is one page of deliveries, by delivery id.
type DeliveryPage struct {
	Items   []DeliveryItem `json:"items"`
	Cursor  string         `json:"cursor,omitempty"`
	HasMore bool           `json:"hasMore"`
}

// Deliveries lists the tenant's deliveries matching f, one page at a time.
func (s *Service) Deliveries(ctx context.Context, tenant string, f DeliveryFilter, cursor string, limit int) (*DeliveryPage, error) {
	limit, err := platform.PageLimit(limit)
	if err != nil {
		return nil, err
	}
	after, err := platform.DecodeCursor(platform.ListingDeliveries, cursor)
	if err != nil {
		return nil, err
	}
	rows, err := s.st.ListOutbox(ctx, store.OutboxFilter{TenantID: tenant, Status: f.Status, ConfigID: f.ConfigID,
		CreatedFrom: f.From, CreatedBefore: f.To, AfterID: after, Limit: limit + 1})
	if err != nil {
		return nil, fmt.Errorf("webhook: deliveries: %w", err)
	}
	page := &DeliveryPage{Items: make([]DeliveryItem, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows, page.HasMore = rows[:limit], true
		page.Cursor = platform.EncodeCursor(platform.ListingDeliveries, rows[limit-1].DeliveryID)
	}
	for _, r := range rows {
		var msg deliveryMessage
		_ = json.Unmarshal(r.Message, &msg)
		it := DeliveryItem{DeliveryID: r.DeliveryID, ConfigID: r.ConfigID, ConfigVersion: r.ConfigVersion, URL: msg.URL,
			Status: r.Status, Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, LastAttemptAt: r.LastAttemptAt,
			LastStatusCode: r.LastStatusCode, Replays: r.Replays, CreatedAt: r.CreatedAt}
		if r.Status == store.OutboxPending {
			it.NextRetryAt = &r.NextAttemptAt
		}
		page.Items = append(page.Items, it)
	}
	return page, nil
}

// DeliveryView shows one delivery's state.
type DeliveryView struct {
	DeliveryID      string          `json:"delivery_id"`
	TenantID        string          `json:"tenant_id"`
	TriggeredFactID string          `json:"triggered_fact_id"`
	ConfigID        string          `json:"webhook_config_id"`
	ConfigVersion   int64           `json:"webhook_config_version"`
	CampaignID      string          `json:"campaign_id,omitempty"`
	URL             string          `json:"url"`
	Status          string          `json:"status"`
	Attempt         int             `json:"attempt"`
	MaxAttempts     int             `json:"max_attempts"`
	Timestamp       int64           `json:"timestamp"`
	NextRetryAt     *int64          `json:"next_retry_at,omitempty"`
	FirstAttemptAt  int64           `json:"first_attempt_at,omitempty"`
	LastAttemptAt   int64           `json:"last_attempt_at,omitempty"`
	LastStatusCode  int             `json:"last_status_code,omitempty"`
	DLQMessageID    string          `json:"dlq_message_id,omitempty"`
	DeadLetter      json.RawMessage `json:"dead_letter,omitempty"`
	Replays         int             `json:"replays"`
	Paused          bool            `json:"paused"`
	CreatedAt       int64           `json:"created_at"`
	UpdatedAt       int64           `json:"updated_at"`
	// Attempts names the webhook.sent fact of every recorded attempt,
	// oldest first (a replay starts again at attempt 1); GET /v1/facts/:id
	// reads one whole.
	Attempts []AttemptView `json:"attempts"`
}

// AttemptView summarises one attempt's webhook.sent fact.
type AttemptView struct {
	FactID     string `json:"fact_id"`
	Attempt    int    `json:"attempt"`
	Success    bool   `json:"success"`
	StatusCode int    `json:"status_code"`
	ErrorType  string `json:"error_type,omitempty"`
	ErrorCode  string `json:"error_code,omitempty"`
	WillRetry  *bool  `json:"will_retry,omitempty"`
	SentToDLQ  *bool  `json:"sent_to_dlq,omitempty"`
	// ResponseTimeMS is the receiver's answer time; NextRetryAt (ms) when
	// the attempt was retried.
	ResponseTimeMS *float64 `json:"response_time_ms,omitempty"`
	NextRetryAt    *int64   `json:"next_retry_at,omitempty"`
	Timestamp      int64    `json:"timestamp"`
}

// maxAttemptFacts bounds the webhook.sent facts read for one delivery:
// 20 attempts a round, and a few hundred replays are far beyond use.
const maxAttemptFacts = 10_000

// attempts reads the webhook.sent facts of a delivery: those whose
// source_id is its webhook.triggered fact (an index serves the filter).
func (s *Service) attempts(ctx context.Context, r *store.OutboxRow) ([]AttemptView, error) {
	out := []AttemptView{}
	var after int64
	for len(out) < maxAttemptFacts {
		facts, err := s.st.ListFacts(ctx, store.FactFilter{TenantID: r.TenantID, Type: ConfigType, Subtype: "sent",
			SourceID: r.TriggeredFactID, AfterPosition: after, Limit: 200})
		if err != nil {
			return nil, err
		}
		for _, f := range facts {
			var d sentData
			if err := json.Unmarshal(f.Data, &d); err != nil || d.DeliveryID != r.DeliveryID {
				continue
			}
			out = append(out, AttemptView{FactID: f.ID, Attempt: d.Attempt, Success: d.Success, StatusCode: d.StatusCode,
				ErrorType: d.ErrorType, ErrorCode: d.ErrorCode, WillRetry: d.WillRetry, SentToDLQ: d.SentToDLQ,
				ResponseTimeMS: d.ResponseTimeMS, NextRetryAt: d.NextRetryAt, Timestamp: f.Timestamp})
		}
		if len(facts) < 200 {
			break
		}
		after = facts[len(facts)-1].Position
	}
	return out, nil
}

// Delivery returns one delivery's state.
func (s *Service) Delivery(ctx context.Context, tenant, deliveryID string) (*DeliveryView, error) {
	r, err := s.st.GetOutbox(ctx, tenant, deliveryID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, problem.Newf(problem.NotFound, "Delivery %s not found", deliveryID)
	}
	if err != nil {
		return nil, fmt.Errorf("webhook: delivery: %w", err)
	}
	var msg deliveryMessage
	_ = json.Unmarshal(r.Message, &msg)
	v := &DeliveryView{DeliveryID: r.DeliveryID, TenantID: r.TenantID, TriggeredFactID: r.TriggeredFactID, ConfigID: r.ConfigID,
		ConfigVersion: r.ConfigVersion, CampaignID: r.CampaignID, URL: msg.URL, Status: r.Status, Attempt: r.Attempt,
		MaxAttempts: r.MaxAttempts, Timestamp: r.SigTimestamp, FirstAttemptAt: r.FirstAttemptAt, LastAttemptAt: r.LastAttemptAt,
		LastStatusCode: r.LastStatusCode, DLQMessageID: r.DLQMessageID, DeadLetter: r.DeadLetter, Replays: r.Replays,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.Status == store.OutboxPending {
		v.NextRetryAt = &r.NextAttemptAt
	}
	if _, err := s.st.GetWebhookPause(ctx, tenant, r.ConfigID); err == nil {
		v.Paused = true
	}
	if v.Attempts, err = s.attempts(ctx, r); err != nil {
		return nil, fmt.Errorf("webhook: delivery %s: attempts: %w", deliveryID, err)
	}
	return v, nil
}

// maxBulkReplay bounds the dead deliveries one bulk replay puts back, so
// one request stays short; hasMore says to call again.
const maxBulkReplay = 1000

// BulkReplayView answers a bulk replay: each delivery replayed, each one
// that could not be (for example replayed concurrently) with its reason.
type BulkReplayView struct {
	Replayed []ReplayView        `json:"replayed"`
	Failed   []BulkReplayFailure `json:"failed"`
	HasMore  bool                `json:"hasMore"`
}

// BulkReplayFailure is one delivery a bulk replay left dead.
type BulkReplayFailure struct {
	DeliveryID string `json:"delivery_id"`
	Detail     string `json:"detail"`
}

// ReplayAll replays the tenant's dead deliveries (of one config when
// configID is set), oldest first, each exactly as Replay does.
func (s *Service) ReplayAll(ctx context.Context, tenant, configID string) (*BulkReplayView, error) {
	rows, err := s.st.ListOutbox(ctx, store.OutboxFilter{TenantID: tenant, Status: store.OutboxDead, ConfigID: configID, Limit: maxBulkReplay + 1})
	if err != nil {
		return nil, fmt.Errorf("webhook: bulk replay: %w", err)
	}
	v := &BulkReplayView{Replayed: []ReplayView{}, Failed: []BulkReplayFailure{}}
	if len(rows) > maxBulkReplay {
		rows, v.HasMore = rows[:maxBulkReplay], true
	}
	for _, r := range rows {
		one, err := ReplayStored(ctx, s.st, s.clock.Now(), tenant, r.DeliveryID)
		var pe *problem.Error
		switch {
		case errors.As(err, &pe):
			v.Failed = append(v.Failed, BulkReplayFailure{DeliveryID: r.DeliveryID, Detail: pe.Detail})
		case err != nil:
			return nil, fmt.Errorf("webhook: bulk replay: %w", err)
		default:
			v.Replayed = append(v.Replayed, *one)
		}
	}
	if len(v.Replayed) > 0 {
		notify(s.dl.kick)
	}
	return v, nil
}
