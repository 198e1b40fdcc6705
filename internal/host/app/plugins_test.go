package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/wasm/wasmtest"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
	"github.com/factline/factline/sdk/conformance"
)

var (
	modulesOnce sync.Once
	modules     map[string][]byte
	modulesErr  error
	cacheDir    string
)

// repoPlugins builds the repo's plugins once per test binary and
// precompiles them into cacheDir.
func repoPlugins(t testing.TB) map[string][]byte {
	t.Helper()
	modulesOnce.Do(func() {
		modules = map[string][]byte{}
		mains, _ := filepath.Glob("../../../plugins/*/main.go")
		for _, m := range mains {
			dir := filepath.Dir(m)
			b, err := conformance.Build(context.Background(), dir)
			if err != nil {
				modulesErr = err
				return
			}
			modules[filepath.Base(dir)] = b
		}
		if cacheDir, modulesErr = testutil.TempDir("factline-app-wasm-cache-"); modulesErr != nil {
			return
		}
		modulesErr = precompileInto(cacheDir, slices.Collect(maps.Values(modules))...)
	})
	if modulesErr != nil {
		t.Fatal(modulesErr)
	}
	return modules
}

// precompile compiles modules into the tests' compilation cache (see
// repoPlugins) before an app loads them.
func precompile(t testing.TB, modules ...[]byte) {
	t.Helper()
	repoPlugins(t)
	if err := precompileInto(cacheDir, modules...); err != nil {
		t.Fatal(err)
	}
}

// precompileInto compiles modules into the compilation cache dir with a
// helper built without the race detector: the race-built runtime compiles
// about fifteen times slower, and every app of the binary then loads the
// modules from the cache.
func precompileInto(dir string, modules ...[]byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src, err := os.MkdirTemp("", "factline-app-wasm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	paths := make([]string, len(modules))
	for i, m := range modules {
		paths[i] = filepath.Join(src, fmt.Sprintf("m%d.wasm", i))
		if err := os.WriteFile(paths[i], m, 0o644); err != nil {
			return err
		}
	}
	return wasmtest.Precompile(ctx, dir, true, paths...)
}

// live is a running App on a real listener.
type live struct {
	t    testing.TB
	a    *app.App
	base string
	key  string
	op   string // operator admin key
	stop func()
}

func startLive(t testing.TB, backend, location string, tweaks ...func(*app.Config)) *live {
	t.Helper()
	mods := repoPlugins(t)
	// A generous plugin deadline: the race detector and a busy machine slow
	// calls down, and these tests are not about the deadline. One instance
	// per plugin: making one copies the module's memory image, the costliest
	// part of starting an app under the race detector; the tests of calls
	// side by side (isolation_test.go) ask for the default pool.
	cfg := app.Config{Addr: "127.0.0.1:0", BuiltinPlugins: mods, PluginCacheDir: cacheDir, PluginTimeout: 2 * time.Second,
		PluginInstances: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tw := range tweaks {
		tw(&cfg)
	}
	if backend == "postgres" {
		cfg.DatabaseURL = location
		cfg.DataDir = t.TempDir() // local state (the webhook key file) stays out of the tree
	} else {
		cfg.DataDir = location
	}
	a, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, func(x net.Addr) { addr <- x }) }()
	l := &live{t: t, a: a, base: "http://" + (<-addr).String()}
	var once sync.Once
	l.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(l.stop)
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer wcancel()
	if err := a.Plugins.WaitLoaded(wctx); err != nil {
		t.Fatal(err)
	}
	l.key = l.newKey("t1", "live")
	l.op = l.newKey("operator", "admin")
	return l
}

func (l *live) newKey(tenant, mode string) string {
	k, _, err := auth.CreateKey(context.Background(), l.a.Store, tenant, mode, "", time.Now())
	if err != nil {
		l.t.Fatal(err)
	}
	return k
}

func (l *live) call(method, path, key string, body any) (int, map[string]any) {
	l.t.Helper()
	code, _, out := l.callHeader(method, path, key, body)
	return code, out
}

