package storetest

import (
	"errors"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var inputTests = []test{
	{"WritesRefuseUnstorableValues", testInputWritesRefused},
	{"LookupsRefuseUnstorableValues", testInputLookupsRefused},
}

// wantInvalid fails unless err is ErrInvalidInput naming field.
func wantInvalid(t *testing.T, err error, field, what string) {
	t.Helper()
	wantErr(t, err, store.ErrInvalidInput, what)
	var ie *store.InvalidInputError
	if !errors.As(err, &ie) || ie.Field != field {
		t.Fatalf("%s: error %v names %q, want field %q", what, err, fieldOf(ie), field)
	}
}

func fieldOf(ie *store.InvalidInputError) string {
	if ie == nil {
		return "<none>"
	}
	return ie.Field
}

// Both stores refuse NUL, invalid UTF-8 and out-of-range numbers with
// ErrInvalidInput and write nothing, where Postgres would otherwise fail
// with a raw SQLSTATE and SQLite would store them.
func testInputWritesRefused(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_1", "account"))

	entities := []struct {
		name, field string
		change      func(e *store.Entity)
	}{
		{"NUL in id", "id", func(e *store.Entity) { e.ID = "ent_\x00" }},
		{"NUL in type", "type", func(e *store.Entity) { e.Type = "acc\x00" }},
		{"invalid UTF-8 in id", "id", func(e *store.Entity) { e.ID = "ent_\xff" }},
		{"NUL in a string field", "data.name", func(e *store.Entity) { e.Data = raw(`{"name":"a\u0000b"}`) }},
		{"NUL in a key", "data.a\uFFFDb", func(e *store.Entity) { e.Data = raw(`{"a\u0000b":1}`) }},
		{"invalid UTF-8 in a string field", "data.name", func(e *store.Entity) { e.Data = raw("{\"name\":\"bad\xff\xfe\"}") }},
		{"lone surrogate", "data.tags[1]", func(e *store.Entity) { e.Data = raw(`{"tags":["ok","\ud800"]}`) }},
		{"huge number", "data.n", func(e *store.Entity) { e.Data = raw(`{"n":1e1000000000}`) }},
		{"number beyond float64", "data.n", func(e *store.Entity) { e.Data = raw(`{"n":1e400}`) }},
		{"number rounding to zero", "data.n", func(e *store.Entity) { e.Data = raw(`{"n":1e-400}`) }},
		{"NUL in metadata", "metadata.m", func(e *store.Entity) { e.Metadata = raw(`{"m":"\u0000"}`) }},
		{"NUL in a string slot", "ix_s_2", func(e *store.Entity) { e.Slots.S[1] = ptr("a\x00") }},
	}
	for _, tc := range entities {
		e := newEntity("tnt_a", "ent_2", "account")
		tc.change(e)
		wantInvalid(t, s.CreateEntity(ctx, e), tc.field, "CreateEntity with "+tc.name)
		if tc.field != "id" && tc.field != "type" {
			_, err := s.UpdateEntity(ctx, store.EntityUpdate{TenantID: "tnt_a", ID: "ent_1", ExpectedVersion: 1,
				Data: e.Data, Metadata: e.Metadata, Slots: e.Slots, UpdatedAt: t0 + 1})
			wantInvalid(t, err, tc.field, "UpdateEntity with "+tc.name)
		}
	}
	list, err := s.ListEntities(ctx, store.EntityFilter{TenantID: "tnt_a", Type: "account", Limit: 10})
	noErr(t, err, "ListEntities")
	if len(list) != 1 || list[0].Version != 1 {
		t.Fatalf("after refusals: %v, want ent_1 alone at version 1", entityIDs(list))
	}

	facts := []struct {
		name, field string
		change      func(f *store.Fact)
	}{
		{"NUL in fact data", "data.note", func(f *store.Fact) { f.Data = raw(`{"note":"x\u0000"}`) }},
		{"huge number in fact data", "data.amount", func(f *store.Fact) { f.Data = raw(`{"amount":-1e1000000000}`) }},
		{"NUL in type", "type", func(f *store.Fact) { f.Type = "dep\x00osit" }},
		{"NUL in subtype", "subtype", func(f *store.Fact) { f.Subtype = "\x00" }},
		{"invalid UTF-8 in source", "source_id", func(f *store.Fact) { f.SourceID = "\xc0\xaf" }},
	}
	for _, tc := range facts {
		f := newFact("tnt_a", "ent_1", "fct_1")
		tc.change(&f)
		_, err := s.AppendFacts(ctx, []store.Append{{Fact: f}})
		wantInvalid(t, err, tc.field, "AppendFacts with "+tc.name)
	}
	if head, err := s.HeadPosition(ctx); err != nil || head != 0 {
		t.Fatalf("head after refused appends: %d, %v; want 0", head, err)
	}

	configs := []struct {
		name, field string
		change      func(c *store.Config)
	}{
		{"NUL in settings", "settings.beta", func(c *store.Config) { c.Settings = raw(`{"beta":"\u0000"}`) }},
		{"huge number in settings", "settings.beta", func(c *store.Config) { c.Settings = raw(`{"beta":1e1000000000}`) }},
		{"NUL in id", "id", func(c *store.Config) { c.ID = "cfg\x00" }},
		{"NUL in name", "name", func(c *store.Config) { c.Name = "\x00" }},
		{"invalid UTF-8 in type", "type", func(c *store.Config) { c.Type = "\xed\xa0\x80" }},
	}
	for _, tc := range configs {
		c := newConfig("tnt_a", "cfg_1", "projection")
		tc.change(c)
		wantInvalid(t, s.CreateConfig(ctx, c), tc.field, "CreateConfig with "+tc.name)
	}
	cs, err := s.ListConfigs(ctx, store.ConfigFilter{TenantID: "tnt_a", Limit: 10})
	noErr(t, err, "ListConfigs")
	if len(cs) != 0 {
		t.Fatalf("configs after refusals: %v, want none", configIDs(cs))
	}
}

// Lookups and filters with values no row can hold are refused the same way
// by both stores.
func testInputLookupsRefused(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	for _, bad := range []string{"x\x00", "\xed\xa0\x80", "\xc0\xaf"} {
		_, err := s.GetEntity(ctx, "tnt_a", bad)
		wantInvalid(t, err, "id", "GetEntity")
		_, err = s.GetFact(ctx, "tnt_a", bad)
		wantInvalid(t, err, "id", "GetFact")
		_, err = s.ListEntityFacts(ctx, "tnt_a", bad, 0, 10)
		wantInvalid(t, err, "id", "ListEntityFacts")
		_, err = s.GetConfig(ctx, "tnt_a", bad)
		wantInvalid(t, err, "id", "GetConfig")
		_, err = s.ListConfigVersions(ctx, "tnt_a", bad)
		wantInvalid(t, err, "id", "ListConfigVersions")
		_, err = s.ListEntities(ctx, store.EntityFilter{TenantID: "tnt_a", Type: bad, Limit: 10})
		wantInvalid(t, err, "type", "ListEntities by type")
		_, err = s.ListEntities(ctx, store.EntityFilter{TenantID: "tnt_a", Type: "account", Limit: 10,
			Where: []store.SlotFilter{{Slot: "ix_s_2", Value: bad}}})
		wantInvalid(t, err, "ix_s_2", "ListEntities by slot")
		_, err = s.ListConfigs(ctx, store.ConfigFilter{TenantID: "tnt_a", Type: bad, Limit: 10})
		wantInvalid(t, err, "type", "ListConfigs by type")
	}
}
