package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/sdk/webhookverify"
)

func TestSecretKeyLoading(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	k1, err := LoadSecretKey("", dir)
	if err != nil || len(k1) != 32 {
		t.Fatalf("first load: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, SecretKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	k2, err := LoadSecretKey("", dir)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second load gave another key: %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, SecretKeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecretKey("", dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a readable key file: %v", err)
	}
	raw := bytes.Repeat([]byte{7}, 32)
	for _, enc := range []string{hex.EncodeToString(raw), base64.StdEncoding.EncodeToString(raw), base64.RawURLEncoding.EncodeToString(raw)} {
		k, err := LoadSecretKey(enc, dir) // a configured key wins over the file
		if err != nil || !bytes.Equal(k, raw) {
			t.Errorf("key %q: %v", enc, err)
		}
	}
	for _, bad := range []string{"short", hex.EncodeToString(raw[:16]), base64.StdEncoding.EncodeToString(append(raw, 1))} {
		if _, err := ParseSecretKey(bad); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
}

func TestSecretsEncryptedAtRest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite", nil)
	ctx := t.Context()
	if !strings.HasPrefix(e.secret, "whsec_") || !strings.HasPrefix(e.ref, "webhook_secret_") || !secretRefRe.MatchString(e.ref) {
		t.Fatalf("secret %q ref %q", e.secret, e.ref)
	}
	rec, err := e.st.GetWebhookSecret(ctx, tenantA, e.ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{e.secret, strings.TrimPrefix(e.secret, "whsec_")} {
		if bytes.Contains(rec.Ciphertext, []byte(part)) {
			t.Fatal("the stored row holds the secret in the clear")
		}
	}
	if got, err := e.svc.secrets.get(ctx, tenantA, e.ref); err != nil || got != e.secret {
		t.Fatalf("decrypt: %q, %v", got, err)
	}
	// Another tenant cannot use the reference.
	if _, err := e.svc.secrets.get(ctx, "tenant-b", e.ref); err != errSecretNotFound {
		t.Errorf("other tenant: %v", err)
	}
	// The ciphertext is bound to its reference.
	moved := &store.WebhookSecret{TenantID: tenantA, Ref: "webhook_secret_moved", Ciphertext: rec.Ciphertext, KeyID: rec.KeyID, CreatedAt: 1}
	if err := e.st.CreateWebhookSecret(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.secrets.get(ctx, tenantA, moved.Ref); err == nil || !strings.Contains(err.Error(), "does not decrypt") {
		t.Errorf("a ciphertext moved to another reference: %v", err)
	}
	// A process with another key says so.
	other, err := New(Options{Store: e.st, Logger: quietLogger(), DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.secrets.get(ctx, tenantA, e.ref); err == nil || !strings.Contains(err.Error(), "FACTLINE_SECRET_KEY") {
		t.Errorf("another key: %v", err)
	}
}

// TestProcessWithAnotherSecretKeyIsRefused: processes sharing a database
// without a shared key each make a key file of their own. One whose key is
// not the database's fails its start check (naming FACTLINE_SECRET_KEY),
// and one that started before the first secret existed cannot write a
// secret under its key (503), so no secret is ever stored that another
// process cannot read.
func TestProcessWithAnotherSecretKeyIsRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		ctx := t.Context()
		st := teststore.Open(t, backend)
		open := func(dataDir string) *Service {
			s, err := New(Options{Store: st, Logger: quietLogger(), DataDir: dataDir})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		dirA := t.TempDir()
		a, b := open(dirA), open(t.TempDir())
		// An empty database: both may start.
		for name, s := range map[string]*Service{"a": a, "b": b} {
			if err := s.CheckSecretKey(ctx); err != nil {
				t.Fatalf("%s on an empty database: %v", name, err)
			}
		}
		sec, err := a.CreateSecret(ctx, tenantA)
		if err != nil {
			t.Fatal(err)
		}
		// b cannot sign with a's secret, so it refuses a config naming it
		// (it used to log a warning and accept it).
		in := &platform.ConfigInput{Type: ConfigType, Settings: map[string]any{"url": "https://hooks.example.com/x",
			"secret_ref": sec.SecretRef, "triggers": []any{"outcome.deal_won"}}}
		errs := b.checkConfig(ctx, tenantA, in, true)
		if len(errs) != 1 || errs[0].Field != "settings.secret_ref" || !strings.Contains(errs[0].Message, "FACTLINE_SECRET_KEY") {
			t.Fatalf("config naming another key's secret: %v", errs)
		}
		if errs := a.checkConfig(ctx, tenantA, in, true); len(errs) != 0 {
			t.Fatalf("the same config through a: %v", errs)
		}
		// b started before a's secret: it may not write one of its own.
		_, err = b.CreateSecret(ctx, "tenant-b")
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Kind.Status != http.StatusServiceUnavailable || !strings.Contains(pe.Detail, "FACTLINE_SECRET_KEY") {
			t.Fatalf("secret through a process with another key: %v, want a 503 naming FACTLINE_SECRET_KEY", err)
		}
		// A process starting now with another key is refused.
		err = open(t.TempDir()).CheckSecretKey(ctx)
		if !errors.Is(err, store.ErrSecretKeyMismatch) || !strings.Contains(err.Error(), "FACTLINE_SECRET_KEY") {
			t.Fatalf("start check with another key: %v", err)
		}
		// The same key (the key file's, given as FACTLINE_SECRET_KEY) passes.
		key, err := os.ReadFile(filepath.Join(dirA, SecretKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		same, err := New(Options{Store: st, Logger: quietLogger(), SecretKey: string(key)})
		if err != nil {
			t.Fatal(err)
		}
		if err := same.CheckSecretKey(ctx); err != nil {
			t.Fatalf("start check with the database's key: %v", err)
		}
		if _, err := same.CreateSecret(ctx, "tenant-b"); err != nil {
			t.Fatalf("secret with the database's key: %v", err)
		}
	})
}

// Rotation: a new secret under a new reference and a new config version;
// deliveries pinned to the old version keep the old secret, which expires
// after 7 days.
func TestSecretRotation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, func(n int, _ *http.Request) (int, map[string]string, string) {
			if n == 1 {
				return http.StatusServiceUnavailable, nil, ""
			}
			return http.StatusOK, nil, "ok"
		})
		ctx := t.Context()
		cfg := e.createConfig(platform.ConfigInput{Settings: e.settings(map[string]any{"retry": map[string]any{"backoff_base_seconds": 600}})})
		e.start()
		e.deal("deal-1")
		e.emit("deal-1", "deal_won", nil)
		old := e.waitDeliveries(1)[0].DeliveryID
		e.waitRow(old, "attempt 2 scheduled", func(r *store.OutboxRow) bool { return r.Attempt == 2 })

		rot, err := e.svc.RotateSecret(ctx, tenantA, cfg.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rot.SecretRef == e.ref || rot.Secret == e.secret || rot.PreviousSecretRef != e.ref || rot.Config.Version != 2 ||
			rot.PreviousSecretExpiresAt == nil || *rot.PreviousSecretExpiresAt != clockStart.Add(7*24*time.Hour).UnixMilli() ||
			len(rot.PreviousSecretUsedBy) != 0 || !bytes.Contains(rot.Config.Settings, []byte(rot.SecretRef)) {
			t.Fatalf("rotation %+v", rot)
		}
		if bytes.Contains(rot.Config.Settings, []byte("whsec_")) {
			t.Fatal("the config holds a secret")
		}
		// A new fact is delivered under version 2 with the new secret.
		e.emit("deal-1", "deal_won", nil)
		hits := e.waitHits(2)
		h := hits[1]
		if h.header.Get(HeaderConfigVersion) != "2" {
			t.Fatalf("new delivery on version %s", h.header.Get(HeaderConfigVersion))
		}
		if _, err := webhookverify.Verify(h.header, h.body, e.clock.Now(), 0, []byte(rot.Secret)); err != nil {
			t.Errorf("new secret: %v", err)
		}
		// The retry of the version-1 delivery still signs with the old one.
		e.clock.Set(time.UnixMilli(e.delivery(old).NextAttemptAt))
		hits = e.waitHits(3)
		h = hits[2]
		if h.header.Get(HeaderDeliveryID) != old || h.header.Get(HeaderConfigVersion) != "1" {
			t.Fatalf("third request %s v%s", h.header.Get(HeaderDeliveryID), h.header.Get(HeaderConfigVersion))
		}
		if _, err := webhookverify.Verify(h.header, h.body, e.clock.Now(), time.Hour, []byte(e.secret)); err != nil {
			t.Errorf("old secret: %v", err)
		}

		// Seven days later the old secret is gone: a version-1 delivery
		// still pending then fails terminally.
		e.rc.setRespond(func(int, *http.Request) (int, map[string]string, string) {
			return http.StatusServiceUnavailable, nil, ""
		})
		e.clock.Set(clockStart.Add(7*24*time.Hour - time.Minute))
		v1 := *cfg
		v1.Version = 1
		cc, err := compile(&v1)
		if err != nil {
			t.Fatal(err)
		}
		f := e.emit("deal-1", "deal_won", nil)
		it, err := e.svc.matcher.delivery(f, cc, nil, "outcome.deal_won", subjects{}, e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.st.AppendFacts(ctx, []store.Append{it})
		if err != nil || res[0].Err != nil {
			t.Fatalf("append: %v %v", err, res)
		}
		id := it.Outbox.DeliveryID
		row := e.waitRow(id, "attempt 2 of the late v1 delivery", func(r *store.OutboxRow) bool { return r.Attempt == 2 })
		e.clock.Set(time.UnixMilli(row.NextAttemptAt).Add(time.Minute))
		e.waitRow(id, "dead", func(r *store.OutboxRow) bool { return r.Status == store.OutboxDead })
		recs := checkInvariants(t, e.st, tenantA, nil)[id]
		if last := recs[len(recs)-1]; last.str("error_code") != CodeSecretNotFound || last.str("error_type") != ErrorTerminal {
			t.Errorf("after expiry: %v", last.data)
		}
		// Config validation refuses the expired reference now.
		_, err = e.plat.UpdateConfig(ctx, tenantA, cfg.ID, platform.ConfigInput{Settings: e.settings(nil)})
		var pe *problem.Error
		if !errors.As(err, &pe) || len(pe.Errors) != 1 || pe.Errors[0].Field != "settings.secret_ref" {
			t.Errorf("expired secret_ref: %v", err)
		}
	})
}

// TestRotationKeepsASharedSecret: rotating the secret of one config does
// not expire the old secret while other active configs of the tenant
// still reference it (they would fail every delivery once it expired);
// the rotation says which configs keep it.
func TestRotationKeepsASharedSecret(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	ctx := t.Context()
	rotated := e.createConfig(platform.ConfigInput{Settings: e.settings(nil)})
	other := e.createConfig(platform.ConfigInput{Settings: e.settings(map[string]any{"triggers": []any{"outcome.deal_lost"}})})
	rot, err := e.svc.RotateSecret(ctx, tenantA, rotated.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rot.PreviousSecretExpiresAt != nil || len(rot.PreviousSecretUsedBy) != 1 || rot.PreviousSecretUsedBy[0] != other.ID {
		t.Fatalf("rotation of a shared secret: expires %v, used by %v; want no expiry, used by %s", rot.PreviousSecretExpiresAt, rot.PreviousSecretUsedBy, other.ID)
	}
	// Long after the rotation, the other config's secret still signs.
	e.clock.Set(clockStart.Add(8 * 24 * time.Hour))
	if _, err := e.plat.UpdateConfig(ctx, tenantA, other.ID, platform.ConfigInput{Settings: e.settings(map[string]any{"triggers": []any{"outcome.deal_lost"}})}); err != nil {
		t.Fatalf("the other config's secret after 8 days: %v", err)
	}
	// Once the last config using it rotates too, it expires.
	rot, err = e.svc.RotateSecret(ctx, tenantA, other.ID)
	if err != nil || rot.PreviousSecretExpiresAt == nil || len(rot.PreviousSecretUsedBy) != 0 {
		t.Fatalf("rotation of the last user: %+v, %v", rot, err)
	}
}
