package app_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/testutil"
	"github.com/factline/factline/sdk/conformance"
)

// isolationDomain puts a deliberately broken fixture plugin of the
// conformance kit (which serve entity type "thing") beside the real account
// ledger.
const isolationDomain = `
name: isolation
version: "1"
entities:
  thing: {ledger: %s, fields: {}, facts: [%s]}
`

// fixture builds a plugin of the conformance kit's testdata and
// precompiles it for the apps of the test binary.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	return moduleFrom(t, filepath.Join("../../../sdk/conformance/testdata", name))
}

// moduleFrom builds the plugin whose source is in dir and compiles it
// into the tests' compilation cache.
func moduleFrom(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := conformance.Build(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	precompile(t, b)
	return b
}

// rssBytes is the process's resident memory once garbage is collected and
// returned to the system, so that it measures what is held rather than how
// far the collector's pacing let garbage pile up, which depends on what ran
// before in this process.
func rssBytes(t *testing.T) int64 {
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	var size, rss int64
	fmt.Sscan(string(b), &size, &rss)
	return rss * int64(os.Getpagesize())
}

// TestMisbehavingPluginsFailOnlyTheirOwnRequests: a guest that loops
// forever gets a 504 within its deadline, one that allocates without bound
// traps at its memory cap (500) and one that panics gets a 500, while
// requests to the account ledger keep succeeding and the host's memory
// stays bounded.
func TestMisbehavingPluginsFailOnlyTheirOwnRequests(t *testing.T) {
	for _, tc := range []struct {
		fixture, fact, path string
		status              int
		slug                string
		repeat              int // calls until the failure shows (the hog needs to fill its cap)
	}{
		{"loop", "spun", "/spin", 504, "timeout", 1},
		{"panics", "never", "/explode", 500, "internal", 1},
		{"hog", "hoarded", "/hoard", 500, "internal", 400},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			dir := t.TempDir()
			domain := filepath.Join(dir, "domain.yaml")
			os.WriteFile(domain, []byte(fmt.Sprintf(isolationDomain, tc.fixture, tc.fact)), 0o644)
			mods := map[string][]byte{"account": repoPlugins(t)["account"], tc.fixture: fixture(t, tc.fixture)}
			l := startLive(t, "sqlite", dir, func(c *app.Config) {
				c.Domains, c.BuiltinPlugins = []string{domain}, mods
				c.PluginTimeout = 200 * time.Millisecond
				c.PluginMemoryMiB = 32
				c.PluginInstances = 0 // the default pool, 2 per GOMAXPROCS
			})
			createAccount(l, "acct-1")
			if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "thing", "id": "t1"}); code != 201 {
				t.Fatalf("create thing: %d %v", code, body)
			}
			rssBefore := rssBytes(t)
			deposits := startLoad(2, 201, func() int {
				return l.status("POST", "/v1/entities/acct-1/deposit", map[string]any{"amount": 1})
			})
			defer deposits.Stop()
			for round := 0; round < 3; round++ {
				failed := false
				for i := 0; i < tc.repeat && !failed; i++ {
					start := time.Now()
					code, body := l.call("POST", "/v1/entities/t1"+tc.path, l.key, map[string]any{})
					took := time.Since(start)
					switch {
					case code == tc.status && strings.HasSuffix(fmt.Sprint(body["type"]), "/"+tc.slug),
						// A hog may instead thrash its collector under the
						// cap until the deadline stops it.
						tc.fixture == "hog" && code == 504:
						failed = true
						if took > 3*time.Second {
							t.Errorf("the failing call took %v", took)
						}
					case tc.repeat > 1 && code < 300:
					default:
						t.Fatalf("%s: %d %v, want %d %s", tc.path, code, body, tc.status, tc.slug)
					}
				}
				if !failed {
					t.Fatalf("round %d: %s never failed", round, tc.path)
				}
			}
			// At least one deposit answers while the plugin is failing.
			testutil.Eventually(t, 30*time.Second, "a deposit beside the failing plugin", func() bool {
				return deposits.ok.Load()+deposits.failed.Load() > 0
			})
			deposits.Stop()
			if deposits.ok.Load() == 0 || deposits.failed.Load() != 0 {
				t.Fatalf("deposits beside the %s plugin: %d ok, %d failed (%v)", tc.fixture, deposits.ok.Load(), deposits.failed.Load(), deposits.Failures())
			}
			// The hog holds at most its pool's instances at the cap (4 x
			// 32 MiB on 2 cores); the bound leaves room for the race
			// detector's shadow of the instances it replaced.
			grown := rssBytes(t) - rssBefore
			if grown > 1<<30 {
				t.Fatalf("host memory grew by %d MiB", grown>>20)
			}
			t.Logf("%d deposits succeeded beside %s; host RSS grew by %d MiB", deposits.ok.Load(), tc.fixture, grown>>20)
		})
	}
}

