package webhook

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
)

// api is the gateway with the webhook service wired the way internal/host/app
// wires it (see README.md).
type api struct {
	e           *env
	reg         *prometheus.Registry
	srv         *gateway.Server
	admin, live string
}

func newAPI(t *testing.T, e *env) *api {
	t.Helper()
	// The webhook collectors get a registry of their own here: the
	// gateway's HTTP metrics can fail a scrape of a shared one (label
	// values aliasing fasthttp's reused buffers), which is the gateway's
	// to fix.
	reg := prometheus.NewRegistry()
	if err := e.svc.Register(reg); err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.New(gateway.Config{DocsURL: "https://docs.example.test"}, gateway.Deps{
		Platform: e.plat, Auth: auth.NewAuthenticator(e.st), Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.Mount(srv)
	a := &api{e: e, srv: srv, reg: reg}
	a.admin, _, err = auth.CreateKey(t.Context(), e.st, tenantA, auth.ModeAdmin, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a.live, _, err = auth.CreateKey(t.Context(), e.st, tenantA, auth.ModeLive, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type apiResponse struct {
	status int
	raw    []byte
	body   map[string]any
}

func (r apiResponse) data() map[string]any { d, _ := r.body["data"].(map[string]any); return d }

func (a *api) do(method, path, key string, body any) apiResponse {
	a.e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", key)
	resp, err := a.srv.App().Test(req, 30_000)
	if err != nil {
		a.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := apiResponse{status: resp.StatusCode, raw: raw}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

// The admin endpoints and webhook configs over HTTP: secrets shown once,
// validation problems, rotation, dead letters, replay, resume, and the
// metrics on /metrics.
func TestAdminAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite", func(int, *http.Request) (int, map[string]string, string) {
		return http.StatusNotFound, nil, "no such hook"
	})
	a := newAPI(t, e)
	e.start()

	if r := a.do("POST", "/v1/admin/webhooks/secrets", a.live, nil); r.status != http.StatusForbidden {
		t.Fatalf("live key: %d %s", r.status, r.raw)
	}
	r := a.do("POST", "/v1/admin/webhooks/secrets", a.admin, nil)
	ref, _ := r.data()["secret_ref"].(string)
	secret, _ := r.data()["secret"].(string)
	if r.status != http.StatusCreated || !strings.HasPrefix(ref, "webhook_secret_") || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("create secret: %d %s", r.status, r.raw)
	}

	// Validation problems name every field.
	r = a.do("POST", "/v1/configs", a.live, map[string]any{"type": "webhook", "scope_type": "galaxy",
		"settings": map[string]any{"url": "http://x", "secret_ref": "whsec_inline", "triggers": []any{"bad"},
			"retry": map[string]any{"max_attempts": 99, "timeout_seconds": 1}}})
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.raw), "validation-failed") {
		t.Fatalf("invalid config: %d %s", r.status, r.raw)
	}
	for _, f := range []string{"settings.url", "settings.secret_ref", "settings.triggers[0]", "settings.retry.max_attempts",
		"settings.retry.timeout_seconds", "scope_type"} {
		if !strings.Contains(string(r.raw), `"field":"`+f+`"`) {
			t.Errorf("problem does not name %s: %s", f, r.raw)
		}
	}

	r = a.do("POST", "/v1/configs", a.live, map[string]any{"type": "webhook", "name": "won", "scope_type": "campaign", "scope_id": "camp-1",
		"settings": map[string]any{"url": e.rc.url("/hook"), "secret_ref": ref, "triggers": []any{"outcome.deal_won"}}})
	if r.status != http.StatusCreated {
		t.Fatalf("create config: %d %s", r.status, r.raw)
	}
	cfgID, _ := r.data()["id"].(string)

	r = a.do("POST", "/v1/admin/webhooks/configs/"+cfgID+"/rotate-secret", a.admin, nil)
	newRef, _ := r.data()["secret_ref"].(string)
	newSecret, _ := r.data()["secret"].(string)
	if r.status != http.StatusCreated || newRef == ref || newSecret == "" || r.data()["previous_secret_ref"] != ref {
		t.Fatalf("rotate: %d %s", r.status, r.raw)
	}
	r = a.do("GET", "/v1/configs/"+cfgID, a.live, nil)
	if !strings.Contains(string(r.raw), newRef) || strings.Contains(string(r.raw), "whsec_") || r.data()["version"] != float64(2) {
		t.Fatalf("config after rotation: %s", r.raw)
	}
	if r := a.do("POST", "/v1/admin/webhooks/configs/cfg_nope/rotate-secret", a.admin, nil); r.status != http.StatusNotFound {
		t.Errorf("rotate unknown: %d", r.status)
	}

	// A 404 from the receiver is terminal: a dead letter.
	e.deal("deal-1")
	e.emit("deal-1", "deal_won", map[string]any{"campaign_id": "camp-1"})
	id := e.waitDeliveries(1)[0].DeliveryID
	e.waitRow(id, "dead", func(r *store.OutboxRow) bool { return r.Status == store.OutboxDead })

	r = a.do("GET", "/v1/admin/webhooks/dead-letters?limit=10", a.admin, nil)
	items, _ := r.data()["items"].([]any)
	if r.status != http.StatusOK || len(items) != 1 {
		t.Fatalf("dead letters: %d %s", r.status, r.raw)
	}
	item, _ := items[0].(map[string]any)
	for _, k := range []string{"dlq_message_id", "delivery_id", "triggered_fact_id", "webhook_config_id", "webhook_config_version", "url",
		"payload", "error", "attempts", "first_attempt_at", "last_attempt_at", "sent_to_dlq_at", "metadata"} {
		if _, ok := item[k]; !ok {
			t.Errorf("dead letter lacks %s: %v", k, item)
		}
	}
	if r := a.do("GET", "/v1/admin/webhooks/dead-letters?limit=0", a.admin, nil); r.status != http.StatusBadRequest {
		t.Errorf("limit=0: %d", r.status)
	}

	r = a.do("GET", "/v1/admin/webhooks/deliveries/"+id, a.admin, nil)
	if r.status != http.StatusOK || r.data()["status"] != "dead" || r.data()["webhook_config_id"] != cfgID {
		t.Fatalf("delivery: %d %s", r.status, r.raw)
	}
	if r := a.do("GET", "/v1/admin/webhooks/deliveries/del_nope", a.admin, nil); r.status != http.StatusNotFound {
		t.Errorf("unknown delivery: %d", r.status)
	}

	e.rc.setRespond(nil)
	r = a.do("POST", "/v1/admin/webhooks/dead-letters/"+id+"/replay", a.admin, nil)
	if r.status != http.StatusOK || r.data()["attempt"] != float64(1) || r.data()["status"] != "pending" {
		t.Fatalf("replay: %d %s", r.status, r.raw)
	}
	e.waitRow(id, "sent after replay", func(r *store.OutboxRow) bool { return r.Status == store.OutboxSent })
	if r := a.do("POST", "/v1/admin/webhooks/dead-letters/"+id+"/replay", a.admin, nil); r.status != http.StatusConflict {
		t.Errorf("replay of a sent delivery: %d", r.status)
	}
	if r := a.do("POST", "/v1/admin/webhooks/configs/"+cfgID+"/resume", a.admin, nil); r.status != http.StatusConflict {
		t.Errorf("resume of a config that is not paused: %d %s", r.status, r.raw)
	}
	// An archived config sends nothing: pausing it is refused.
	arch := e.createConfig(platform.ConfigInput{Settings: e.settings(nil)})
	if _, err := e.plat.ArchiveConfig(t.Context(), tenantA, arch.ID); err != nil {
		t.Fatal(err)
	}
	if r := a.do("POST", "/v1/admin/webhooks/configs/"+arch.ID+"/pause", a.admin, nil); r.status != http.StatusConflict || !strings.Contains(string(r.raw), "is archived") {
		t.Errorf("pause of an archived config: %d %s", r.status, r.raw)
	}

	// The contract's metrics, in the text format /metrics serves.
	e.svc.refreshDepths(t.Context())
	text := scrape(t, a.reg)
	for _, name := range []string{MetricTriggered + " 1", MetricSent + " 2", MetricSucceeded + " 1", MetricFailed + " 1", MetricDLQ + " 1",
		MetricDuration + "_bucket", MetricRetryAttempts + "_count 2", MetricPayloadSize + "_sum", MetricQueueDepth + " 0", MetricDLQDepth + " 0"} {
		if !strings.Contains(text, "\n"+name) {
			t.Errorf("/metrics lacks %q", name)
		}
	}
}

// scrape renders a registry in the Prometheus text format, as /metrics
// does.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("metrics: %d %s", w.Code, w.Body)
	}
	return w.Body.String()
}

