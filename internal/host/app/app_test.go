package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/testutil"
)

// Tests that start their own app on their own store, Redis database and
// temporary directory run in parallel (t.Parallel). Tests that bound a
// wall-clock time, a Redis call's 100 ms, the process's memory, or a
// plugin poll's timing run alone, so that other tests' load cannot break
// them.
func TestMain(m *testing.M) { testutil.Main(m) }

const routes = `name: t
version: "1"
routes:
  - {path: /v1/accounts/:id, method: GET, entity: account, action: get, rateLimit: {rpm: 1000, scope: tenant}}
`

func deadPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func newApp(t *testing.T, cfg app.Config) (*app.App, string) {
	t.Helper()
	dir := t.TempDir()
	man := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(man, []byte(routes), 0o644)
	cfg.DataDir, cfg.Manifest = dir, man
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	key, _, err := auth.CreateKey(context.Background(), a.Store, "t1", "live", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return a, key
}

func get(t *testing.T, a *app.App, path, key string) (int, map[string]any) {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	if key != "" {
		r.Header.Set("X-API-Key", key)
	}
	resp, err := a.Server.App().Test(r, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// TestRedisDownFailOpen: with Redis unreachable and fail-open, limited
// routes still serve and /health reports the degraded limiter.
func TestRedisDownFailOpen(t *testing.T) {
	a, key := newApp(t, app.Config{RedisURL: "redis://" + deadPort(t) + "/0", RateLimitFailOpen: true})
	if code, _ := get(t, a, "/v1/accounts/nope", key); code != 404 {
		t.Fatalf("fail-open route answered %d, want the action's 404", code)
	}
	// Nothing was counted: no allowance left is claimed.
	req := httptest.NewRequest("GET", "/v1/accounts/nope", nil)
	req.Header.Set("X-API-Key", key)
	resp, err := a.Server.App().Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("RateLimit-Limit") == "" || resp.Header.Get("RateLimit-Remaining") != "" || resp.Header.Get("RateLimit-Reset") != "" {
		t.Fatalf("rate limit headers while failing open: %v", resp.Header)
	}
	code, body := get(t, a, "/health", "")
	data, _ := body["data"].(map[string]any)
	checks, _ := data["checks"].(map[string]any)
	rl, _ := checks["ratelimit"].(map[string]any)
	if code != 200 || data["status"] != "degraded" || rl["status"] != "failing" {
		t.Fatalf("health %d %v", code, body)
	}
}

// TestRedisDownFailClosed: fail-closed refuses limited routes with 503 and
// /health says so.
func TestRedisDownFailClosed(t *testing.T) {
	a, key := newApp(t, app.Config{RedisURL: "redis://" + deadPort(t) + "/0", RateLimitFailOpen: false})
	code, body := get(t, a, "/v1/accounts/nope", key)
	if code != 503 || body["type"] != "https://docs.factline.dev/errors/unavailable" {
		t.Fatalf("fail-closed route answered %d %v", code, body)
	}
	if code, _ := get(t, a, "/health", ""); code != 503 {
		t.Fatalf("health %d, want 503", code)
	}
}

func TestRedisUp(t *testing.T) {
	a, key := newApp(t, app.Config{RedisURL: testutil.Redis(t)})
	code, _ := get(t, a, "/v1/accounts/nope", key)
	if code != 404 {
		t.Fatalf("route %d", code)
	}
	code, body := get(t, a, "/health", "")
	data, _ := body["data"].(map[string]any)
	checks, _ := data["checks"].(map[string]any)
	rl, _ := checks["ratelimit"].(map[string]any)
	if code != 200 || rl["status"] != "ok" {
		t.Fatalf("health %d %v", code, body)
	}
}

// TestReadyFollowsPluginLoading: while the start-up plugin load is under
// way /ready is a 503 naming what is loading and /health a 200; once it
// has finished /ready is a 200.
func TestReadyFollowsPluginLoading(t *testing.T) {
	t.Parallel()
	a, _ := newApp(t, app.Config{})
	if !a.Plugins.Loaded() {
		code, body := get(t, a, "/ready", "")
		// Loading may finish between the two reads; only a 503 must say why.
		if code == 503 && !strings.HasPrefix(fmt.Sprint(body["detail"]), "Not ready: loading plugins") {
			t.Errorf("/ready while loading: %d %v", code, body)
		} else if code != 503 && code != 200 {
			t.Errorf("/ready while loading: %d %v", code, body)
		}
		if code, body := get(t, a, "/health", ""); code != 200 {
			t.Errorf("/health while loading: %d %v", code, body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := a.Plugins.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, a, "/ready", ""); code != 200 {
		t.Fatalf("/ready after loading: %d %v", code, body)
	}
}