// TestHotSwapUnderLoad: a ledger route under load while the plugin is
// replaced ten times: no request fails, and afterwards every request runs
// the new version.
func TestHotSwapUnderLoad(t *testing.T) {
	t.Parallel()
	// The deadline is generous: this test is about the swap, and the race
	// detector and a busy machine slow every call down.
	l := startLive(t, "sqlite", t.TempDir(), func(c *app.Config) {
		c.PluginTimeout = 2 * time.Second
		c.PluginInstances = 0 // the default pool: versions swap under calls side by side
	})
	v1 := repoPlugins(t)["account"]
	v2 := buildVersion(t, "../../../plugins/account", "2.0.0")
	createAccount(l, "acct-1")
	if code, _ := l.call("POST", "/v1/entities/acct-1/deposit", l.key, map[string]any{"amount": 1}); code != 201 {
		t.Fatal("deposit")
	}
	// Compile v2 once before the load, as an operator's first upload
	// would; the swaps under load then load from the compilation cache.
	for _, m := range [][]byte{v2, v1} {
		if code, body := l.call("PUT", "/v1/admin/plugins/account", l.op, m); code != 201 {
			t.Fatalf("warm-up install: %d %v", code, body)
		}
	}
	ld := startLoad(4, 200, func() int { return l.status("GET", "/v1/entities/acct-1/budget", nil) })
	defer ld.Stop()
	for i := 0; i < 10; i++ {
		module, want := v2, "2.0.0"
		if i%2 == 1 {
			module, want = v1, "1.0.0"
		}
		code, body := l.call("PUT", "/v1/admin/plugins/account", l.op, module)
		if code != 201 || dataOf(body)["version"] != want {
			ld.Stop()
			t.Fatalf("swap %d: %d %v", i, code, body)
		}
		// Requests reach each version before the next swap.
		after := ld.ok.Load() + 20
		testutil.Eventually(t, 30*time.Second, "requests on the new version", func() bool { return ld.ok.Load() >= after || ld.failed.Load() > 0 })
	}
	ld.Stop()
	rate := ld.Rate()
	t.Logf("%d requests (%.0f/s) during 10 swaps, %d failed", ld.ok.Load(), rate, ld.failed.Load())
	if ld.failed.Load() != 0 {
		t.Fatalf("%d requests failed during the swaps: %v", ld.failed.Load(), ld.Failures())
	}
	if rate < 200 && !testutil.Race {
		t.Errorf("load was %.0f requests/s, want at least 200", rate)
	}
	// The last swap installed 1.0.0; every request after it runs on it.
	calls := func() float64 {
		_, body := l.call("GET", "/v1/admin/plugins", l.op, nil)
		for _, it := range dataOf(body)["items"].([]any) {
			m := it.(map[string]any)
			if m["name"] == "account" {
				if m["version"] != "1.0.0" {
					t.Fatalf("current version %v", m["version"])
				}
				n, _ := m["stats"].(map[string]any)["calls"].(interface{ Float64() (float64, error) }).Float64()
				return n
			}
		}
		t.Fatal("account not listed")
		return 0
	}
	before := calls()
	for i := 0; i < 20; i++ {
		l.call("GET", "/v1/entities/acct-1/budget", l.key, nil)
	}
	if after := calls(); after-before < 20 {
		t.Fatalf("the current version served %v of 20 requests", after-before)
	}
}

// buildVersion builds a plugin with its version string replaced and
// precompiles it for the apps of the test binary.
func buildVersion(t *testing.T, dir, version string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "p.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-ldflags", "-X main.version="+version, "-o", out, dir)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", dir, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	precompile(t, b)
	return b
}
