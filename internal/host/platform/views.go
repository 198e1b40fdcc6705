package platform

import (
	"encoding/json"

	"github.com/factline/factline/internal/host/store"
)

// EntityView is the JSON shape of an entity (the contract's Entity object).
type EntityView struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	TenantID  string          `json:"tenant_id"`
	Version   int64           `json:"version"`
	Data      json.RawMessage `json:"data"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt int64           `json:"created_at"`
	UpdatedAt int64           `json:"updated_at"`
}

// NewEntityView renders a stored entity.
func NewEntityView(e *store.Entity) EntityView {
	v := EntityView{ID: e.ID, Type: e.Type, TenantID: e.TenantID, Version: e.Version, Data: e.Data, Metadata: e.Metadata, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if len(v.Data) == 0 {
		v.Data = json.RawMessage(`{}`)
	}
	if len(v.Metadata) == 0 {
		v.Metadata = json.RawMessage(`{}`)
	}
	return v
}

// FactView is the JSON shape of a fact.
type FactView struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Subtype    string          `json:"subtype,omitempty"`
	TenantID   string          `json:"tenant_id"`
	EntityID   string          `json:"entity_id,omitempty"`
	EntityType string          `json:"entity_type,omitempty"`
	Seq        int64           `json:"seq,omitempty"`
	Position   int64           `json:"position,omitempty"`
	SourceID   string          `json:"source_id,omitempty"`
	TraceID    string          `json:"trace_id,omitempty"`
	Timestamp  int64           `json:"timestamp"`
	Data       json.RawMessage `json:"data"`
	CreatedAt  int64           `json:"created_at"`
	// A webhook audit fact also carries, as the webhook document gives
	// them, the fields it holds in its data for want of a fact column.
	ConfigID      string `json:"config_id,omitempty"`
	ConfigVersion int64  `json:"config_version,omitempty"`
	CampaignID    string `json:"campaign_id,omitempty"`
}

// NewFactView renders a stored fact.
func NewFactView(f *store.Fact) FactView {
	v := FactView{ID: f.ID, Type: f.Type, Subtype: f.Subtype, TenantID: f.TenantID, EntityID: f.EntityID, EntityType: f.EntityType,
		Seq: f.Seq, Position: f.Position, SourceID: f.SourceID, TraceID: f.TraceID, Timestamp: f.Timestamp, Data: f.Data, CreatedAt: f.CreatedAt}
	if len(v.Data) == 0 {
		v.Data = json.RawMessage(`{}`)
	}
	if f.Type == "webhook" && f.EntityID == "" {
		var audit struct {
			ConfigID      string `json:"config_id"`
			ConfigVersion int64  `json:"config_version"`
			CampaignID    string `json:"campaign_id"`
		}
		if json.Unmarshal(v.Data, &audit) == nil { // the delivery routine wrote it; a mismatch leaves the data alone
			v.ConfigID, v.ConfigVersion, v.CampaignID = audit.ConfigID, audit.ConfigVersion, audit.CampaignID
		}
	}
	return v
}

// ConfigView is the JSON shape of one config version.
type ConfigView struct {
	ID           string          `json:"id"`
	TenantID     string          `json:"tenant_id"`
	Version      int64           `json:"version"`
	Type         string          `json:"type"`
	Name         string          `json:"name,omitempty"`
	ScopeType    string          `json:"scope_type"`
	ScopeID      string          `json:"scope_id,omitempty"`
	Settings     json.RawMessage `json:"settings"`
	Status       string          `json:"status"`
	SupersededAt *int64          `json:"superseded_at"`
	EffectiveAt  int64           `json:"effective_at"`
	CreatedAt    int64           `json:"created_at"`
	// A webhook config also carries the fields the webhook document gives
	// its record: category (always logic), scope (scope_type) and
	// applies_to (scope_id).
	Category  string `json:"category,omitempty"`
	Scope     string `json:"scope,omitempty"`
	AppliesTo string `json:"applies_to,omitempty"`
}

// NewConfigView renders a stored config version.
func NewConfigView(c *store.Config) ConfigView {
	v := ConfigView{ID: c.ID, TenantID: c.TenantID, Version: c.Version, Type: c.Type, Name: c.Name, ScopeType: c.ScopeType, ScopeID: c.ScopeID,
		Settings: c.Settings, Status: c.Status, SupersededAt: c.SupersededAt, EffectiveAt: c.EffectiveAt, CreatedAt: c.CreatedAt}
	if len(v.Settings) == 0 {
		v.Settings = json.RawMessage(`{}`)
	}
	if c.Type == "webhook" {
		v.Category, v.Scope, v.AppliesTo = "logic", c.ScopeType, c.ScopeID
	}
	return v
}
