package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var configTests = []test{
	{"CreateAndGet", testConfigCreateAndGet},
	{"CreateDuplicate", testConfigCreateDuplicate},
	{"PutVersion", testConfigPutVersion},
	{"PutVersionConflict", testConfigPutVersionConflict},
	{"Archive", testConfigArchive},
	{"List", testConfigList},
	{"ListActiveByType", testConfigListActiveByType},
	{"ConcurrentPutVersion", testConfigConcurrentPutVersion},
}

// newConfig returns version 1 of a config ready for CreateConfig.
func newConfig(tenant, id, typ string) *store.Config {
	return &store.Config{
		TenantID:    tenant,
		ID:          id,
		Type:        typ,
		Name:        "name of " + id,
		ScopeType:   "tenant",
		Settings:    raw(`{"id":"` + id + `"}`),
		Status:      store.ConfigActive,
		EffectiveAt: t0,
		CreatedAt:   t0,
	}
}

// nextVersion returns the version after prev, created at createdAt.
func nextVersion(prev store.Config, createdAt int64, settings string) *store.Config {
	c := prev
	c.Version = prev.Version + 1
	c.Settings = raw(settings)
	c.Status = store.ConfigActive
	c.SupersededAt = nil
	c.EffectiveAt = createdAt
	c.CreatedAt = createdAt
	return &c
}

func createConfig(t *testing.T, s store.Store, c *store.Config) store.Config {
	t.Helper()
	noErr(t, s.CreateConfig(t.Context(), c), "CreateConfig "+c.ID)
	stored := *c
	stored.Version = 1
	return stored
}

func testConfigCreateAndGet(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	c := newConfig("tnt_a", "cfg_1", "webhook")
	c.ScopeType, c.ScopeID = "account", "ent_123"
	c.Settings = raw(`{"url":"https://example.test/hook","events":["deposit.*"],"retry":{"max":5,"backoff":1.5}}`)
	c.EffectiveAt = t0 + 5
	want := createConfig(t, s, c)
	if want.Version != 1 {
		t.Fatalf("version: %d", want.Version)
	}

	got, err := s.GetConfig(ctx, "tnt_a", "cfg_1")
	noErr(t, err, "GetConfig")
	checkConfig(t, got, want)
	got, err = s.GetConfigVersion(ctx, "tnt_a", "cfg_1", 1)
	noErr(t, err, "GetConfigVersion 1")
	checkConfig(t, got, want)
	all, err := s.ListConfigVersions(ctx, "tnt_a", "cfg_1")
	noErr(t, err, "ListConfigVersions")
	if len(all) != 1 {
		t.Fatalf("ListConfigVersions: got %d versions, want 1", len(all))
	}
	checkConfig(t, &all[0], want)

	// Optional strings stay empty.
	bare := &store.Config{TenantID: "tnt_a", ID: "cfg_2", Type: "projection", Settings: raw(`{}`),
		Status: store.ConfigActive, EffectiveAt: t0, CreatedAt: t0}
	wantBare := createConfig(t, s, bare)
	got, err = s.GetConfig(ctx, "tnt_a", "cfg_2")
	noErr(t, err, "GetConfig bare")
	checkConfig(t, got, wantBare)

	_, err = s.GetConfig(ctx, "tnt_a", "cfg_none")
	wantErr(t, err, store.ErrNotFound, "GetConfig of a missing id")
	_, err = s.GetConfigVersion(ctx, "tnt_a", "cfg_1", 2)
	wantErr(t, err, store.ErrNotFound, "GetConfigVersion of a missing version")
	_, err = s.ListConfigVersions(ctx, "tnt_a", "cfg_none")
	wantErr(t, err, store.ErrNotFound, "ListConfigVersions of a missing id")
}

func testConfigCreateDuplicate(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	want := createConfig(t, s, newConfig("tnt_a", "cfg_1", "webhook"))

	dup := newConfig("tnt_a", "cfg_1", "projection")
	dup.Settings = raw(`{"other":true}`)
	wantErr(t, s.CreateConfig(ctx, dup), store.ErrAlreadyExists, "CreateConfig with a taken id")
	got, err := s.GetConfig(ctx, "tnt_a", "cfg_1")
	noErr(t, err, "GetConfig")
	checkConfig(t, got, want)

	// A config with later versions is still taken.
	noErr(t, s.PutConfigVersion(ctx, nextVersion(want, t0+10, `{"v":2}`)), "PutConfigVersion")
	wantErr(t, s.CreateConfig(ctx, newConfig("tnt_a", "cfg_1", "webhook")), store.ErrAlreadyExists,
		"CreateConfig of a config at version 2")

	// Ids are scoped by tenant.
	createConfig(t, s, newConfig("tnt_b", "cfg_1", "webhook"))
}