// TestConfigTakesTheWebhookDocumentsNames: a webhook config may be written
// with the webhook document's field names (scope, applies_to, category
// logic) as well as the platform's (scope_type, scope_id); it reads back
// with both. Problems name the field as sent.
func TestConfigTakesTheWebhookDocumentsNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite", nil)
	a := newAPI(t, e)
	settings := map[string]any{"url": "https://hooks.example.com/in", "secret_ref": e.ref, "triggers": []any{"outcome.deal_won"}}
	r := a.do("POST", "/v1/configs", a.live, map[string]any{"type": "webhook", "name": "won", "category": "logic",
		"scope": "campaign", "applies_to": "camp-1", "settings": settings})
	if r.status != http.StatusCreated {
		t.Fatalf("create with the webhook document's names: %d %s", r.status, r.raw)
	}
	id, _ := r.data()["id"].(string)
	got := a.do("GET", "/v1/configs/"+id, a.live, nil).data()
	for k, want := range map[string]any{"scope": "campaign", "scope_type": "campaign", "applies_to": "camp-1", "scope_id": "camp-1", "category": "logic"} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (config %v)", k, got[k], want, got)
		}
	}
	// A config of another type carries none of the webhook's names.
	r = a.do("POST", "/v1/configs", a.live, map[string]any{"type": "pricing", "settings": map[string]any{}})
	for _, k := range []string{"scope", "applies_to", "category"} {
		if _, ok := r.data()[k]; ok || r.status != http.StatusCreated {
			t.Errorf("a pricing config: %d %s", r.status, r.raw)
		}
	}
	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"applies_to missing for a campaign", map[string]any{"scope": "campaign"}, "applies_to"},
		{"unknown scope", map[string]any{"scope": "galaxy"}, "scope"},
		{"both names, two values", map[string]any{"scope": "campaign", "scope_type": "asset", "applies_to": "camp-1"}, "scope"},
		{"another category", map[string]any{"category": "other"}, "category"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"type": "webhook", "settings": settings}
			maps.Copy(body, tc.body)
			r := a.do("POST", "/v1/configs", a.live, body)
			if r.status != http.StatusBadRequest || !strings.Contains(string(r.raw), `"field":"`+tc.field+`"`) {
				t.Errorf("%d %s, want a problem naming %s", r.status, r.raw, tc.field)
			}
		})
	}
}
