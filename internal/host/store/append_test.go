package store_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

// TestDecideAppendsAppliesItemsInOrder: each rule of AppendFacts on the
// state a driver read, item by item, with the effect of earlier items of
// the batch seen by later ones.
func TestDecideAppendsAppliesItemsInOrder(t *testing.T) {
	fact := func(id, entity string) store.Fact {
		return store.Fact{ID: id, TenantID: "tnt_a", EntityID: entity, Type: "deposit", CreatedAt: 10}
	}
	items := []store.Append{
		{Fact: fact("fct_1", "ent_1"), ExpectedVersion: 3},                                    // ok: version 3 -> 4
		{Fact: fact("fct_2", "ent_1"), ExpectedVersion: 3},                                    // conflict: now at 4
		{Fact: fact("fct_3", "ent_missing")},                                                  // missing entity
		{Fact: fact("fct_old", "")},                                                           // id taken before the batch
		{Fact: fact("fct_1", "")},                                                             // id taken by item 0
		{Fact: fact("fct_4", ""), ExpectedVersion: 9},                                         // entity-less: no version check
		{Fact: fact("fct_5", "ent_1"), ExpectedVersion: 4, State: json.RawMessage(`{"s":1}`)}, // ok: 4 -> 5
	}
	entities := map[store.EntityKey]*store.AppendEntity{
		{TenantID: "tnt_a", ID: "ent_1"}: {Type: "account", Version: 3, FactSeq: 7},
	}
	taken := map[string]bool{"fct_old": true}
	results, written := store.DecideAppends(items, 100, entities, taken)

	want := []struct {
		err                    error
		position, seq, version int64
	}{
		{nil, 101, 8, 4},
		{store.ErrVersionConflict, 0, 0, 0},
		{store.ErrNotFound, 0, 0, 0},
		{store.ErrAlreadyExists, 0, 0, 0},
		{store.ErrAlreadyExists, 0, 0, 0},
		{nil, 102, 0, 0},
		{nil, 103, 9, 5},
	}
	if written != 3 {
		t.Errorf("written = %d, want 3", written)
	}
	for i, w := range want {
		r := results[i]
		if !errors.Is(r.Err, w.err) || (w.err == nil) != (r.Err == nil) {
			t.Errorf("item %d: err %v, want %v", i, r.Err, w.err)
		}
		if r.Fact.Position != w.position || r.Fact.Seq != w.seq || r.EntityVersion != w.version {
			t.Errorf("item %d: position %d seq %d version %d, want %d %d %d", i,
				r.Fact.Position, r.Fact.Seq, r.EntityVersion, w.position, w.seq, w.version)
		}
		if w.err == nil && string(r.Fact.Data) != "{}" {
			t.Errorf("item %d: empty data stored as %q, want {}", i, r.Fact.Data)
		}
	}
	if results[0].Fact.EntityType != "account" || results[5].Fact.EntityType != "" {
		t.Errorf("entity types %q %q, want account and none", results[0].Fact.EntityType, results[5].Fact.EntityType)
	}
	e := entities[store.EntityKey{TenantID: "tnt_a", ID: "ent_1"}]
	if !e.Touched || !e.SetState || string(e.State) != `{"s":1}` || e.Version != 5 || e.FactSeq != 9 || e.MaxAt != 10 {
		t.Errorf("entity left as %+v", *e)
	}
	for _, id := range []string{"fct_1", "fct_4", "fct_5"} {
		if !taken[id] {
			t.Errorf("%s not marked taken", id)
		}
	}
	if taken["fct_2"] || taken["fct_3"] {
		t.Errorf("a failed item's id is marked taken: %v", taken)
	}
}

func TestAppendReadsNamesEachEntityOnce(t *testing.T) {
	items := []store.Append{
		{Fact: store.Fact{ID: "f1", TenantID: "a", EntityID: "e1"}},
		{Fact: store.Fact{ID: "f2", TenantID: "b", EntityID: "e1"}},
		{Fact: store.Fact{ID: "f3", TenantID: "a", EntityID: "e1"}},
		{Fact: store.Fact{ID: "f4", TenantID: "a"}},
	}
	keys, ids := store.AppendReads(items)
	if len(keys) != 2 || keys[0] != (store.EntityKey{TenantID: "a", ID: "e1"}) || keys[1] != (store.EntityKey{TenantID: "b", ID: "e1"}) {
		t.Errorf("keys = %v", keys)
	}
	if len(ids) != 4 {
		t.Errorf("fact ids = %v", ids)
	}
}

func TestCheckAppendsRequiresFactIDAndTenant(t *testing.T) {
	for _, f := range []store.Fact{{TenantID: "tnt_a", Type: "t"}, {ID: "fct_1", Type: "t"}} {
		if err := store.CheckAppends([]store.Append{{Fact: f}}); err == nil {
			t.Errorf("CheckAppends(%+v) = nil, want an error", f)
		}
	}
	if err := store.CheckAppends([]store.Append{{Fact: store.Fact{ID: "fct_1", TenantID: "tnt_a", Type: "t"}}}); err != nil {
		t.Errorf("CheckAppends of a valid fact: %v", err)
	}
}
