package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/factline/factline/internal/host/store"
)

// Matching batches. Every fact enters the matcher's stream, the audit
// facts of deliveries too (two per delivery), so under fan-out most of a
// batch is skipped and each batch's checkpoint and each transaction's
// commit dominate: the matcher reads matchBatch facts at a time and
// records up to appendChunk matches per transaction (one fact matched by
// 200 configs is 200 matches). appendChunk is the delivery committer's
// commitBatch: both take the fact head lock in turn, and a larger turn
// for matching would record new deliveries at the expense of recording
// the outcomes of those already made.
const (
	matchBatch  = 1024
	appendChunk = commitBatch
)

// Scope types of a webhook config (the contract's scope; stored as the
// config's scope_type, with applies_to as scope_id).
const (
	ScopeCampaign = "campaign"
	ScopeAccount  = "account"
	ScopeAsset    = "asset"
)

// deliveryMessage is the delivery's settings, pinned from its config
// version when the delivery is created and kept in the outbox row.
type deliveryMessage struct {
	URL              string            `json:"url"`
	SecretRef        string            `json:"secret_ref"`
	Trigger          string            `json:"trigger"`
	Retry            RetrySettings     `json:"retry"`
	Headers          map[string]string `json:"headers,omitempty"`
	StandardWebhooks bool              `json:"standard_webhooks,omitempty"`
	TraceID          string            `json:"trace_id,omitempty"`
	ContactID        string            `json:"contact_id,omitempty"`
	DealID           string            `json:"deal_id,omitempty"`
}

// compiledConfig is a config version ready for matching.
type compiledConfig struct {
	cfg      store.Config
	settings Settings
	endpoint string
	// shape identifies the payload settings: configs of equal shape
	// render a fact's object the same way.
	shape string
}

// matcher is the stream handler that turns matched facts into deliveries.
type matcher struct {
	s *Service

	mu       sync.Mutex
	compiled map[string]*compiledConfig // by tenant, id and version
	bad      map[string]bool            // versions that failed to parse (logged once)
}

func newMatcher(s *Service) *matcher {
	return &matcher{s: s, compiled: map[string]*compiledConfig{}, bad: map[string]bool{}}
}

// index maps tenant -> trigger -> configs.
type index map[string]map[string][]*compiledConfig

