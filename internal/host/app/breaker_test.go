package app_test

import (
	"fmt"
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

// TestFrozenRedisProjectionQueryIsAPrompt503: a materialized projection
// query reads the cached state in Redis; with Redis frozen (connections
// open, nothing answered) it answers 503 within the state timeout instead
// of holding the request until the request's own deadline.
func TestFrozenRedisProjectionQueryIsAPrompt503(t *testing.T) {
	url := testutil.Redis(t)
	host := strings.TrimPrefix(url, "redis://")
	host = host[:strings.IndexByte(host, '/')]
	px := testutil.NewProxy(t, host)
	l := startLive(t, "sqlite", t.TempDir(), func(c *app.Config) {
		c.RedisURL, c.RateLimitFailOpen = strings.Replace(url, host, px.Addr(), 1), true
	})
	if code, body := l.call("POST", "/v1/configs", l.key, map[string]any{"type": "projection", "name": "deps", "settings": map[string]any{
		"source": "account", "factTypes": []string{"deposit"}, "timeWindow": "day", "materialize": true, "storageVersion": 2,
		"aggregations": []any{map[string]any{"field": "count", "function": "count"}}}}); code != 201 {
		t.Fatalf("create projection: %d %v", code, body)
	}
	query := map[string]any{"filters": map[string]any{"aggregate": true}}
	testutil.EventuallyNil(t, time.Minute, func() error {
		code, body := l.call("POST", "/v1/projections/deps/query", l.key, query)
		data, _ := body["data"].(map[string]any)
		if meta, _ := data["_meta"].(map[string]any); code != 200 || meta["ready"] != true {
			return fmt.Errorf("query before the freeze: %d %v", code, body)
		}
		return nil
	})
	px.Freeze()
	start := time.Now()
	code, body := l.call("POST", "/v1/projections/deps/query", l.key, query)
	took := time.Since(start)
	if code != 503 || !strings.Contains(str(body["detail"]), "Projection state is unavailable") {
		t.Fatalf("query with Redis frozen: %d %v", code, body)
	}
	if took > 10*time.Second {
		t.Errorf("the query with Redis frozen took %v", took)
	}
}
