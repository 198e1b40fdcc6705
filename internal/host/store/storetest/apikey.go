package storetest

import (
	"reflect"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var apiKeyTests = []test{
	{"CreateAndGet", testAPIKeyCreateAndGet},
	{"Duplicate", testAPIKeyDuplicate},
	{"Revoke", testAPIKeyRevoke},
	{"List", testAPIKeyList},
}

func newAPIKey(tenant, id string) *store.APIKey {
	return &store.APIKey{
		ID:        id,
		TenantID:  tenant,
		Mode:      "live",
		Name:      "key " + id,
		Prefix:    "fl_live_" + id[len(id)-2:],
		Hash:      "hash-of-" + id,
		CreatedAt: t0,
	}
}

func checkAPIKey(t *testing.T, got *store.APIKey, want store.APIKey) {
	t.Helper()
	if got == nil {
		t.Fatalf("api key %s: got nil", want.ID)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("api key %s:\n got %+v\nwant %+v", want.ID, *got, want)
	}
}

func testAPIKeyCreateAndGet(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	k := newAPIKey("tnt_a", "key01")
	noErr(t, s.CreateAPIKey(ctx, k), "CreateAPIKey")
	got, err := s.GetAPIKeyByHash(ctx, k.Hash)
	noErr(t, err, "GetAPIKeyByHash")
	checkAPIKey(t, got, *k)

	bare := &store.APIKey{ID: "key02", TenantID: "tnt_a", Mode: "admin", Hash: "h2", CreatedAt: t0 + 1}
	noErr(t, s.CreateAPIKey(ctx, bare), "CreateAPIKey bare")
	got, err = s.GetAPIKeyByHash(ctx, "h2")
	noErr(t, err, "GetAPIKeyByHash bare")
	checkAPIKey(t, got, *bare)

	_, err = s.GetAPIKeyByHash(ctx, "hash-unknown")
	wantErr(t, err, store.ErrNotFound, "GetAPIKeyByHash of an unknown hash")
}

func testAPIKeyDuplicate(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	k := newAPIKey("tnt_a", "key01")
	noErr(t, s.CreateAPIKey(ctx, k), "CreateAPIKey")

	sameHash := newAPIKey("tnt_b", "key02")
	sameHash.Hash = k.Hash
	wantErr(t, s.CreateAPIKey(ctx, sameHash), store.ErrAlreadyExists, "CreateAPIKey with a taken hash")
	sameID := newAPIKey("tnt_a", "key01")
	sameID.Hash = "another-hash"
	wantErr(t, s.CreateAPIKey(ctx, sameID), store.ErrAlreadyExists, "CreateAPIKey with a taken id")

	got, err := s.GetAPIKeyByHash(ctx, k.Hash)
	noErr(t, err, "GetAPIKeyByHash")
	checkAPIKey(t, got, *k)
	_, err = s.GetAPIKeyByHash(ctx, "another-hash")
	wantErr(t, err, store.ErrNotFound, "GetAPIKeyByHash of the refused key")
	keys, err := s.ListAPIKeys(ctx, "")
	noErr(t, err, "ListAPIKeys")
	if len(keys) != 1 {
		t.Errorf("ListAPIKeys: got %d keys, want 1", len(keys))
	}
}

func testAPIKeyRevoke(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	k := newAPIKey("tnt_a", "key01")
	other := newAPIKey("tnt_a", "key02")
	noErr(t, s.CreateAPIKey(ctx, k), "CreateAPIKey")
	noErr(t, s.CreateAPIKey(ctx, other), "CreateAPIKey")

	noErr(t, s.RevokeAPIKey(ctx, "key01", t0+500), "RevokeAPIKey")
	got, err := s.GetAPIKeyByHash(ctx, k.Hash)
	noErr(t, err, "GetAPIKeyByHash of a revoked key")
	want := *k
	want.RevokedAt = ptr(t0 + 500)
	checkAPIKey(t, got, want)

	got, err = s.GetAPIKeyByHash(ctx, other.Hash)
	noErr(t, err, "GetAPIKeyByHash")
	checkAPIKey(t, got, *other)

	wantErr(t, s.RevokeAPIKey(ctx, "key_none", t0), store.ErrNotFound, "RevokeAPIKey of an unknown id")
}

func testAPIKeyList(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()

	keys, err := s.ListAPIKeys(ctx, "")
	noErr(t, err, "ListAPIKeys on an empty store")
	if len(keys) != 0 {
		t.Errorf("empty store: got %d keys", len(keys))
	}
	byID := map[string]store.APIKey{}
	for _, k := range []*store.APIKey{
		newAPIKey("tnt_b", "key03"), newAPIKey("tnt_a", "key02"), newAPIKey("tnt_a", "key04"), newAPIKey("tnt_b", "key01"),
	} {
		noErr(t, s.CreateAPIKey(ctx, k), "CreateAPIKey "+k.ID)
		byID[k.ID] = *k
	}
	noErr(t, s.RevokeAPIKey(ctx, "key04", t0+9), "RevokeAPIKey")
	k4 := byID["key04"]
	k4.RevokedAt = ptr(t0 + 9)
	byID["key04"] = k4

	tests := []struct {
		tenant string
		want   []string
	}{
		{"", []string{"key01", "key02", "key03", "key04"}},
		{"tnt_a", []string{"key02", "key04"}},
		{"tnt_b", []string{"key01", "key03"}},
		{"tnt_z", nil},
	}
	for _, tc := range tests {
		t.Run("tenant="+tc.tenant, func(t *testing.T) {
			got, err := s.ListAPIKeys(ctx, tc.tenant)
			noErr(t, err, "ListAPIKeys")
			var ids []string
			for _, k := range got {
				ids = append(ids, k.ID)
				checkAPIKey(t, &k, byID[k.ID])
			}
			if !equalStrings(ids, tc.want) {
				t.Errorf("ListAPIKeys(%q): got %v, want %v", tc.tenant, ids, tc.want)
			}
		})
	}
}
