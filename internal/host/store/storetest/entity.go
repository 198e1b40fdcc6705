package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var entityTests = []test{
	{"CreateAndGet", testEntityCreateAndGet},
	{"CreateDuplicate", testEntityCreateDuplicate},
	{"NotFound", testEntityNotFound},
	{"Update", testEntityUpdate},
	{"UpdateVersionConflict", testEntityUpdateVersionConflict},
	{"List", testEntityList},
	{"ListKeysetPagination", testEntityListKeysetPagination},
	{"ListInvalidSlot", testEntityListInvalidSlot},
	{"SetState", testEntitySetState},
	{"ConcurrentGets", testEntityConcurrentGets},
}

func testEntityCreateAndGet(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	full := &store.Entity{
		TenantID: "tnt_a",
		ID:       "ent_full",
		Type:     "account",
		Data:     raw(`{"name":"Acme","status":"open","nested":{"z":1,"a":[1,2.5,"x",null,true]},"text":"caf\u00e9 \"q\""}`),
		Metadata: raw(`{"source":"import","tags":["a","b"]}`),
		State:    raw(`{"balance":10}`),
		Slots: store.Slots{
			S: [store.StringSlots]*string{0: ptr("open"), 1: ptr("Acme"), 9: ptr("last")},
			N: [store.NumberSlots]*float64{0: ptr(12.5), 4: ptr(-3.0)},
		},
		CreatedAt: t0,
		UpdatedAt: t0 + 1,
	}
	// Only what CreateEntity must store: Version is assigned, nil JSON
	// fields stay absent, nil data becomes the empty object.
	minimal := &store.Entity{TenantID: "tnt_a", ID: "ent_mini", Type: "asset", CreatedAt: t0 + 2, UpdatedAt: t0 + 2}

	for _, e := range []*store.Entity{full, minimal} {
		want := *e
		want.Version = 1
		if want.Data == nil {
			want.Data = raw(`{}`)
		}
		noErr(t, s.CreateEntity(ctx, e), "CreateEntity "+e.ID)
		got, err := s.GetEntity(ctx, e.TenantID, e.ID)
		noErr(t, err, "GetEntity "+e.ID)
		checkEntity(t, got, want)
	}

	// The returned slots are copies: changing them does not change the store.
	got, err := s.GetEntity(ctx, "tnt_a", "ent_full")
	noErr(t, err, "GetEntity")
	*got.Slots.S[0] = "mutated"
	again, err := s.GetEntity(ctx, "tnt_a", "ent_full")
	noErr(t, err, "GetEntity")
	if v := again.Slots.S[0]; v == nil || *v != "open" {
		t.Errorf("ix_s_1 after mutating a returned copy: got %v, want open", v)
	}
}

func testEntityCreateDuplicate(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	orig := newEntity("tnt_a", "ent_dup", "account")
	createEntity(t, s, orig)

	dup := newEntity("tnt_a", "ent_dup", "asset")
	dup.Data = raw(`{"name":"other"}`)
	wantErr(t, s.CreateEntity(ctx, dup), store.ErrAlreadyExists, "CreateEntity with a taken id")

	got, err := s.GetEntity(ctx, "tnt_a", "ent_dup")
	noErr(t, err, "GetEntity")
	want := *orig
	want.Version = 1
	checkEntity(t, got, want)

	// Ids are scoped by tenant: another tenant may use the same id.
	other := newEntity("tnt_b", "ent_dup", "asset")
	noErr(t, s.CreateEntity(ctx, other), "CreateEntity of the same id in another tenant")
	got, err = s.GetEntity(ctx, "tnt_b", "ent_dup")
	noErr(t, err, "GetEntity tnt_b")
	if got.Type != "asset" {
		t.Errorf("tnt_b entity type: got %q, want asset", got.Type)
	}
}

func testEntityNotFound(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	_, err := s.GetEntity(ctx, "tnt_a", "ent_none")
	wantErr(t, err, store.ErrNotFound, "GetEntity of a missing id")
	_, err = s.UpdateEntity(ctx, store.EntityUpdate{TenantID: "tnt_a", ID: "ent_none", ExpectedVersion: 1, Data: raw(`{}`), UpdatedAt: t0})
	wantErr(t, err, store.ErrNotFound, "UpdateEntity of a missing id")
	wantErr(t, s.SetEntityState(ctx, "tnt_a", "ent_none", raw(`{}`)), store.ErrNotFound, "SetEntityState of a missing id")
}