// callHeader is call answering the response's header too.
func (l *live) callHeader(method, path, key string, body any) (int, http.Header, map[string]any) {
	l.t.Helper()
	var rd io.Reader
	ct := "application/json"
	switch b := body.(type) {
	case nil:
	case []byte:
		rd, ct = bytes.NewReader(b), "application/wasm"
	default:
		enc, _ := json.Marshal(b)
		rd = bytes.NewReader(enc)
	}
	req, _ := http.NewRequest(method, l.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", ct)
	}
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	dec.Decode(&out)
	return resp.StatusCode, resp.Header, out
}

// status makes a call from a background goroutine: no t.Fatal, -1 on a
// transport error.
func (l *live) status(method, path string, body any) int {
	var rd io.Reader
	if body != nil {
		enc, _ := json.Marshal(body)
		rd = bytes.NewReader(enc)
	}
	req, _ := http.NewRequest(method, l.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", l.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func dataOf(m map[string]any) map[string]any { d, _ := m["data"].(map[string]any); return d }

func location(t *testing.T, backend string) string {
	if backend == "postgres" {
		return testutil.Postgres(t)
	}
	return t.TempDir()
}

func isExactly(n any, want string) bool {
	s := fmt.Sprint(n)
	a, ok1 := new(big.Rat).SetString(s)
	b, ok2 := new(big.Rat).SetString(want)
	return ok1 && ok2 && a.Cmp(b) == 0
}

func createAccount(l *live, id string) {
	l.t.Helper()
	code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "account", "id": id, "name": "Acme", "status": "active", "subtype": "customer"})
	if code != 201 {
		l.t.Fatalf("create account: %d %v", code, body)
	}
}

// TestAccountLedgerExactDecimals: ten deposits of 0.1 make a balance of
// exactly 1, and a refused charge writes nothing, on both stores.
func TestAccountLedgerExactDecimals(t *testing.T) {
	t.Parallel()
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			l := startLive(t, backend, location(t, backend))
			createAccount(l, "acct-1")
			for i := 0; i < 10; i++ {
				code, body := l.call("POST", "/v1/entities/acct-1/deposit", l.key, map[string]any{"amount": 0.1})
				d := dataOf(body)
				if code != 201 || d["type"] != "deposit" || d["subtype"] != "manual" {
					t.Fatalf("deposit %d: %d %v", i, code, body)
				}
			}
			code, body := l.call("GET", "/v1/entities/acct-1/budget", l.key, nil)
			b := dataOf(body)
			if code != 200 || !isExactly(b["balance"], "1") || b["currency"] != "USD" {
				t.Fatalf("budget after 10 x 0.1: %d %v", code, body)
			}
			_, before := l.call("GET", "/v1/entities/acct-1/facts?limit=200", l.key, nil)
			code, body = l.call("POST", "/v1/entities/acct-1/charge", l.key, map[string]any{"amount": 5})
			if code != 422 || body["type"] != "https://docs.factline.dev/errors/unprocessable" {
				t.Fatalf("charge beyond the balance: %d %v", code, body)
			}
			_, after := l.call("GET", "/v1/entities/acct-1/facts?limit=200", l.key, nil)
			if len(dataOf(before)["items"].([]any)) != 10 || len(dataOf(after)["items"].([]any)) != 10 {
				t.Fatalf("a refused charge wrote facts: %d then %d", len(dataOf(before)["items"].([]any)), len(dataOf(after)["items"].([]any)))
			}
			// The raw append path goes through the same rules.
			code, _ = l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "acct-1", "type": "charge", "data": map[string]any{"amount": 2, "currency": "USD"}})
			if code != 422 {
				t.Fatalf("raw charge beyond the balance: %d", code)
			}
			code, _ = l.call("POST", "/v1/entities/acct-1/charge", l.key, map[string]any{"amount": 0.3})
			code2, body := l.call("GET", "/v1/entities/acct-1/budget", l.key, nil)
			if code != 201 || code2 != 200 || !isExactly(dataOf(body)["balance"], "0.7") {
				t.Fatalf("after charging 0.3: %d %d %v", code, code2, body)
			}
			// Unknown command routes are 404s; entity of another tenant too.
			if code, _ := l.call("POST", "/v1/entities/acct-1/teleport", l.key, map[string]any{}); code != 404 {
				t.Fatalf("unknown command route: %d", code)
			}
			other := l.newKey("t2", "live")
			if code, _ := l.call("GET", "/v1/entities/acct-1/budget", other, nil); code != 404 {
				t.Fatalf("another tenant's budget: %d", code)
			}
			// Snapshots rebuild to the same state.
			admin := l.newKey("t1", "admin")
			code, body = l.call("POST", "/v1/admin/ledgers/account/rebuild", admin, nil)
			if code != 200 || dataOf(body)["entities"] != json.Number("1") || dataOf(body)["changed"] != json.Number("0") {
				t.Fatalf("rebuild: %d %v", code, body)
			}
		})
	}
}