// load reads the active webhook configs (the current version of each) and
// compiles the ones not seen before. It runs for every batch, so a config
// created or changed applies to the facts recorded after it.
func (m *matcher) load(ctx context.Context) (index, error) {
	cfgs, err := m.s.st.ListActiveConfigsByType(ctx, ConfigType)
	if err != nil {
		return nil, fmt.Errorf("load webhook configs: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	idx := index{}
	live := make(map[string]bool, len(cfgs))
	for i := range cfgs {
		c := &cfgs[i]
		key := c.TenantID + "\x00" + c.ID + "\x00" + strconv.FormatInt(c.Version, 10)
		live[key] = true
		cc := m.compiled[key]
		if cc == nil {
			if m.bad[key] {
				continue
			}
			cc, err = compile(c)
			if err != nil {
				m.bad[key] = true
				m.s.log.Warn("webhook config is not valid; it does not fire", "tenant", c.TenantID, "config_id", c.ID,
					"version", c.Version, "err", err)
				continue
			}
			m.compiled[key] = cc
		}
		byTrigger := idx[c.TenantID]
		if byTrigger == nil {
			byTrigger = map[string][]*compiledConfig{}
			idx[c.TenantID] = byTrigger
		}
		for _, t := range cc.settings.Triggers {
			byTrigger[t] = append(byTrigger[t], cc)
		}
	}
	for k := range m.compiled {
		if !live[k] {
			delete(m.compiled, k)
		}
	}
	return idx, nil
}

// compile parses a stored config version's settings.
func compile(c *store.Config) (*compiledConfig, error) {
	dec := json.NewDecoder(bytes.NewReader(c.Settings))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	s, errs := ParseSettings(raw)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %s", errs[0].Field, errs[0].Message)
	}
	shape, err := json.Marshal(s.Payload)
	if err != nil {
		return nil, err
	}
	return &compiledConfig{cfg: *c, settings: s, endpoint: endpointOf(s.URL), shape: string(shape)}, nil
}

// subjects are the ids a fact is about, beyond its tenant.
type subjects struct {
	campaign, asset, contact, deal string
}

// subjectsOf reads a fact's campaign, asset, contact and deal ids: the
// string fields campaign_id, asset_id, contact_id and deal_id of its data,
// or its entity id when the entity is of that type.
func subjectsOf(f *store.Fact) subjects {
	var d struct {
		Campaign any `json:"campaign_id"`
		Asset    any `json:"asset_id"`
		Contact  any `json:"contact_id"`
		Deal     any `json:"deal_id"`
	}
	_ = json.Unmarshal(f.Data, &d)
	str := func(v any) string { s, _ := v.(string); return s }
	s := subjects{campaign: str(d.Campaign), asset: str(d.Asset), contact: str(d.Contact), deal: str(d.Deal)}
	switch f.EntityType {
	case "campaign":
		s.campaign = f.EntityID
	case "asset":
		s.asset = f.EntityID
	case "contact":
		s.contact = f.EntityID
	case "deal":
		s.deal = f.EntityID
	}
	return s
}

// applies reports whether a config's scope covers the fact: an account
// scope covers every fact of its tenant, a campaign or asset scope the
// facts about that campaign or asset.
func (c *compiledConfig) applies(f *store.Fact, sub subjects) bool {
	switch c.cfg.ScopeType {
	case ScopeAccount:
		return c.cfg.ScopeID == f.TenantID
	case ScopeCampaign:
		return sub.campaign != "" && c.cfg.ScopeID == sub.campaign
	case ScopeAsset:
		return sub.asset != "" && c.cfg.ScopeID == sub.asset
	}
	return false
}

// handle is the stream handler: for each fact and each active config whose
// trigger is the fact's <type>.<subtype> and whose scope covers it, one
// webhook.triggered fact and its pending outbox row, in one transaction.
// Facts of type webhook never trigger (their deliveries would trigger
// more). A config fires only for facts recorded at or after its
// effective_at.
func (m *matcher) handle(ctx context.Context, facts []store.Fact) error {
	candidates := false
	for i := range facts {
		if facts[i].Type != ConfigType && facts[i].Subtype != "" {
			candidates = true
			break
		}
	}
	if !candidates {
		return nil // audit facts and facts without a subtype never trigger
	}
	idx, err := m.load(ctx)
	if err != nil {
		return err
	}
	if len(idx) == 0 {
		return nil
	}
	now := m.s.clock.Now()
	var items []store.Append
	for i := range facts {
		f := &facts[i]
		if f.Type == ConfigType || f.Subtype == "" {
			continue
		}
		byTrigger := idx[f.TenantID]
		if byTrigger == nil {
			continue
		}
		trigger := f.Type + "." + f.Subtype
		cands := byTrigger[trigger]
		if len(cands) == 0 {
			continue
		}
		sub := subjectsOf(f)
		// The fact's object, rendered once per payload shape: one fact
		// matched by many configs of the same shape renders it once.
		objects := map[string]json.RawMessage{}
		for _, c := range cands {
			if c.cfg.EffectiveAt > f.CreatedAt || !c.applies(f, sub) {
				continue
			}
			obj, ok := objects[c.shape]
			if !ok {
				if obj, err = factObject(c.settings.Payload, f); err != nil {
					m.s.log.Error("webhook: cannot build delivery", "fact_id", f.ID, "config_id", c.cfg.ID, "err", err)
					continue
				}
				objects[c.shape] = obj
			}
			it, err := m.delivery(f, c, obj, trigger, sub, now)
			if err != nil {
				m.s.log.Error("webhook: cannot build delivery", "fact_id", f.ID, "config_id", c.cfg.ID, "err", err)
				continue
			}
			items = append(items, it)
		}
	}
	for len(items) > 0 {
		n := min(len(items), appendChunk)
		res, err := m.s.st.AppendFacts(ctx, items[:n])
		if err != nil {
			return fmt.Errorf("record webhook.triggered facts: %w", err)
		}
		for i, r := range res {
			switch {
			case r.Err == nil:
				m.s.metrics.triggered.Inc()
			case errors.Is(r.Err, store.ErrAlreadyExists):
				// Matched before (the stream replays after a crash, or
				// another process matched it first).
			default:
				return fmt.Errorf("record webhook.triggered %s: %w", items[i].Fact.ID, r.Err)
			}
		}
		items = items[n:]
	}
	return nil
}

// triggeredData is the data of a webhook.triggered fact: the contract's
// url, trigger, delivery_id and queued_at, and the fields the contract
// gives both audit facts that have no fact column.
type triggeredData struct {
	URL           string `json:"url"`
	Trigger       string `json:"trigger"`
	DeliveryID    string `json:"delivery_id"`
	QueuedAt      int64  `json:"queued_at"`
	ConfigID      string `json:"config_id"`
	ConfigVersion int64  `json:"config_version"`
	CampaignID    string `json:"campaign_id,omitempty"`
}

// delivery builds the triggered fact and its outbox row; obj is the
// fact's object for c's payload settings (nil: rendered here).
func (m *matcher) delivery(f *store.Fact, c *compiledConfig, obj json.RawMessage, trigger string, sub subjects, now time.Time) (store.Append, error) {
	ms := now.UnixMilli()
	factID := triggeredFactID(f.ID, c.cfg.ID, c.cfg.Version, f.CreatedAt)
	sigTS := now.Unix()
	delID := deliveryID(factID, c.cfg.ID, sigTS)
	if obj == nil {
		var err error
		if obj, err = factObject(c.settings.Payload, f); err != nil {
			return store.Append{}, err
		}
	}
	payload, err := payloadWith(c.settings.Payload, f, obj, delID, trigger, c.cfg.Version, now)
	if err != nil {
		return store.Append{}, err
	}
	st := c.settings
	msg, err := json.Marshal(deliveryMessage{URL: st.URL, SecretRef: st.SecretRef, Trigger: trigger, Retry: st.Retry,
		Headers: st.Headers, StandardWebhooks: st.StandardWebhooks, TraceID: f.TraceID, ContactID: sub.contact, DealID: sub.deal})
	if err != nil {
		return store.Append{}, err
	}
	data, err := json.Marshal(triggeredData{URL: st.URL, Trigger: trigger, DeliveryID: delID, QueuedAt: ms,
		ConfigID: c.cfg.ID, ConfigVersion: c.cfg.Version, CampaignID: sub.campaign})
	if err != nil {
		return store.Append{}, err
	}
	return store.Append{
		Fact: store.Fact{ID: factID, TenantID: f.TenantID, Type: ConfigType, Subtype: "triggered", SourceID: f.ID,
			TraceID: f.TraceID, Timestamp: ms, Data: data, CreatedAt: ms},
		Outbox: &store.OutboxRow{
			DeliveryID: delID, TenantID: f.TenantID, TriggeredFactID: factID, ConfigID: c.cfg.ID, ConfigVersion: c.cfg.Version,
			CampaignID: sub.campaign, Endpoint: c.endpoint, Status: store.OutboxPending, Attempt: 1,
			MaxAttempts: st.Retry.maxAttempts(), TimeoutSeconds: st.Retry.TimeoutSeconds, SigTimestamp: sigTS,
			Payload: payload, Message: msg, NextAttemptAt: ms, CreatedAt: ms, UpdatedAt: ms,
		},
	}, nil
}
