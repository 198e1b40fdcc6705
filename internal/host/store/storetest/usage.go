package storetest

import (
	"fmt"
	"maps"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var usageTests = []test{
	{"EntityTypeUsage", testEntityTypeUsage},
	{"EntityTypeCounts", testEntityTypeCounts},
	{"FactTypeInUse", testFactTypeInUse},
	{"FactTypeKeys", testFactTypeKeys},
	{"DomainLayers", testDomainLayers},
}

// testEntityTypeUsage: counts span tenants and only the asked type.
func testEntityTypeUsage(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	u, err := s.EntityTypeUsage(ctx, "ticket")
	noErr(t, err, "EntityTypeUsage of nothing")
	if u.Entities != 0 || len(u.Keys) != 0 || len(u.Slots) != 0 {
		t.Fatalf("usage of an unused type: %+v", u)
	}
	a := newEntity("t1", "e1", "ticket")
	a.Data = raw(`{"status":"open","title":"x"}`)
	a.Slots.S[0] = ptr("open")
	createEntity(t, s, a)
	b := newEntity("t2", "e1", "ticket")
	b.Data = raw(`{"status":"closed","hours":3}`)
	b.Slots.S[0], b.Slots.N[1] = ptr("closed"), ptr(3.0)
	createEntity(t, s, b)
	createEntity(t, s, newEntity("t1", "e2", "account"))
	u, err = s.EntityTypeUsage(ctx, "ticket")
	noErr(t, err, "EntityTypeUsage")
	if u.Entities != 2 {
		t.Errorf("entities %d, want 2", u.Entities)
	}
	if want := map[string]int64{"status": 2, "title": 1, "hours": 1}; !maps.Equal(u.Keys, want) {
		t.Errorf("keys %v, want %v", u.Keys, want)
	}
	if want := map[string]int64{"ix_s_1": 2, "ix_n_2": 1}; !maps.Equal(u.Slots, want) {
		t.Errorf("slots %v, want %v", u.Slots, want)
	}
}

// testEntityTypeCounts: every type stored, counted across tenants.
func testEntityTypeCounts(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	counts, err := s.EntityTypeCounts(ctx)
	noErr(t, err, "EntityTypeCounts of nothing")
	if len(counts) != 0 {
		t.Fatalf("counts of an empty store: %v", counts)
	}
	createEntity(t, s, newEntity("t1", "e1", "ticket"))
	createEntity(t, s, newEntity("t2", "e1", "ticket"))
	createEntity(t, s, newEntity("t1", "e2", "account"))
	counts, err = s.EntityTypeCounts(ctx)
	noErr(t, err, "EntityTypeCounts")
	if want := map[string]int64{"ticket": 2, "account": 1}; !maps.Equal(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
}

func testFactTypeInUse(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("t1", "e1", "ticket"))
	createEntity(t, s, newEntity("t2", "e1", "account"))
	f := newFact("t1", "e1", "f1")
	f.Type = "opened"
	appendOne(t, s, f)
	g := newFact("t2", "e1", "f2")
	g.Type = "closed"
	appendOne(t, s, g)
	for _, tc := range []struct {
		entityType, factType string
		want                 bool
	}{
		{"ticket", "opened", true},
		{"ticket", "closed", false}, // recorded on another type
		{"account", "closed", true},
		{"deal", "opened", false},
	} {
		used, err := s.FactTypeInUse(ctx, tc.entityType, tc.factType)
		noErr(t, err, "FactTypeInUse")
		if used != tc.want {
			t.Errorf("FactTypeInUse(%s, %s) = %v, want %v", tc.entityType, tc.factType, used, tc.want)
		}
	}
}

// testFactTypeKeys: counts span tenants and only the asked entity and
// fact type.
func testFactTypeKeys(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	keys, err := s.FactTypeKeys(ctx, "ticket", "opened")
	noErr(t, err, "FactTypeKeys of nothing")
	if len(keys) != 0 {
		t.Fatalf("keys of an unused fact type: %v", keys)
	}
	createEntity(t, s, newEntity("t1", "e1", "ticket"))
	createEntity(t, s, newEntity("t2", "e1", "ticket"))
	createEntity(t, s, newEntity("t1", "e2", "account"))
	for i, tc := range []struct{ tenant, entity, typ, data string }{
		{"t1", "e1", "opened", `{"title":"x","hours":2}`},
		{"t2", "e1", "opened", `{"title":"y"}`},
		{"t1", "e1", "closed", `{"reason":"done"}`},
		{"t1", "e2", "opened", `{"amount":"1"}`}, // another entity type
	} {
		f := newFact(tc.tenant, tc.entity, fmt.Sprintf("f%d", i))
		f.Type, f.Data = tc.typ, raw(tc.data)
		appendOne(t, s, f)
	}
	keys, err = s.FactTypeKeys(ctx, "ticket", "opened")
	noErr(t, err, "FactTypeKeys")
	if want := map[string]int64{"title": 2, "hours": 1}; !maps.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
}

func testDomainLayers(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	layers, err := s.ListDomainLayers(ctx)
	noErr(t, err, "ListDomainLayers of nothing")
	if len(layers) != 0 {
		t.Fatalf("layers of an empty store: %v", layers)
	}
	digest := func() string {
		t.Helper()
		layers, err := s.ListDomainLayers(ctx)
		noErr(t, err, "ListDomainLayers")
		return store.LayersDigest(layers)
	}
	empty := digest()
	noErr(t, s.PutDomainLayer(ctx, &store.DomainLayer{Name: "tickets", Source: []byte("a: 1\n"), SHA256: "aaa", UpdatedAt: 1}, empty), "put tickets")
	// A change checked against a model read before another one landed is
	// refused, and writes nothing.
	wantErr(t, s.PutDomainLayer(ctx, &store.DomainLayer{Name: "claims", Source: []byte("x\n"), SHA256: "xxx", UpdatedAt: 2}, empty), store.ErrVersionConflict, "put against a stale read")
	wantErr(t, s.DeleteDomainLayer(ctx, "tickets", empty), store.ErrVersionConflict, "delete against a stale read")
	noErr(t, s.PutDomainLayer(ctx, &store.DomainLayer{Name: "claims", Source: []byte("b: 2\n"), SHA256: "bbb", UpdatedAt: 2}, digest()), "put claims")
	noErr(t, s.PutDomainLayer(ctx, &store.DomainLayer{Name: "tickets", Source: []byte("a: 3\n"), SHA256: "ccc", UpdatedAt: 3}, digest()), "replace tickets")
	layers, err = s.ListDomainLayers(ctx)
	noErr(t, err, "ListDomainLayers")
	if len(layers) != 2 || layers[0].Name != "claims" || layers[1].Name != "tickets" ||
		string(layers[1].Source) != "a: 3\n" || layers[1].SHA256 != "ccc" || layers[1].UpdatedAt != 3 {
		t.Fatalf("layers: %+v", layers)
	}
	noErr(t, s.DeleteDomainLayer(ctx, "claims", digest()), "delete claims")
	wantErr(t, s.DeleteDomainLayer(ctx, "claims", digest()), store.ErrNotFound, "delete claims again")
	layers, err = s.ListDomainLayers(ctx)
	noErr(t, err, "ListDomainLayers after delete")
	if len(layers) != 1 || layers[0].Name != "tickets" {
		t.Fatalf("layers after delete: %+v", layers)
	}
}