func testEntityUpdate(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	e := newEntity("tnt_a", "ent_upd", "account")
	e.Metadata = raw(`{"m":1}`)
	e.State = raw(`{"s":1}`)
	e.Slots.S[0] = ptr("open")
	e.Slots.S[1] = ptr("Old")
	e.Slots.N[0] = ptr(1.0)
	createEntity(t, s, e)

	// Version 1 -> 2: data and slots are replaced wholesale (ix_s_2 and
	// ix_n_1 cleared, ix_s_3 and ix_n_2 set), nil metadata keeps the stored
	// one, state and created_at are untouched.
	u := store.EntityUpdate{
		TenantID:        "tnt_a",
		ID:              "ent_upd",
		ExpectedVersion: 1,
		Data:            raw(`{"name":"New","n":2}`),
		Slots: store.Slots{
			S: [store.StringSlots]*string{0: ptr("closed"), 2: ptr("third")},
			N: [store.NumberSlots]*float64{1: ptr(7.25)},
		},
		UpdatedAt: t0 + 100,
	}
	got, err := s.UpdateEntity(ctx, u)
	noErr(t, err, "UpdateEntity v1")
	want := store.Entity{
		TenantID: "tnt_a", ID: "ent_upd", Type: "account", Version: 2,
		Data: u.Data, Metadata: raw(`{"m":1}`), State: raw(`{"s":1}`),
		Slots:     u.Slots,
		CreatedAt: t0, UpdatedAt: t0 + 100,
	}
	checkEntity(t, got, want)
	stored, err := s.GetEntity(ctx, "tnt_a", "ent_upd")
	noErr(t, err, "GetEntity")
	checkEntity(t, stored, want)

	// Version 2 -> 3 with new metadata.
	u.ExpectedVersion = 2
	u.Metadata = raw(`{"m":2,"extra":true}`)
	u.Data = raw(`{"name":"Newer"}`)
	u.Slots = store.Slots{}
	u.UpdatedAt = t0 + 200
	got, err = s.UpdateEntity(ctx, u)
	noErr(t, err, "UpdateEntity v2")
	want.Version, want.Metadata, want.Data, want.Slots, want.UpdatedAt = 3, u.Metadata, u.Data, store.Slots{}, t0+200
	checkEntity(t, got, want)
	stored, err = s.GetEntity(ctx, "tnt_a", "ent_upd")
	noErr(t, err, "GetEntity")
	checkEntity(t, stored, want)
}

func testEntityUpdateVersionConflict(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	e := newEntity("tnt_a", "ent_cfl", "account")
	e.Slots.S[0] = ptr("open")
	createEntity(t, s, e)
	_, err := s.UpdateEntity(ctx, store.EntityUpdate{
		TenantID: "tnt_a", ID: "ent_cfl", ExpectedVersion: 1,
		Data: raw(`{"name":"v2"}`), Slots: e.Slots, UpdatedAt: t0 + 10,
	})
	noErr(t, err, "UpdateEntity to v2")
	before, err := s.GetEntity(ctx, "tnt_a", "ent_cfl")
	noErr(t, err, "GetEntity")

	for _, v := range []int64{1, 3, 100} {
		t.Run(fmt.Sprintf("expected=%d", v), func(t *testing.T) {
			_, err := s.UpdateEntity(ctx, store.EntityUpdate{
				TenantID: "tnt_a", ID: "ent_cfl", ExpectedVersion: v,
				Data:      raw(`{"name":"lost"}`),
				Metadata:  raw(`{"lost":true}`),
				Slots:     store.Slots{S: [store.StringSlots]*string{0: ptr("lost")}},
				UpdatedAt: t0 + 999,
			})
			wantErr(t, err, store.ErrVersionConflict, "UpdateEntity with a stale version")
			after, err := s.GetEntity(ctx, "tnt_a", "ent_cfl")
			noErr(t, err, "GetEntity")
			checkEntity(t, after, *before)
		})
	}
}

