package storetest

import (
	"bytes"
	"sync"
	"testing"

	"github.com/factline/factline/internal/host/store"
)

var idempotencyTests = []test{
	{"BeginCompleteReplay", testIdemBeginCompleteReplay},
	{"Expired", testIdemExpired},
	{"AbandonedTakeover", testIdemAbandonedTakeover},
	{"ConcurrentBegin", testIdemConcurrentBegin},
	{"Release", testIdemRelease},
	{"Purge", testIdemPurge},
}

// Idempotency times: a record begun at now lives until now+ttl and is locked
// until now+lock.
const (
	idemLock = 30_000
	idemTTL  = 86_400_000
)

func begin(key store.IdemKey, hash string, now int64) store.IdemBegin {
	return store.IdemBegin{IdemKey: key, RequestHash: hash, Now: now, LockedUntil: now + idemLock, ExpiresAt: now + idemTTL}
}

// mustBegin calls BeginIdempotency and checks whether the key was claimed.
func mustBegin(t *testing.T, s store.Store, b store.IdemBegin, wantClaimed bool) *store.IdemRecord {
	t.Helper()
	rec, claimed, err := s.BeginIdempotency(t.Context(), b)
	noErr(t, err, "BeginIdempotency")
	if claimed != wantClaimed {
		t.Fatalf("BeginIdempotency(%+v): claimed %v, want %v (record %+v)", b.IdemKey, claimed, wantClaimed, rec)
	}
	if claimed && rec != nil {
		t.Fatalf("BeginIdempotency claimed the key but returned a record %+v", rec)
	}
	if !claimed && rec == nil {
		t.Fatal("BeginIdempotency did not claim the key and returned no record")
	}
	return rec
}

func checkIdem(t *testing.T, got *store.IdemRecord, want store.IdemRecord) {
	t.Helper()
	checkJSON(t, "idempotency headers", got.Headers, want.Headers)
	if !bytes.Equal(got.Body, want.Body) {
		t.Errorf("idempotency body: got %q, want %q", got.Body, want.Body)
	}
	g, w := *got, want
	g.Headers, w.Headers, g.Body, w.Body = nil, nil, nil, nil
	if g.IdemKey != w.IdemKey || g.RequestHash != w.RequestHash || g.State != w.State || g.StatusCode != w.StatusCode ||
		g.LockedUntil != w.LockedUntil || g.CreatedAt != w.CreatedAt || g.ExpiresAt != w.ExpiresAt {
		t.Errorf("idempotency record:\n got %+v\nwant %+v", g, w)
	}
}

