package store

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Checks every implementation applies before it writes, kept here so the
// two cannot disagree on what a valid row is.

// CheckJSON reports a non-empty value that is not valid JSON or holds a
// value the store cannot hold (see [CheckDocument]).
func CheckJSON(field string, j json.RawMessage) error {
	return CheckDocument(field, j)
}

// CheckEntityJSON checks an entity's three JSON documents.
func CheckEntityJSON(data, metadata, state json.RawMessage) error {
	return errors.Join(CheckJSON("data", data), CheckJSON("metadata", metadata), CheckJSON("state", state))
}

// Check reports an entity row the store cannot hold.
func (e *Entity) Check() error {
	return errors.Join(CheckTexts("tenant_id", e.TenantID, "id", e.ID, "type", e.Type),
		e.Slots.check(), CheckEntityJSON(e.Data, e.Metadata, e.State))
}

// Check reports an update the store cannot hold.
func (u *EntityUpdate) Check() error {
	return errors.Join(CheckTexts("tenant_id", u.TenantID, "id", u.ID),
		u.Slots.check(), CheckEntityJSON(u.Data, u.Metadata, nil))
}

func (s *Slots) check() error {
	for i, v := range s.S {
		if v != nil {
			if err := CheckText(SlotColumn(i, false), *v); err != nil {
				return err
			}
		}
	}
	return nil
}

// Check reports a fact the store cannot hold.
func (f *Fact) Check() error {
	return errors.Join(CheckTexts("id", f.ID, "tenant_id", f.TenantID, "entity_id", f.EntityID,
		"type", f.Type, "subtype", f.Subtype, "source_id", f.SourceID, "trace_id", f.TraceID),
		CheckJSON("data", f.Data))
}

// Check reports a filter no stored row can match because the store cannot
// hold its values; both stores refuse it rather than answer differently.
func (f *EntityFilter) Check() error {
	if err := CheckTexts("tenant_id", f.TenantID, "type", f.Type, "cursor", f.AfterID); err != nil {
		return err
	}
	for _, w := range f.Where {
		if s, ok := w.Value.(string); ok {
			if err := CheckText(w.Slot, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// Check reports a filter the store cannot hold (see [EntityFilter.Check]).
func (f *ConfigFilter) Check() error {
	return CheckTexts("tenant_id", f.TenantID, "type", f.Type, "status", f.Status, "cursor", f.AfterID)
}

// Check reports a row the outbox cannot hold.
func (r *OutboxRow) Check() error {
	switch {
	case r.DeliveryID == "" || r.TenantID == "" || r.TriggeredFactID == "" || r.ConfigID == "":
		return errors.New("delivery id, tenant, triggered fact id and config id are required")
	case r.Status != OutboxPending && r.Status != OutboxSent && r.Status != OutboxDead:
		return fmt.Errorf("status %q is not pending, sent or dead", r.Status)
	case r.Attempt < 1 || r.MaxAttempts < 1 || r.TimeoutSeconds < 1:
		return errors.New("attempt, max attempts and timeout must be positive")
	}
	return errors.Join(CheckJSON("message", r.Message), CheckJSON("dead letter", r.DeadLetter))
}

// PrepareVersion readies a config version for insertion: an empty status is
// active, a new version is never superseded, the settings must be JSON.
func (c *Config) PrepareVersion() error {
	if c.Status == "" {
		c.Status = ConfigActive
	}
	if c.Status != ConfigActive && c.Status != ConfigArchived {
		return fmt.Errorf("unknown status %q", c.Status)
	}
	c.SupersededAt = nil
	return errors.Join(CheckTexts("tenant_id", c.TenantID, "id", c.ID, "type", c.Type, "name", c.Name,
		"scope_type", c.ScopeType, "scope_id", c.ScopeID), CheckJSON("settings", c.Settings))
}

// Column returns the filter's column and its value typed for that column: a
// string for ix_s_*, a float64 for ix_n_*. The column is one of the fixed
// slot names, so it is safe to write into SQL.
func (w SlotFilter) Column() (column string, value any, err error) {
	_, number, ok := ParseSlotColumn(w.Slot)
	if !ok {
		return "", nil, fmt.Errorf("unknown slot %q", w.Slot)
	}
	if !number {
		if s, ok := w.Value.(string); ok {
			return w.Slot, s, nil
		}
		return "", nil, fmt.Errorf("slot %s: want a string value, got %T", w.Slot, w.Value)
	}
	switch n := w.Value.(type) {
	case float64:
		return w.Slot, n, nil
	case float32:
		return w.Slot, float64(n), nil
	case int:
		return w.Slot, float64(n), nil
	case int64:
		return w.Slot, float64(n), nil
	case int32:
		return w.Slot, float64(n), nil
	}
	return "", nil, fmt.Errorf("slot %s: want a number value, got %T", w.Slot, w.Value)
}