func testConfigPutVersion(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	v1 := createConfig(t, s, newConfig("tnt_a", "cfg_1", "webhook"))

	v2 := nextVersion(v1, t0+100, `{"url":"v2"}`)
	v2.Name, v2.ScopeType, v2.ScopeID = "renamed", "account", "ent_9"
	noErr(t, s.PutConfigVersion(ctx, v2), "PutConfigVersion v2")
	v3 := nextVersion(*v2, t0+200, `{"url":"v3"}`)
	noErr(t, s.PutConfigVersion(ctx, v3), "PutConfigVersion v3")

	wantV1 := v1
	wantV1.SupersededAt = ptr(t0 + 100)
	wantV2 := *v2
	wantV2.SupersededAt = ptr(t0 + 200)
	wantV3 := *v3

	got, err := s.GetConfig(ctx, "tnt_a", "cfg_1")
	noErr(t, err, "GetConfig")
	checkConfig(t, got, wantV3)
	for _, w := range []store.Config{wantV1, wantV2, wantV3} {
		got, err := s.GetConfigVersion(ctx, "tnt_a", "cfg_1", w.Version)
		noErr(t, err, fmt.Sprintf("GetConfigVersion %d", w.Version))
		checkConfig(t, got, w)
	}
	all, err := s.ListConfigVersions(ctx, "tnt_a", "cfg_1")
	noErr(t, err, "ListConfigVersions")
	if len(all) != 3 {
		t.Fatalf("ListConfigVersions: got %d versions, want 3", len(all))
	}
	for i, w := range []store.Config{wantV1, wantV2, wantV3} {
		checkConfig(t, &all[i], w)
	}
}

func testConfigPutVersionConflict(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	v1 := createConfig(t, s, newConfig("tnt_a", "cfg_1", "webhook"))
	v2 := nextVersion(v1, t0+100, `{"v":2}`)
	noErr(t, s.PutConfigVersion(ctx, v2), "PutConfigVersion v2")

	for _, version := range []int64{1, 2, 4, 10} {
		t.Run(fmt.Sprintf("version=%d", version), func(t *testing.T) {
			c := nextVersion(*v2, t0+500, `{"lost":true}`)
			c.Version = version
			wantErr(t, s.PutConfigVersion(ctx, c), store.ErrVersionConflict, "PutConfigVersion with a wrong version")
			all, err := s.ListConfigVersions(ctx, "tnt_a", "cfg_1")
			noErr(t, err, "ListConfigVersions")
			if len(all) != 2 {
				t.Fatalf("versions after the conflict: got %d, want 2", len(all))
			}
			wantV1 := v1
			wantV1.SupersededAt = ptr(t0 + 100)
			checkConfig(t, &all[0], wantV1)
			checkConfig(t, &all[1], *v2)
		})
	}

	missing := newConfig("tnt_a", "cfg_none", "webhook")
	missing.Version = 2
	wantErr(t, s.PutConfigVersion(ctx, missing), store.ErrNotFound, "PutConfigVersion of a missing config")
}

