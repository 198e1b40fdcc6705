package store

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The rules of AppendFacts, written once. A driver checks the items with
// [CheckAppends], reads under its write lock what [AppendReads] names (the
// head position, the entities, which fact ids are taken), lets
// [DecideAppends] apply the items in order, and writes what it decided.

// EntityKey identifies an entity across tenants.
type EntityKey struct{ TenantID, ID string }

// AppendEntity is an entity an AppendFacts batch names: what the driver
// read (Type, Version, FactSeq, the Seq of its latest fact) and, after
// [DecideAppends], the state the batch leaves it in.
type AppendEntity struct {
	Type    string
	Version int64
	FactSeq int64

	Touched  bool            // a fact of the batch was appended to it
	SetState bool            // State replaces the stored snapshot
	State    json.RawMessage // the last snapshot an item gave
	MaxAt    int64           // latest CreatedAt of its facts in the batch
}

// CheckAppends reports an item the store cannot hold; it fails the whole
// call before anything is read.
func CheckAppends(items []Append) error {
	for i, it := range items {
		f := it.Fact
		if f.ID == "" || f.TenantID == "" {
			return fmt.Errorf("item %d: fact id and tenant are required", i)
		}
		if err := errors.Join(f.Check(), CheckJSON("state", it.State)); err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		if it.Outbox != nil {
			if err := it.Outbox.Check(); err != nil {
				return fmt.Errorf("item %d: outbox: %w", i, err)
			}
		}
	}
	return nil
}

// AppendReads returns what a driver reads before [DecideAppends]: the
// entities the items name (each once, in first-use order) and the fact ids
// to look up (all but fresh ones).
func AppendReads(items []Append) (entities []EntityKey, factIDs []string) {
	seen := make(map[EntityKey]bool)
	for _, it := range items {
		if !it.FreshID {
			factIDs = append(factIDs, it.Fact.ID)
		}
		if it.Fact.EntityID == "" {
			continue
		}
		k := EntityKey{it.Fact.TenantID, it.Fact.EntityID}
		if !seen[k] {
			seen[k] = true
			entities = append(entities, k)
		}
	}
	return entities, factIDs
}

// DecideAppends applies the items in order to the state a driver read under
// its write lock: head is the highest position, entities the existing ones
// among those [AppendReads] names, taken the fact ids already stored. A
// missing entity fails an item with ErrNotFound, a version other than the
// expected one with ErrVersionConflict, an id taken before the batch or by
// an earlier item with ErrAlreadyExists; a failed item writes nothing. A
// successful item takes the next position and its entity's next Seq and
// version, and empty data is stored as {}.
//
// It returns the results and how many items succeeded, and changes
// entities and taken to the state the batch leaves behind: the driver
// writes the successful results' facts and the touched entities.
func DecideAppends(items []Append, head int64, entities map[EntityKey]*AppendEntity, taken map[string]bool) ([]AppendResult, int) {
	results := make([]AppendResult, len(items))
	written := 0
	for i, it := range items {
		f := it.Fact
		f.Seq, f.Position, f.EntityType = 0, 0, ""
		var e *AppendEntity
		if f.EntityID != "" {
			e = entities[EntityKey{f.TenantID, f.EntityID}]
			if e == nil {
				results[i] = AppendResult{Fact: f, Err: fmt.Errorf("entity %s: %w", f.EntityID, ErrNotFound)}
				continue
			}
			if it.ExpectedVersion != 0 && it.ExpectedVersion != e.Version {
				results[i] = AppendResult{Fact: f, Err: fmt.Errorf("entity %s is at version %d, not %d: %w",
					f.EntityID, e.Version, it.ExpectedVersion, ErrVersionConflict)}
				continue
			}
		}
		if taken[f.ID] {
			results[i] = AppendResult{Fact: f, Err: fmt.Errorf("fact %s: %w", f.ID, ErrAlreadyExists)}
			continue
		}
		taken[f.ID] = true
		written++
		f.Position = head + int64(written)
		if len(f.Data) == 0 {
			f.Data = json.RawMessage("{}")
		}
		r := AppendResult{Fact: f}
		if e != nil {
			e.Touched = true
			e.Version++
			e.FactSeq++
			if it.State != nil {
				e.SetState, e.State = true, it.State
			}
			e.MaxAt = max(e.MaxAt, f.CreatedAt)
			r.Fact.Seq, r.Fact.EntityType = e.FactSeq, e.Type
			r.EntityVersion = e.Version
		}
		results[i] = r
	}
	return results, written
}