// TestSubscriptionEffectOnceAcrossRestart: a no_answer outcome gets exactly
// one follow-up, also when the process restarts while the subscription is
// processing (its checkpoint lagging behind what it applied).
func TestSubscriptionEffectOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			loc := location(t, backend)
			l := startLive(t, backend, loc)
			code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "asset", "id": "line-1", "name": "Line", "status": "on", "identifier": "+1555", "subtype": "phone"})
			if code != 201 {
				t.Fatalf("create asset: %d %v", code, body)
			}
			const n = 5
			for i := 0; i < n; i++ {
				if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "line-1", "type": "outcome", "subtype": "no_answer", "data": map[string]any{"attempt": i}}); code != 201 {
					t.Fatalf("outcome: %d %v", code, body)
				}
			}
			followups := func(l *live) int { return followupsOf(l, "line-1") }
			waitFor := func(l *live, want int) {
				testutil.EventuallyNil(t, 30*time.Second, func() error {
					if got := followups(l); got < want {
						return fmt.Errorf("follow-ups: %d, want %d", got, want)
					}
					return nil
				})
			}
			waitFor(l, n)
			l.stop()
			// Simulate a crash after applying but before checkpointing:
			// rewind the subscription's checkpoint, then restart.
			st := teststore.OpenAt(t, backend, storeLocation(backend, loc))
			if err := st.SetCheckpoint(context.Background(), "subscription:no_answer_followup", 0); err != nil {
				t.Fatal(err)
			}
			st.Close()
			l2 := startLive(t, backend, loc)
			l2.key = l.key
			// The replay reaches the head again...
			testutil.EventuallyNil(t, 30*time.Second, func() error {
				pos, _ := l2.a.Store.GetCheckpoint(context.Background(), "subscription:no_answer_followup")
				head, _ := l2.a.Store.HeadPosition(context.Background())
				if pos != head {
					return fmt.Errorf("subscription did not catch up: %d of %d", pos, head)
				}
				return nil
			})
			// ...without applying anything twice.
			if got := followups(l2); got != n {
				t.Fatalf("after a replay: %d follow-ups, want exactly %d", got, n)
			}
		})
	}
}

func storeLocation(backend, loc string) string {
	if backend == "postgres" {
		return loc
	}
	return filepath.Join(loc, "factline.db")
}