func testEntityList(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	type row struct {
		tenant, id, typ string
		status, name    *string
		amount          *float64
	}
	rows := []row{
		{"tnt_a", "ent01", "account", ptr("open"), ptr("Alpha"), ptr(10.0)},
		{"tnt_a", "ent02", "account", ptr("closed"), ptr("Beta"), ptr(20.0)},
		{"tnt_a", "ent03", "account", ptr("open"), ptr("Gamma"), ptr(20.0)},
		{"tnt_a", "ent04", "account", ptr("open"), nil, nil},
		{"tnt_a", "ent05", "asset", ptr("open"), ptr("Alpha"), ptr(10.0)},
		{"tnt_b", "ent06", "account", ptr("open"), ptr("Alpha"), ptr(10.0)},
		{"tnt_a", "ent07", "account", ptr("open"), ptr("Delta"), ptr(2.5)},
	}
	// Insert out of id order so the listing order comes from the store.
	for _, i := range []int{6, 2, 0, 4, 1, 5, 3} {
		r := rows[i]
		e := newEntity(r.tenant, r.id, r.typ)
		e.Slots.S[0], e.Slots.S[1], e.Slots.N[0] = r.status, r.name, r.amount
		createEntity(t, s, e)
	}

	tests := []struct {
		name   string
		filter store.EntityFilter
		want   []string
	}{
		{"type only", store.EntityFilter{TenantID: "tnt_a", Type: "account"}, []string{"ent01", "ent02", "ent03", "ent04", "ent07"}},
		{"other type", store.EntityFilter{TenantID: "tnt_a", Type: "asset"}, []string{"ent05"}},
		{"unknown type", store.EntityFilter{TenantID: "tnt_a", Type: "deal"}, nil},
		{"other tenant", store.EntityFilter{TenantID: "tnt_b", Type: "account"}, []string{"ent06"}},
		{"string slot", store.EntityFilter{TenantID: "tnt_a", Type: "account",
			Where: []store.SlotFilter{{Slot: "ix_s_1", Value: "open"}}}, []string{"ent01", "ent03", "ent04", "ent07"}},
		{"second string slot", store.EntityFilter{TenantID: "tnt_a", Type: "account",
			Where: []store.SlotFilter{{Slot: "ix_s_2", Value: "Beta"}}}, []string{"ent02"}},
		{"string slot no match", store.EntityFilter{TenantID: "tnt_a", Type: "account",
			Where: []store.SlotFilter{{Slot: "ix_s_1", Value: "nope"}}}, nil},
		{"number slot", store.EntityFilter{TenantID: "tnt_a", Type: "account",
			Where: []store.SlotFilter{{Slot: "ix_n_1", Value: 20.0}}}, []string{"ent02", "ent03"}},
		{"fractional number slot", store.EntityFilter{TenantID: "tnt_a", Type: "account",
			Where: []store.SlotFilter{{Slot: "ix_n_1", Value: 2.5}}}, []string{"ent07"}},
		{"number slot within type", store.EntityFilter{TenantID: "tnt_a", Type: "account",
			Where: []store.SlotFilter{{Slot: "ix_n_1", Value: 10.0}}}, []string{"ent01"}},
		{"string and number slots", store.EntityFilter{TenantID: "tnt_a", Type: "account",
			Where: []store.SlotFilter{{Slot: "ix_s_1", Value: "open"}, {Slot: "ix_n_1", Value: 20.0}}}, []string{"ent03"}},
		{"limit", store.EntityFilter{TenantID: "tnt_a", Type: "account", Limit: 2}, []string{"ent01", "ent02"}},
		{"after id", store.EntityFilter{TenantID: "tnt_a", Type: "account", AfterID: "ent02"}, []string{"ent03", "ent04", "ent07"}},
		{"after id and limit", store.EntityFilter{TenantID: "tnt_a", Type: "account", AfterID: "ent02", Limit: 2}, []string{"ent03", "ent04"}},
		{"after id between rows", store.EntityFilter{TenantID: "tnt_a", Type: "account", AfterID: "ent05"}, []string{"ent07"}},
		{"after the last id", store.EntityFilter{TenantID: "tnt_a", Type: "account", AfterID: "ent07"}, nil},
		{"filter, after id and limit", store.EntityFilter{TenantID: "tnt_a", Type: "account", AfterID: "ent01", Limit: 2,
			Where: []store.SlotFilter{{Slot: "ix_s_1", Value: "open"}}}, []string{"ent03", "ent04"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.filter
			if f.Limit == 0 {
				f.Limit = 100
			}
			got, err := s.ListEntities(ctx, f)
			noErr(t, err, "ListEntities")
			if ids := entityIDs(got); !equalStrings(ids, tc.want) {
				t.Fatalf("ListEntities: got %v, want %v", ids, tc.want)
			}
			// Listed rows are whole rows.
			for _, e := range got {
				stored, err := s.GetEntity(ctx, e.TenantID, e.ID)
				noErr(t, err, "GetEntity "+e.ID)
				checkEntity(t, &e, *stored)
			}
		})
	}
}