func testConfigArchive(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	v1 := createConfig(t, s, newConfig("tnt_a", "cfg_1", "webhook"))
	v2 := nextVersion(v1, t0+100, `{"v":2}`)
	noErr(t, s.PutConfigVersion(ctx, v2), "PutConfigVersion v2")

	archived, err := s.ArchiveConfig(ctx, "tnt_a", "cfg_1", t0+300)
	noErr(t, err, "ArchiveConfig")
	wantV2 := *v2
	wantV2.Status = store.ConfigArchived
	checkConfig(t, archived, wantV2)

	got, err := s.GetConfig(ctx, "tnt_a", "cfg_1")
	noErr(t, err, "GetConfig")
	checkConfig(t, got, wantV2)

	// Versions stay readable; only the latest is archived.
	wantV1 := v1
	wantV1.SupersededAt = ptr(t0 + 100)
	all, err := s.ListConfigVersions(ctx, "tnt_a", "cfg_1")
	noErr(t, err, "ListConfigVersions")
	if len(all) != 2 {
		t.Fatalf("ListConfigVersions: got %d versions, want 2", len(all))
	}
	checkConfig(t, &all[0], wantV1)
	checkConfig(t, &all[1], wantV2)
	got, err = s.GetConfigVersion(ctx, "tnt_a", "cfg_1", 1)
	noErr(t, err, "GetConfigVersion 1")
	checkConfig(t, got, wantV1)

	// No new version on an archived config.
	wantErr(t, s.PutConfigVersion(ctx, nextVersion(*v2, t0+400, `{"v":3}`)), store.ErrArchived, "PutConfigVersion after archive")
	all, err = s.ListConfigVersions(ctx, "tnt_a", "cfg_1")
	noErr(t, err, "ListConfigVersions")
	if len(all) != 2 {
		t.Errorf("versions after a refused put: got %d, want 2", len(all))
	}

	// Archiving again returns it unchanged.
	again, err := s.ArchiveConfig(ctx, "tnt_a", "cfg_1", t0+500)
	noErr(t, err, "ArchiveConfig again")
	checkConfig(t, again, wantV2)

	_, err = s.ArchiveConfig(ctx, "tnt_a", "cfg_none", t0)
	wantErr(t, err, store.ErrNotFound, "ArchiveConfig of a missing config")
}

func testConfigList(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	// cfg01 webhook v3 active; cfg02 projection v1 active; cfg03 webhook v2
	// archived; cfg04 webhook v1 active; cfg05 projection v1 archived;
	// tnt_b cfg06 webhook active.
	latest := map[string]store.Config{}
	mk := func(tenant, id, typ string, versions int, archive bool) {
		t.Helper()
		c := createConfig(t, s, newConfig(tenant, id, typ))
		for v := 2; v <= versions; v++ {
			n := nextVersion(c, t0+int64(v*10), fmt.Sprintf(`{"v":%d}`, v))
			noErr(t, s.PutConfigVersion(ctx, n), "PutConfigVersion")
			c = *n
		}
		if archive {
			a, err := s.ArchiveConfig(ctx, tenant, id, t0+1000)
			noErr(t, err, "ArchiveConfig")
			c = *a
		}
		latest[tenant+"/"+id] = c
	}
	mk("tnt_a", "cfg04", "webhook", 1, false)
	mk("tnt_a", "cfg01", "webhook", 3, false)
	mk("tnt_b", "cfg06", "webhook", 1, false)
	mk("tnt_a", "cfg03", "webhook", 2, true)
	mk("tnt_a", "cfg05", "projection", 1, true)
	mk("tnt_a", "cfg02", "projection", 1, false)

	tests := []struct {
		name   string
		filter store.ConfigFilter
		want   []string
	}{
		{"all", store.ConfigFilter{TenantID: "tnt_a"}, []string{"tnt_a/cfg01", "tnt_a/cfg02", "tnt_a/cfg03", "tnt_a/cfg04", "tnt_a/cfg05"}},
		{"type", store.ConfigFilter{TenantID: "tnt_a", Type: "webhook"}, []string{"tnt_a/cfg01", "tnt_a/cfg03", "tnt_a/cfg04"}},
		{"status active", store.ConfigFilter{TenantID: "tnt_a", Status: store.ConfigActive}, []string{"tnt_a/cfg01", "tnt_a/cfg02", "tnt_a/cfg04"}},
		{"status archived", store.ConfigFilter{TenantID: "tnt_a", Status: store.ConfigArchived}, []string{"tnt_a/cfg03", "tnt_a/cfg05"}},
		{"type and status", store.ConfigFilter{TenantID: "tnt_a", Type: "projection", Status: store.ConfigActive}, []string{"tnt_a/cfg02"}},
		{"unknown type", store.ConfigFilter{TenantID: "tnt_a", Type: "nope"}, nil},
		{"other tenant", store.ConfigFilter{TenantID: "tnt_b"}, []string{"tnt_b/cfg06"}},
		{"no such tenant", store.ConfigFilter{TenantID: "tnt_z"}, nil},
		{"limit", store.ConfigFilter{TenantID: "tnt_a", Limit: 2}, []string{"tnt_a/cfg01", "tnt_a/cfg02"}},
		{"after id", store.ConfigFilter{TenantID: "tnt_a", AfterID: "cfg02"}, []string{"tnt_a/cfg03", "tnt_a/cfg04", "tnt_a/cfg05"}},
		{"after id, type, limit", store.ConfigFilter{TenantID: "tnt_a", Type: "webhook", AfterID: "cfg01", Limit: 1}, []string{"tnt_a/cfg03"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.filter
			if f.Limit == 0 {
				f.Limit = 100
			}
			got, err := s.ListConfigs(ctx, f)
			noErr(t, err, "ListConfigs")
			if ids := configIDs(got); !equalStrings(ids, tc.want) {
				t.Fatalf("ListConfigs: got %v, want %v", ids, tc.want)
			}
			// Latest versions only, whole rows.
			for _, c := range got {
				checkConfig(t, &c, latest[c.TenantID+"/"+c.ID])
			}
		})
	}
}

