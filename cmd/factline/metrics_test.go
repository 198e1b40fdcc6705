package main_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestMetricsAddrServesMetricsApartFromTheAPI(t *testing.T) {
	t.Parallel()
	metrics := freeAddr(t)
	s := startServer(t, "--data-dir", t.TempDir(), "--metrics-addr", metrics, "--pprof")
	defer s.stop(t)
	tests := []struct {
		name, url   string
		code        int
		contentType string
		contains    string
	}{
		{"metrics on the metrics port", "http://" + metrics + "/metrics", 200, "text/plain", "factline_"},
		{"pprof on the metrics port", "http://" + metrics + "/debug/pprof/", 200, "text/html", "goroutine"},
		{"no metrics on the API port", s.base + "/metrics", 404, "application/problem+json", `"status":404`},
		{"no pprof on the API port", s.base + "/debug/pprof/", 404, "application/problem+json", `"status":404`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ct, body := get(t, tt.url)
			if code != tt.code || !strings.HasPrefix(ct, tt.contentType) || !strings.Contains(body, tt.contains) {
				t.Fatalf("GET %s: %d %s\n%.300s", tt.url, code, ct, body)
			}
		})
	}
}

func TestMetricsOnTheAPIPortByDefault(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--data-dir", t.TempDir())
	defer s.stop(t)
	if code, ct, body := get(t, s.base+"/metrics"); code != 200 || !strings.HasPrefix(ct, "text/plain") || !strings.Contains(body, "factline_") {
		t.Fatalf("GET /metrics: %d %s\n%.300s", code, ct, body)
	}
}

func TestPprofNeedsMetricsAddr(t *testing.T) {
	t.Parallel()
	_, errOut, code := cli(t, nil, "serve", "--pprof", "--data-dir", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "--pprof requires --metrics-addr") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestDatabaseMaxConnsRejectsNegative(t *testing.T) {
	t.Parallel()
	_, errOut, code := cli(t, nil, "serve", "--database-max-conns", "-1", "--data-dir", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "--database-max-conns") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestPluginInstances: --plugin-instances (here through its environment
// variable) sets how many instances each loaded plugin keeps, as the
// operator's plugin list shows; a fresh start shows no calls.
func TestPluginInstances(t *testing.T) {
	t.Parallel()
	dir := newStore(t)
	op, stderr, code := cli(t, nil, "keys", "create", "--tenant", "operator", "--mode", "admin", "--data-dir", dir)
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, stderr)
	}
	s := startProcessEnv(t, []string{"FACTLINE_PLUGIN_INSTANCES=3"}, []string{"serve", "--addr", "127.0.0.1:0",
		"--domain", domainManifest(t), "--plugins-dir", pluginsDir, "--plugin-cache-dir", pluginCache, "--data-dir", dir})
	defer s.stop(t)
	s.waitReady(t)
	code, body := s.do(t, "GET", "/v1/admin/plugins", strings.TrimSpace(op), "")
	items, _ := data(body)["items"].([]any)
	if code != 200 || len(items) == 0 {
		t.Fatalf("GET /v1/admin/plugins: %d %v", code, body)
	}
	for _, it := range items {
		p, _ := it.(map[string]any)
		stats, _ := p["stats"].(map[string]any)
		if stats["instances"] != float64(3) {
			t.Errorf("%v %v: %v instances, want 3", p["name"], p["version"], stats["instances"])
		}
		// The host's check before a version serves is not a call of its.
		if stats["calls"] != float64(0) || stats["errors"] != float64(0) {
			t.Errorf("%v %v on a fresh start: %v calls, %v errors; want none", p["name"], p["version"], stats["calls"], stats["errors"])
		}
	}
}