func testEntityListKeysetPagination(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	idOf := func(n int) string { return fmt.Sprintf("ent%05d", n) }
	exists := map[int]bool{}
	create := func(n int, typ string) {
		t.Helper()
		createEntity(t, s, newEntity("tnt_a", idOf(n), typ))
		exists[n] = true
	}
	for n := 100; n <= 2000; n += 100 {
		create(n, "account")
	}
	// A row of another type in the middle must never show up.
	create(1050, "asset")

	want := map[string]bool{}
	for n := 100; n <= 2000; n += 100 {
		want[idOf(n)] = true
	}
	notWanted := map[string]bool{idOf(1050): true}

	const limit = 4
	var got []string
	after := ""
	for page := 0; ; page++ {
		if page > 50 {
			t.Fatal("pagination does not end")
		}
		rows, err := s.ListEntities(ctx, store.EntityFilter{TenantID: "tnt_a", Type: "account", AfterID: after, Limit: limit})
		noErr(t, err, "ListEntities")
		if len(rows) > limit {
			t.Fatalf("page %d: %d rows, limit %d", page, len(rows), limit)
		}
		if len(rows) == 0 {
			break
		}
		got = append(got, entityIDs(rows)...)
		after = rows[len(rows)-1].ID

		if page < 4 {
			// Between pages, insert one row behind the cursor (it must not
			// appear) and one just ahead of it (it must appear).
			var cur int
			_, _ = fmt.Sscanf(after, "ent%05d", &cur) // the suite wrote these ids
			behind := cur - 1
			for exists[behind] {
				behind--
			}
			ahead := cur + 1
			for exists[ahead] {
				ahead++
			}
			create(behind, "account")
			create(ahead, "account")
			notWanted[idOf(behind)] = true
			want[idOf(ahead)] = true
		}
	}

	if !slices.IsSorted(got) {
		t.Errorf("pages are not in id order: %v", got)
	}
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Errorf("id %s listed twice", id)
		}
		seen[id] = true
		if notWanted[id] {
			t.Errorf("id %s listed although it was inserted behind the cursor or has another type", id)
		}
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("id %s missing from the pages", id)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d ids, want %d: %v", len(got), len(want), got)
	}
}

func testEntityListInvalidSlot(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	e := newEntity("tnt_a", "ent01", "account")
	e.Slots.S[0] = ptr("open")
	createEntity(t, s, e)

	for _, slot := range []string{
		"", "id", "type", "data", "tenant_id", "ix_s_0", "ix_s_11", "ix_n_0", "ix_n_6", "ix_s_01",
		"IX_S_1", "ix_s_1 ", "ix_x_1", "ix_s_1 OR 1=1 --", "ix_s_1 = ix_s_1 OR ix_s_1",
	} {
		t.Run(fmt.Sprintf("%q", slot), func(t *testing.T) {
			rows, err := s.ListEntities(ctx, store.EntityFilter{
				TenantID: "tnt_a", Type: "account", Limit: 10,
				Where: []store.SlotFilter{{Slot: slot, Value: "open"}},
			})
			if err == nil {
				t.Fatalf("ListEntities with slot %q: got %d rows and no error, want an error", slot, len(rows))
			}
		})
	}

	// The store still answers.
	rows, err := s.ListEntities(ctx, store.EntityFilter{TenantID: "tnt_a", Type: "account", Limit: 10,
		Where: []store.SlotFilter{{Slot: "ix_s_1", Value: "open"}}})
	noErr(t, err, "ListEntities")
	if ids := entityIDs(rows); !equalStrings(ids, []string{"ent01"}) {
		t.Errorf("ListEntities: got %v, want [ent01]", ids)
	}
}