func testConfigListActiveByType(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	got, err := s.ListActiveConfigsByType(ctx, "webhook")
	noErr(t, err, "ListActiveConfigsByType on an empty store")
	if len(got) != 0 {
		t.Errorf("empty store: got %v", configIDs(got))
	}

	latest := map[string]store.Config{}
	add := func(tenant, id, typ string) store.Config {
		t.Helper()
		c := createConfig(t, s, newConfig(tenant, id, typ))
		latest[tenant+"/"+id] = c
		return c
	}
	add("tnt_b", "cfg01", "webhook")
	c := add("tnt_a", "cfg02", "webhook")
	v2 := nextVersion(c, t0+50, `{"v":2}`)
	noErr(t, s.PutConfigVersion(ctx, v2), "PutConfigVersion")
	latest["tnt_a/cfg02"] = *v2
	add("tnt_a", "cfg01", "webhook")
	add("tnt_c", "cfg03", "projection")
	add("tnt_c", "cfg04", "webhook")
	_, err = s.ArchiveConfig(ctx, "tnt_c", "cfg04", t0+60)
	noErr(t, err, "ArchiveConfig")

	got, err = s.ListActiveConfigsByType(ctx, "webhook")
	noErr(t, err, "ListActiveConfigsByType")
	want := []string{"tnt_a/cfg01", "tnt_a/cfg02", "tnt_b/cfg01"}
	if ids := configIDs(got); !equalStrings(ids, want) {
		t.Fatalf("ListActiveConfigsByType: got %v, want %v", ids, want)
	}
	for _, c := range got {
		checkConfig(t, &c, latest[c.TenantID+"/"+c.ID])
	}
	got, err = s.ListActiveConfigsByType(ctx, "projection")
	noErr(t, err, "ListActiveConfigsByType projection")
	if ids := configIDs(got); !equalStrings(ids, []string{"tnt_c/cfg03"}) {
		t.Errorf("projection: got %v", ids)
	}
}

func testConfigConcurrentPutVersion(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	v1 := createConfig(t, s, newConfig("tnt_a", "cfg_1", "webhook"))

	const n = 10
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = s.PutConfigVersion(ctx, nextVersion(v1, t0+100+int64(i), fmt.Sprintf(`{"writer":%d}`, i)))
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Errorf("writers %d and %d both created version 2", winner, i)
			}
			winner = i
		case !errors.Is(err, store.ErrVersionConflict):
			t.Errorf("writer %d: got %v, want nil or ErrVersionConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer created version 2")
	}
	all, err := s.ListConfigVersions(ctx, "tnt_a", "cfg_1")
	noErr(t, err, "ListConfigVersions")
	if len(all) != 2 {
		t.Fatalf("versions: got %d, want 2", len(all))
	}
	checkJSON(t, "version 2 settings", all[1].Settings, raw(fmt.Sprintf(`{"writer":%d}`, winner)))
	if sup := all[0].SupersededAt; sup == nil || *sup != t0+100+int64(winner) {
		t.Errorf("version 1 superseded_at: got %v, want the winner's created_at %d", sup, t0+100+int64(winner))
	}
}