func testIdemBeginCompleteReplay(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	key := store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/entities", Key: "k-1"}

	first := begin(key, "h1", t0)
	mustBegin(t, s, first, true)

	// While in flight, the second caller sees the in-flight record.
	rec := mustBegin(t, s, begin(key, "h1", t0+1000), false)
	inFlight := store.IdemRecord{IdemKey: key, RequestHash: "h1", State: store.IdemInFlight,
		LockedUntil: first.LockedUntil, CreatedAt: t0, ExpiresAt: first.ExpiresAt}
	checkIdem(t, rec, inFlight)

	// The same key in another scope is another record.
	mustBegin(t, s, begin(store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/facts", Key: "k-1"}, "h9", t0), true)

	body := []byte(`{"id":"ent_1","ok":true}`)
	headers := raw(`{"Location":"/v1/entities/ent_1","Content-Type":"application/json"}`)
	noErr(t, s.CompleteIdempotency(ctx, key, 201, body, headers), "CompleteIdempotency")

	done := inFlight
	done.State, done.StatusCode, done.Body, done.Headers = store.IdemDone, 201, body, headers
	rec = mustBegin(t, s, begin(key, "h1", t0+2000), false)
	checkIdem(t, rec, done)
	// A different request hash still gets the stored record; comparing the
	// hashes is the caller's business.
	rec = mustBegin(t, s, begin(key, "other", t0+3000), false)
	checkIdem(t, rec, done)
	// A done record stays after LockedUntil, until it expires.
	rec = mustBegin(t, s, begin(key, "h1", first.LockedUntil+1000), false)
	checkIdem(t, rec, done)

	// Completing without headers stores none.
	key2 := store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/entities", Key: "k-2"}
	mustBegin(t, s, begin(key2, "h2", t0), true)
	noErr(t, s.CompleteIdempotency(ctx, key2, 409, []byte("conflict"), nil), "CompleteIdempotency without headers")
	rec = mustBegin(t, s, begin(key2, "h2", t0+1), false)
	checkIdem(t, rec, store.IdemRecord{IdemKey: key2, RequestHash: "h2", State: store.IdemDone, StatusCode: 409,
		Body: []byte("conflict"), LockedUntil: t0 + idemLock, CreatedAt: t0, ExpiresAt: t0 + idemTTL})

	missing := store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/entities", Key: "k-none"}
	wantErr(t, s.CompleteIdempotency(ctx, missing, 200, nil, nil), store.ErrNotFound, "CompleteIdempotency of a missing key")
}

func testIdemExpired(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	key := store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/entities", Key: "k-1"}

	mustBegin(t, s, begin(key, "h1", t0), true)
	noErr(t, s.CompleteIdempotency(ctx, key, 200, []byte("old"), nil), "CompleteIdempotency")

	// Past ExpiresAt the record is ignored and the key can be claimed anew.
	later := t0 + idemTTL + 1000
	mustBegin(t, s, begin(key, "h2", later), true)
	rec := mustBegin(t, s, begin(key, "h2", later+1), false)
	checkIdem(t, rec, store.IdemRecord{IdemKey: key, RequestHash: "h2", State: store.IdemInFlight,
		LockedUntil: later + idemLock, CreatedAt: later, ExpiresAt: later + idemTTL})

	// An expired in-flight record too.
	key2 := store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/entities", Key: "k-2"}
	b := begin(key2, "h1", t0)
	b.LockedUntil = b.ExpiresAt + 1000 // locked beyond expiry: expiry still wins
	mustBegin(t, s, b, true)
	mustBegin(t, s, begin(key2, "h3", b.ExpiresAt+100), true)
}

func testIdemAbandonedTakeover(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	key := store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/entities", Key: "k-1"}

	first := begin(key, "h1", t0)
	mustBegin(t, s, first, true)
	// Before LockedUntil the in-flight record holds the key.
	mustBegin(t, s, begin(key, "h1", first.LockedUntil-1000), false)
	// Past LockedUntil (still before ExpiresAt) it is abandoned.
	now := first.LockedUntil + 1000
	mustBegin(t, s, begin(key, "h2", now), true)
	rec := mustBegin(t, s, begin(key, "h2", now+1), false)
	checkIdem(t, rec, store.IdemRecord{IdemKey: key, RequestHash: "h2", State: store.IdemInFlight,
		LockedUntil: now + idemLock, CreatedAt: now, ExpiresAt: now + idemTTL})
}

func testIdemConcurrentBegin(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	key := store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/facts", Key: "race"}

	const n = 20
	claimed := make([]bool, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rec, ok, err := s.BeginIdempotency(ctx, begin(key, "h", t0+int64(i)))
			if err != nil {
				t.Errorf("BeginIdempotency %d: %v", i, err)
				return
			}
			if !ok && (rec == nil || rec.State != store.IdemInFlight) {
				t.Errorf("BeginIdempotency %d: not claimed, record %+v", i, rec)
			}
			claimed[i] = ok
		}()
	}
	close(start)
	wg.Wait()
	winners := 0
	for _, ok := range claimed {
		if ok {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d of %d concurrent BeginIdempotency calls claimed the key, want exactly 1", winners, n)
	}
}

func testIdemRelease(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	key := store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/entities", Key: "k-1"}

	first := begin(key, "h1", t0)
	mustBegin(t, s, first, true)
	// A release naming another claim (one that has since been taken over)
	// leaves the record.
	release := func(lockedUntil int64, want bool, what string) {
		t.Helper()
		released, err := s.ReleaseIdempotency(ctx, key, lockedUntil)
		noErr(t, err, what)
		if released != want {
			t.Errorf("%s: released %v, want %v", what, released, want)
		}
	}
	release(first.LockedUntil+1, false, "ReleaseIdempotency of another claim")
	mustBegin(t, s, begin(key, "h1", t0+1), false)
	release(first.LockedUntil, true, "ReleaseIdempotency")
	// Released: the key is free again at once, well before LockedUntil.
	second := begin(key, "h2", t0+1)
	mustBegin(t, s, second, true)
	rec := mustBegin(t, s, begin(key, "h2", t0+2), false)
	if rec.RequestHash != "h2" || rec.State != store.IdemInFlight {
		t.Errorf("record after release and begin: %+v", rec)
	}
	// A claim taken over after its lock passed: the first claimant's late
	// release leaves the new claim alone.
	third := begin(key, "h2", second.LockedUntil)
	mustBegin(t, s, third, true)
	release(second.LockedUntil, false, "late ReleaseIdempotency of a taken-over claim")
	if rec := mustBegin(t, s, begin(key, "h2", third.Now+1), false); rec.State != store.IdemInFlight || rec.LockedUntil != third.LockedUntil {
		t.Errorf("the new claim after the old claimant's release: %+v", rec)
	}
}

func testIdemPurge(t *testing.T, open Factory) {
	s := setup(t, open, store.Hooks{})
	ctx := t.Context()
	k := func(name string) store.IdemKey {
		return store.IdemKey{TenantID: "tnt_a", Scope: "POST /v1/entities", Key: name}
	}
	// Three records expire at t0+idemTTL, t0+1000+idemTTL, t0+2000+idemTTL.
	mustBegin(t, s, begin(k("old-done"), "h", t0), true)
	noErr(t, s.CompleteIdempotency(ctx, k("old-done"), 200, []byte("x"), nil), "CompleteIdempotency")
	mustBegin(t, s, begin(k("old-inflight"), "h", t0+1000), true)
	mustBegin(t, s, begin(k("fresh"), "h", t0+2000), true)

	n, err := s.PurgeIdempotency(ctx, t0+idemTTL-500)
	noErr(t, err, "PurgeIdempotency before any expiry")
	if n != 0 {
		t.Errorf("purge before any expiry removed %d records", n)
	}
	n, err = s.PurgeIdempotency(ctx, t0+1500+idemTTL)
	noErr(t, err, "PurgeIdempotency")
	if n != 2 {
		t.Errorf("purge removed %d records, want 2", n)
	}
	n, err = s.PurgeIdempotency(ctx, t0+1500+idemTTL)
	noErr(t, err, "PurgeIdempotency again")
	if n != 0 {
		t.Errorf("second purge removed %d records, want 0", n)
	}
	// The fresh one is still there (checked before it expires).
	mustBegin(t, s, begin(k("fresh"), "h", t0+2500), false)
	// The purged ones are gone: a begin at a time before their old expiry
	// claims them.
	mustBegin(t, s, begin(k("old-done"), "h", t0+3000), true)
	mustBegin(t, s, begin(k("old-inflight"), "h", t0+3000), true)
}