func testEntitySetState(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	e := newEntity("tnt_a", "ent01", "account")
	e.Metadata = raw(`{"m":1}`)
	e.Slots.S[0] = ptr("open")
	createEntity(t, s, e)
	want := *e
	want.Version = 1

	for _, state := range []json.RawMessage{raw(`{"balance":5}`), raw(`{"balance":7,"holds":[1,2]}`), nil} {
		noErr(t, s.SetEntityState(ctx, "tnt_a", "ent01", state), "SetEntityState")
		got, err := s.GetEntity(ctx, "tnt_a", "ent01")
		noErr(t, err, "GetEntity")
		checkJSON(t, "state", got.State, state)
		if got.Version != 1 {
			t.Errorf("version after SetEntityState: got %d, want 1", got.Version)
		}
		// Everything else is untouched (updated_at aside, which the store
		// may or may not bump).
		w := want
		w.State, w.UpdatedAt = state, got.UpdatedAt
		checkEntity(t, got, w)
	}
}

// testEntityConcurrentGets: reads made at the same time (as a store may
// answer together) each get their own entity, a missing one ErrNotFound,
// and never another tenant's entity of the same id; entities read twice
// at once are separate copies.
func testEntityConcurrentGets(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	const n = 40
	for i := range n {
		e := newEntity("tnt_a", fmt.Sprintf("ent_%03d", i), "account")
		e.Slots.S[0] = ptr(fmt.Sprintf("a%d", i))
		createEntity(t, s, e)
		if i%2 == 0 {
			b := newEntity("tnt_b", fmt.Sprintf("ent_%03d", i), "asset")
			createEntity(t, s, b)
		}
	}
	type read struct {
		tenant, id string
		e          *store.Entity
		err        error
	}
	var reads []*read
	for round := range 3 {
		for i := range n + 5 { // ent_040..ent_044 do not exist
			id := fmt.Sprintf("ent_%03d", i)
			reads = append(reads, &read{tenant: "tnt_a", id: id})
			if round == 0 {
				reads = append(reads, &read{tenant: "tnt_b", id: id})
			}
		}
	}
	var wg sync.WaitGroup
	for _, r := range reads {
		wg.Go(func() { r.e, r.err = s.GetEntity(ctx, r.tenant, r.id) })
	}
	wg.Wait()
	seen := map[*store.Entity]bool{}
	for _, r := range reads {
		var i int
		if _, err := fmt.Sscanf(r.id, "ent_%d", &i); err != nil {
			t.Fatalf("read id %q: %v", r.id, err)
		}
		exists := i < n && (r.tenant == "tnt_a" || i%2 == 0)
		if !exists {
			wantErr(t, r.err, store.ErrNotFound, "GetEntity "+r.tenant+"/"+r.id)
			continue
		}
		noErr(t, r.err, "GetEntity "+r.tenant+"/"+r.id)
		want := newEntity(r.tenant, r.id, "asset")
		want.Version = 1
		if r.tenant == "tnt_a" {
			want.Type = "account"
			want.Slots.S[0] = ptr(fmt.Sprintf("a%d", i))
		}
		checkEntity(t, r.e, *want)
		if seen[r.e] {
			t.Errorf("GetEntity %s/%s: an entity returned to another call too", r.tenant, r.id)
		}
		seen[r.e] = true
	}
	// Changing what one call got leaves what the others got alone.
	var copies []*read
	for _, r := range reads {
		if r.tenant == "tnt_a" && r.id == "ent_001" {
			copies = append(copies, r)
		}
	}
	*copies[0].e.Slots.S[0] = "changed"
	copies[0].e.Data[0] = ' '
	for _, r := range copies[1:] {
		if *r.e.Slots.S[0] != "a1" || r.e.Data[0] != '{' {
			t.Errorf("GetEntity tnt_a/ent_001: copies share their slots or data")
		}
	}
}
