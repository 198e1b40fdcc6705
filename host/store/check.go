package store

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Checks every implementation applies before it writes, kept here so the
// two cannot disagree on what a valid row is.

// CheckJSON reports a non-empty value that is not valid JSON.
func CheckJSON(field string, j json.RawMessage) error {
	if len(j) > 0 && !json.Valid(j) {
		return fmt.Errorf("%s is not valid JSON", field)
	}
	return nil
}

// CheckEntityJSON checks an entity's three JSON documents.
func CheckEntityJSON(data, metadata, state json.RawMessage) error {
	return errors.Join(CheckJSON("data", data), CheckJSON("metadata", metadata), CheckJSON("state", state))
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
	return CheckJSON("settings", c.Settings)
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
