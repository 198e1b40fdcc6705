package storetest

import (
	"errors"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var isolationTests = []test{
	{"Entities", testIsolationEntities},
	{"Facts", testIsolationFacts},
	{"Configs", testIsolationConfigs},
	{"Idempotency", testIsolationIdempotency},
}

// Tenant tnt_b must never see or change rows of tnt_a: every lookup of an
// id of tnt_a from tnt_b is ErrNotFound.

func testIsolationEntities(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	e := newEntity("tnt_a", "ent_a1", "account")
	e.Slots.S[0] = ptr("open")
	createEntity(t, s, e)
	before, err := s.GetEntity(ctx, "tnt_a", "ent_a1")
	noErr(t, err, "GetEntity")

	_, err = s.GetEntity(ctx, "tnt_b", "ent_a1")
	wantErr(t, err, store.ErrNotFound, "GetEntity from another tenant")
	_, err = s.UpdateEntity(ctx, store.EntityUpdate{TenantID: "tnt_b", ID: "ent_a1", ExpectedVersion: 1, Data: raw(`{"x":1}`), UpdatedAt: t0 + 5})
	wantErr(t, err, store.ErrNotFound, "UpdateEntity from another tenant")
	wantErr(t, s.SetEntityState(ctx, "tnt_b", "ent_a1", raw(`{"x":1}`)), store.ErrNotFound, "SetEntityState from another tenant")
	rows, err := s.ListEntities(ctx, store.EntityFilter{TenantID: "tnt_b", Type: "account", Limit: 10})
	noErr(t, err, "ListEntities")
	if len(rows) != 0 {
		t.Errorf("ListEntities of tnt_b: got %v", entityIDs(rows))
	}
	rows, err = s.ListEntities(ctx, store.EntityFilter{TenantID: "tnt_b", Type: "account", Limit: 10,
		Where: []store.SlotFilter{{Slot: "ix_s_1", Value: "open"}}})
	noErr(t, err, "ListEntities with a filter")
	if len(rows) != 0 {
		t.Errorf("ListEntities of tnt_b with a filter: got %v", entityIDs(rows))
	}
	res, err := s.AppendFacts(ctx, []store.Append{{Fact: newFact("tnt_b", "ent_a1", "fct_x")}})
	noErr(t, err, "AppendFacts")
	wantErr(t, res[0].Err, store.ErrNotFound, "AppendFacts to another tenant's entity")

	after, err := s.GetEntity(ctx, "tnt_a", "ent_a1")
	noErr(t, err, "GetEntity")
	checkEntity(t, after, *before)
}

func testIsolationFacts(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	createEntity(t, s, newEntity("tnt_a", "ent_a1", "account"))
	appendOne(t, s, newFact("tnt_a", "ent_a1", "fct_a1"))
	appendOne(t, s, newFact("tnt_a", "", "fct_free"))

	for _, id := range []string{"fct_a1", "fct_free"} {
		_, err := s.GetFact(ctx, "tnt_b", id)
		wantErr(t, err, store.ErrNotFound, "GetFact of "+id+" from another tenant")
	}
	facts, err := s.ListEntityFacts(ctx, "tnt_b", "ent_a1", 0, 10)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ListEntityFacts from another tenant: %v (want no facts, or ErrNotFound)", err)
	}
	if len(facts) != 0 {
		t.Errorf("ListEntityFacts from another tenant: got %v", factIDs(facts))
	}
}

func testIsolationConfigs(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	v1 := createConfig(t, s, newConfig("tnt_a", "cfg_1", "webhook"))

	_, err := s.GetConfig(ctx, "tnt_b", "cfg_1")
	wantErr(t, err, store.ErrNotFound, "GetConfig from another tenant")
	_, err = s.GetConfigVersion(ctx, "tnt_b", "cfg_1", 1)
	wantErr(t, err, store.ErrNotFound, "GetConfigVersion from another tenant")
	_, err = s.ListConfigVersions(ctx, "tnt_b", "cfg_1")
	wantErr(t, err, store.ErrNotFound, "ListConfigVersions from another tenant")
	put := nextVersion(v1, t0+10, `{"v":2}`)
	put.TenantID = "tnt_b"
	wantErr(t, s.PutConfigVersion(ctx, put), store.ErrNotFound, "PutConfigVersion from another tenant")
	_, err = s.ArchiveConfig(ctx, "tnt_b", "cfg_1", t0+20)
	wantErr(t, err, store.ErrNotFound, "ArchiveConfig from another tenant")
	list, err := s.ListConfigs(ctx, store.ConfigFilter{TenantID: "tnt_b", Limit: 10})
	noErr(t, err, "ListConfigs")
	if len(list) != 0 {
		t.Errorf("ListConfigs of tnt_b: got %v", configIDs(list))
	}

	got, err := s.GetConfig(ctx, "tnt_a", "cfg_1")
	noErr(t, err, "GetConfig")
	checkConfig(t, got, v1)
}

func testIsolationIdempotency(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	keyA := store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/entities", Key: "shared-key"}
	keyB := keyA
	keyB.TenantID = "tnt_b"

	mustBegin(t, s, begin(keyA, "ha", t0), true)
	// The same scope and key in another tenant is a separate record.
	mustBegin(t, s, begin(keyB, "hb", t0), true)
	noErr(t, s.CompleteIdempotency(ctx, keyB, 201, []byte("b"), nil), "CompleteIdempotency tnt_b")

	rec := mustBegin(t, s, begin(keyA, "ha", t0+1), false)
	if rec.State != store.IdemInFlight || rec.RequestHash != "ha" || len(rec.Body) != 0 {
		t.Errorf("tnt_a record changed by tnt_b: %+v", rec)
	}
	if _, err := s.ReleaseIdempotency(ctx, keyA, t0+idemLock); err != nil {
		t.Fatalf("ReleaseIdempotency tnt_a: %v", err)
	}
	rec = mustBegin(t, s, begin(keyB, "hb", t0+2), false)
	if rec.State != store.IdemDone || string(rec.Body) != "b" {
		t.Errorf("tnt_b record changed by tnt_a's release: %+v", rec)
	}

	keyC := keyA
	keyC.TenantID = "tnt_c"
	wantErr(t, s.CompleteIdempotency(ctx, keyC, 200, nil, nil), store.ErrNotFound, "CompleteIdempotency in a tenant without the record")
}
