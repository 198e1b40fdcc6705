package gateway_test

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// logLines takes the JSON lines logged since the last call.
func logLines(t *testing.T, logs *testutil.Logs) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.Take()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestRequestLogLine: every request leaves one JSON line with its id,
// method, route pattern, path, status, latency and tenant, and a 5xx its
// level and cause.
func TestRequestLogLine(t *testing.T) {
	st := teststore.Open(t, "sqlite")
	base, err := manifest.LoadDomainFile("../../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := manifest.ParseGateway("test.yaml", []byte(testGateway), base)
	if err != nil {
		t.Fatal(err)
	}
	p, err := platform.New(platform.Options{Store: st, Domain: manifest.MergeDomain(base, gw), Ledgers: ledger.Fallback{Static: ledger.Builtin()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	var logs testutil.Logs
	srv, err := gateway.New(gateway.Config{}, gateway.Deps{Platform: p, Auth: auth.NewAuthenticator(st),
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Routes: gw})
	if err != nil {
		t.Fatal(err)
	}
	srv.App().Get("/boom", func(*fiber.Ctx) error { panic("kaboom") })
	key, _, err := auth.CreateKey(t.Context(), st, "tenant-a", auth.ModeLive, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	send := func(path, key, rid string) {
		t.Helper()
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("X-API-Key", key)
		if rid != "" {
			r.Header.Set("X-Request-Id", rid)
		}
		resp, err := srv.App().Test(r, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	for _, tc := range []struct {
		path, key, rid string
		want           map[string]any
	}{
		{"/v1/accounts/acct-9", key, "trace-1", map[string]any{"level": "INFO", "msg": "request", "client_request_id": "trace-1",
			"method": "GET", "route": "/v1/accounts/:id", "path": "/v1/accounts/acct-9", "status": 404.0, "tenant": "tenant-a"}},
		{"/v1/accounts/acct-9", "", "", map[string]any{"level": "INFO", "route": "/v1/accounts/:id", "status": 401.0}},
		{"/v1/entities/x?entity_type=account", key, "", map[string]any{"route": "/v1/entities/:id", "status": 404.0, "tenant": "tenant-a"}},
		{"/nowhere", "", "", map[string]any{"route": "unmatched", "status": 404.0}},
		{"/boom", "", "", map[string]any{"level": "ERROR", "status": 500.0}},
	} {
		send(tc.path, tc.key, tc.rid)
		lines := logLines(t, &logs)
		if len(lines) != 1 {
			t.Fatalf("GET %s: %d log lines, want 1", tc.path, len(lines))
		}
		l := lines[0]
		for k, v := range tc.want {
			if l[k] != v {
				t.Errorf("GET %s: %s = %v, want %v (line %v)", tc.path, k, l[k], v, l)
			}
		}
		for _, k := range []string{"time", "request_id", "method", "route", "path", "status", "latency_ms"} {
			if _, ok := l[k]; !ok {
				t.Errorf("GET %s: no %s in %v", tc.path, k, l)
			}
		}
		if _, ok := l["tenant"]; ok != (tc.key != "" && l["status"] != 401.0) {
			t.Errorf("GET %s: tenant present %v in %v", tc.path, ok, l)
		}
		// The request id is the server's, also when the client sent one.
		if rid, _ := l["request_id"].(string); !strings.HasPrefix(rid, "req_") {
			t.Errorf("GET %s: request_id %q, want a generated req_ id", tc.path, rid)
		}
		if _, ok := l["client_request_id"]; ok != (tc.rid != "") {
			t.Errorf("GET %s: client_request_id present %v in %v", tc.path, ok, l)
		}
		if tc.path == "/boom" && !strings.Contains(l["err"].(string), "kaboom") {
			t.Errorf("the 500's line has no cause: %v", l)
		}
	}
}