// TestPluginAdminAPI: listing, refusing a broken module, installing the
// same module again, rollback without a previous version, operator-only.
func TestPluginAdminAPI(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	code, body := l.call("GET", "/v1/admin/plugins", l.op, nil)
	items, _ := dataOf(body)["items"].([]any)
	if code != 200 || len(items) != len(repoPlugins(t)) {
		t.Fatalf("list: %d %v", code, body)
	}
	names := map[string]bool{}
	for _, it := range items {
		m := it.(map[string]any)
		names[m["name"].(string)] = true
		for _, k := range []string{"version", "sha256", "loaded_at", "stats"} {
			if _, ok := m[k]; !ok {
				t.Errorf("plugin listing lacks %s: %v", k, m)
			}
		}
		// A time, as every time the API answers: milliseconds since the
		// epoch as a JSON number (it was RFC 3339 text).
		n, _ := m["loaded_at"].(json.Number)
		if at, err := n.Int64(); err != nil || at < time.Now().Add(-time.Hour).UnixMilli() || at > time.Now().UnixMilli() {
			t.Errorf("loaded_at %#v (%v), want milliseconds since the epoch of the last hour", m["loaded_at"], err)
		}
	}
	for _, n := range []string{"account", "asset", "generic", "followup"} {
		if !names[n] {
			t.Errorf("%s not loaded", n)
		}
	}
	// A name no plugin can have is refused before the body is compiled.
	for _, bad := range []string{"Evil%20Name", "evil%2F..%2Fx", strings.Repeat("p", 65)} {
		if code, body := l.call("PUT", "/v1/admin/plugins/"+bad, l.op, []byte("\x00asm not really")); code != 400 ||
			!strings.Contains(fmt.Sprint(body["detail"]), "a plugin name is a lowercase letter") {
			t.Errorf("install as %s: %d %v, want 400 naming the rule", bad, code, body)
		}
	}
	code, body = l.call("PUT", "/v1/admin/plugins/account", l.op, []byte("\x00asm not really"))
	if code != 422 || len(body["errors"].([]any)) == 0 {
		t.Fatalf("broken module: %d %v", code, body)
	}
	code, _ = l.call("PUT", "/v1/admin/plugins/account", l.op, repoPlugins(t)["asset"])
	if code != 422 {
		t.Fatalf("module of another name accepted: %d", code)
	}
	code, _ = l.call("PUT", "/v1/admin/plugins/account", l.op, repoPlugins(t)["account"])
	if code != 200 {
		t.Fatalf("re-installing the current module: %d", code)
	}
	if code, _ = l.call("POST", "/v1/admin/plugins/account/rollback", l.op, nil); code != 409 {
		t.Fatalf("rollback without a previous version: %d", code)
	}
	tenantAdmin := l.newKey("t1", "admin")
	if code, _ = l.call("PUT", "/v1/admin/plugins/account", tenantAdmin, repoPlugins(t)["account"]); code != 403 {
		t.Fatalf("a tenant admin may install plugins: %d", code)
	}
	if code, _ = l.call("GET", "/v1/admin/plugins", tenantAdmin, nil); code != 403 {
		t.Fatalf("a tenant admin may list every tenant's plugin calls: %d", code)
	}
	if code, _ = l.call("GET", "/v1/admin/plugins", l.key, nil); code != 403 {
		t.Fatalf("a live key may list plugins: %d", code)
	}
	// The ledger routes of loaded plugins are in the API description.
	resp, err := http.Get(l.base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, p := range []string{"/v1/entities/{id}/deposit", "/v1/entities/{id}/budget", "/v1/entities/{id}/outcomes", "/v1/entities/{id}/summary"} {
		if !bytes.Contains(doc, []byte(`"`+p+`"`)) {
			t.Errorf("/openapi.json lacks %s", p)
		}
	}
	// The account's ledger still works after the refusals.
	createAccount(l, "acct-x")
	if code, body = l.call("POST", "/v1/entities/acct-x/deposit", l.key, map[string]any{"amount": 1}); code != 201 {
		t.Fatalf("deposit after refusals: %d %v", code, body)
	}
}

// followupsOf counts the follow-ups scheduled on an entity.
func followupsOf(l *live, entity string) int {
	l.t.Helper()
	_, body := l.call("GET", "/v1/entities/"+entity+"/facts?limit=200", l.key, nil)
	c := 0
	for _, it := range dataOf(body)["items"].([]any) {
		if it.(map[string]any)["subtype"] == "followup_scheduled" {
			c++
		}
	}
	return c
}
