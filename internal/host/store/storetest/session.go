package storetest

import (
	"reflect"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var sessionTests = []test{
	{"CreateGetDelete", testSessionCreateGetDelete},
	{"Expiry", testSessionExpiry},
	{"Duplicate", testSessionDuplicate},
}

func newSession(id string, expires int64) *store.Session {
	return &store.Session{ID: id, TenantID: "tnt_a", Mode: "admin", KeyID: "key01",
		Key: []byte{0, 1, 2, 0xff}, CSRF: "csrf-" + id, CreatedAt: t0, ExpiresAt: expires}
}

func testSessionCreateGetDelete(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	se := newSession("sess01", t0+1000)
	noErr(t, s.CreateSession(ctx, se), "CreateSession")
	got, err := s.GetSession(ctx, "sess01", t0)
	noErr(t, err, "GetSession")
	if !reflect.DeepEqual(*got, *se) {
		t.Errorf("session:\n got %+v\nwant %+v", *got, *se)
	}
	_, err = s.GetSession(ctx, "sess02", t0)
	wantErr(t, err, store.ErrNotFound, "GetSession of an unknown id")
	noErr(t, s.DeleteSession(ctx, "sess01"), "DeleteSession")
	_, err = s.GetSession(ctx, "sess01", t0)
	wantErr(t, err, store.ErrNotFound, "GetSession after DeleteSession")
	noErr(t, s.DeleteSession(ctx, "sess01"), "DeleteSession again")
}

func testSessionExpiry(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	noErr(t, s.CreateSession(ctx, newSession("old", t0+10)), "CreateSession old")
	noErr(t, s.CreateSession(ctx, newSession("new", t0+1000)), "CreateSession new")
	_, err := s.GetSession(ctx, "old", t0+10)
	wantErr(t, err, store.ErrNotFound, "GetSession at its expiry")
	n, err := s.PurgeSessions(ctx, t0+10)
	noErr(t, err, "PurgeSessions")
	if n != 1 {
		t.Errorf("PurgeSessions = %d, want 1", n)
	}
	if _, err := s.GetSession(ctx, "new", t0+10); err != nil {
		t.Errorf("GetSession of a live session after a purge: %v", err)
	}
}

func testSessionDuplicate(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	noErr(t, s.CreateSession(ctx, newSession("dup", t0+1000)), "CreateSession")
	wantErr(t, s.CreateSession(ctx, newSession("dup", t0+1000)), store.ErrAlreadyExists, "CreateSession of a taken id")
}
