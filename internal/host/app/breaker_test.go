package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/testutil"
)

// TestFrozenRedisHealthWhileBreakerOpen: with Redis frozen, limited routes
// keep answering promptly (fail-open), and once the limiter has stopped
// asking Redis /health reports redis down, without waiting on it either.
func TestFrozenRedisHealthWhileBreakerOpen(t *testing.T) {
	url := testutil.Redis(t)
	host := strings.TrimPrefix(url, "redis://")
	host = host[:strings.IndexByte(host, '/')]
	px := testutil.NewProxy(t, host)
	a, key := newApp(t, app.Config{RedisURL: strings.Replace(url, host, px.Addr(), 1), RateLimitFailOpen: true})
	if code, _ := get(t, a, "/v1/accounts/nope", key); code != 404 {
		t.Fatalf("route answered %d before the freeze", code)
	}
	px.Freeze()
	for i := range 20 {
		start := time.Now()
		if code, _ := get(t, a, "/v1/accounts/nope", key); code != 404 {
			t.Fatalf("request %d with Redis frozen answered %d, want the action's 404", i, code)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("request %d with Redis frozen took %v", i, took)
		}
	}
	start := time.Now()
	code, body := get(t, a, "/health", "")
	took := time.Since(start)
	data, _ := body["data"].(map[string]any)
	deps, _ := data["dependencies"].(map[string]any)
	checks, _ := data["checks"].(map[string]any)
	rl, _ := checks["ratelimit"].(map[string]any)
	if code != 200 || data["status"] != "degraded" || deps["redis"] != "down" || deps["database"] != "up" ||
		!strings.Contains(str(rl["detail"]), "circuit breaker open") {
		t.Fatalf("health %d %v", code, body)
	}
	if took > 100*time.Millisecond {
		t.Errorf("/health took %v with the breaker open", took)
	}
}

func str(v any) string { s, _ := v.(string); return s }
