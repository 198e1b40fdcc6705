package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/clock/clocktest"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/ratelimit"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

const testGateway = `
name: test-gateway
version: "2.1"
entities:
  ticket:
    fields:
      subject: {type: string, indexed: true}
      priority: {type: number, indexed: true}
    facts: [opened, commented]
routes:
  - {path: /v1/status, method: GET, entity: system, action: get, auth: public}
  - {path: /v1/accounts, method: POST, entity: account, action: create}
  - {path: /v1/accounts, method: GET, entity: account, action: list}
  - {path: /v1/accounts/:id, method: GET, entity: account, action: get, rateLimit: {rpm: 5, scope: tenant}}
  - {path: /v1/accounts/:id/deposits, method: POST, entity: account, action: emit, factType: deposit}
  - {path: /v1/deposits, method: POST, entity: account, action: emit, factType: deposit}
  - {path: /v1/assets/:id/outcomes, method: POST, entity: asset, action: emit, factType: outcome, rateLimit: {rpm: 3, scope: global}}
  - {path: /v1/tickets, method: POST, entity: ticket, action: create}
  - {path: /v1/tickets, method: GET, entity: ticket, action: list}
  - {path: /v1/tickets/:id, method: GET, entity: ticket, action: get}
  - {path: /v1/reports, method: POST, entity: account, action: query}
  - {path: /v1/public-status, method: GET, entity: system, action: get, auth: public, rateLimit: {rpm: 2, scope: tenant}}
`

type gwHarness struct {
	*harness
	clock    *clocktest.Manual
	platform *platform.Service
}

func setupGateway(t *testing.T, backend string) *gwHarness {
	t.Helper()
	return setupGatewayOn(t, teststore.Open(t, backend))
}

// setupGatewayOn is setupGateway on a store the test opened.
func setupGatewayOn(t *testing.T, st store.Store) *gwHarness {
	t.Helper()
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
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	srv, err := gateway.New(gateway.Config{DocsURL: docsURL, Version: "9.9.9"}, gateway.Deps{
		Platform: p, Auth: auth.NewAuthenticator(st), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Limiter: ratelimit.NewMemory(ratelimit.MemoryOptions{Clock: clock}), Routes: gw,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, store: st}
	h.keyA = h.newKey("tenant-a", auth.ModeLive)
	h.keyB = h.newKey("tenant-b", auth.ModeLive)
	h.adminA = h.newKey("tenant-a", auth.ModeAdmin)
	return &gwHarness{harness: h, clock: clock, platform: p}
}

func forEachGateway(t *testing.T, fn func(t *testing.T, h *gwHarness)) {
	for _, b := range teststore.Backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			fn(t, setupGateway(t, b))
		})
	}
}

func (h *gwHarness) account(t *testing.T, key string) string {
	t.Helper()
	r := h.req("POST", "/v1/accounts", key, map[string]any{"data": map[string]any{"name": "Acme", "status": "active", "subtype": "customer"}}).wantStatus(t, 201)
	return str(r.data()["id"])
}

func TestActionCreateAndGet(t *testing.T) {
	forEachGateway(t, func(t *testing.T, h *gwHarness) {
		r := h.req("POST", "/v1/accounts", h.keyA, map[string]any{"type": "account", "data": map[string]any{"name": "Acme", "status": "active", "subtype": "customer"}}).wantStatus(t, 201)
		id := str(r.data()["id"])
		ent := r.data()["entity"].(map[string]any)
		if !strings.HasPrefix(id, "ent_") || str(ent["id"]) != id || ent["version"] != json.Number("1") {
			t.Fatalf("create %s", r.raw)
		}
		g := h.req("GET", "/v1/accounts/"+id, h.keyA, nil).wantStatus(t, 200).data()
		for _, k := range []string{"id", "type", "version", "data", "created_at", "updated_at"} {
			if _, ok := g[k]; !ok {
				t.Errorf("Entity object lacks %s: %v", k, g)
			}
		}
		if str(g["type"]) != "account" || str(g["data"].(map[string]any)["name"]) != "Acme" {
			t.Fatalf("get %v", g)
		}
		h.req("GET", "/v1/accounts/ent_nope", h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "Entity ent_nope not found")
		// Path parameters are decoded, as on the platform's routes.
		if g := h.req("GET", "/v1/accounts/"+strings.Replace(id, "_", "%5F", 1), h.keyA, nil).wantStatus(t, 200).data(); str(g["id"]) != id {
			t.Fatalf("get by encoded id: %v", g)
		}
		h.req("GET", "/v1/accounts/ent%3Cx%3E", h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "Entity ent<x> not found")
		h.req("GET", "/v1/accounts/"+id, h.keyB, nil).wantProblem(t, 404, "not-found", "Not Found", "Entity "+id+" not found")

		v := h.req("POST", "/v1/accounts", h.keyA, map[string]any{"type": "asset", "data": map[string]any{"name": 1}, "colour": "red"})
		v.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
		// Every field error at once: the input shape's and the entity
		// type's.
		want := map[string]string{"colour": "unknown_field", "type": "enum", "data.name": "type", "data.status": "required", "data.subtype": "required"}
		if fmt.Sprint(v.fieldErrors()) != fmt.Sprint(want) {
			t.Fatalf("field errors %v, want %v", v.fieldErrors(), want)
		}
		v = h.req("POST", "/v1/accounts", h.keyA, map[string]any{"data": map[string]any{"name": 1}})
		want = map[string]string{"data.name": "type", "data.status": "required", "data.subtype": "required"}
		if fmt.Sprint(v.fieldErrors()) != fmt.Sprint(want) {
			t.Fatalf("entity field errors %v, want %v", v.fieldErrors(), want)
		}
		v = h.req("POST", "/v1/accounts", h.keyA, map[string]any{})
		if v.fieldErrors()["data"] != "required" {
			t.Fatalf("missing data: %s", v.raw)
		}
		// An entity type declared by the gateway manifest itself.
		tk := h.req("POST", "/v1/tickets", h.keyA, map[string]any{"data": map[string]any{"subject": "Broken", "priority": 2}}).wantStatus(t, 201)
		h.req("GET", "/v1/tickets/"+str(tk.data()["id"]), h.keyA, nil).wantStatus(t, 200)
		// A route's get does not serve entities of another type.
		h.req("GET", "/v1/tickets/"+id, h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "Entity "+id+" not found")
	})
}

func TestActionEmit(t *testing.T) {
	forEachGateway(t, func(t *testing.T, h *gwHarness) {
		id := h.account(t, h.keyA)
		for i := 1; i <= 3; i++ {
			d := h.req("POST", "/v1/accounts/"+id+"/deposits", h.keyA, map[string]any{"data": map[string]any{"amount": 0.1}}).wantStatus(t, 201).data()
			if !strings.HasPrefix(str(d["factId"]), "fct_") || d["seq"] != json.Number(strconv.Itoa(i)) || d["timestamp"] == nil || len(d) != 3 {
				t.Fatalf("emit output %v", d)
			}
		}
		// entityId in the body when the path has none.
		d := h.req("POST", "/v1/deposits", h.keyA, map[string]any{"entityId": id, "factType": "deposit", "data": map[string]any{"amount": 1}}).wantStatus(t, 201).data()
		if d["seq"] != json.Number("4") {
			t.Fatalf("emit via body: %v", d)
		}
		f := h.req("GET", "/v1/facts/"+str(d["factId"]), h.keyA, nil).wantStatus(t, 200).data()
		if str(f["type"]) != "deposit" || str(f["entity_id"]) != id {
			t.Fatalf("emitted fact %v", f)
		}
		v := h.req("POST", "/v1/deposits", h.keyA, map[string]any{"factType": "charge", "data": 5})
		want := map[string]string{"entityId": "required", "factType": "enum", "data": "type"}
		if fmt.Sprint(v.fieldErrors()) != fmt.Sprint(want) {
			t.Fatalf("emit validation %v, want %v", v.fieldErrors(), want)
		}
		h.req("POST", "/v1/accounts/ent_nope/deposits", h.keyA, map[string]any{"data": map[string]any{}}).wantProblem(t, 404, "not-found", "Not Found", "Entity ent_nope not found")
		h.req("POST", "/v1/accounts/"+id+"/deposits", h.keyB, map[string]any{"data": map[string]any{}}).wantProblem(t, 404, "not-found", "Not Found", "Entity "+id+" not found")
		h.req("POST", "/v1/accounts/"+id+"/deposits", h.keyA, `{"data":`).wantProblem(t, 400, "bad-request", "Bad Request", "")
		// A path with an empty segment is no route, a manifest's included.
		h.req("POST", "//v1/accounts/"+id+"/deposits", h.keyA, map[string]any{"data": map[string]any{"amount": 1}}).
			wantProblem(t, 404, "not-found", "Not Found", "No route matches POST //v1/accounts/"+id+"/deposits")
		h.req("GET", "/v1/entities/"+id+"//budget", h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches GET /v1/entities/"+id+"//budget")
		// Emitted facts are raw facts: held to the same bounds on data,
		// and a timestamp of 0 is no time.
		deep := `{"data":{"amount":1,"x":` + strings.Repeat("[", platform.MaxFactDataDepth) + strings.Repeat("]", platform.MaxFactDataDepth) + `}}`
		if r := h.req("POST", "/v1/accounts/"+id+"/deposits", h.keyA, deep); r.status != 400 || r.fieldErrors()["data"] != "range" {
			t.Fatalf("emit with data too deep: %d %s", r.status, r.raw)
		}
		if r := h.req("POST", "/v1/accounts/"+id+"/deposits", h.keyA, map[string]any{"data": map[string]any{"amount": 1}, "timestamp": 0}); r.status != 400 || r.fieldErrors()["timestamp"] != "range" {
			t.Fatalf("emit at timestamp 0: %d %s", r.status, r.raw)
		}
	})
}

func TestActionList(t *testing.T) {
	forEachGateway(t, func(t *testing.T, h *gwHarness) {
		for i := 0; i < 5; i++ {
			h.account(t, h.keyA)
		}
		d := h.req("GET", "/v1/accounts?limit=3&status=active", h.keyA, nil).wantStatus(t, 200).data()
		if len(d["items"].([]any)) != 3 || d["hasMore"] != true || str(d["cursor"]) == "" {
			t.Fatalf("list page 1 %v", d)
		}
		d = h.req("GET", "/v1/accounts?limit=3&status=active&cursor="+str(d["cursor"]), h.keyA, nil).wantStatus(t, 200).data()
		if len(d["items"].([]any)) != 2 || d["hasMore"] != false {
			t.Fatalf("list page 2 %v", d)
		}
		h.req("GET", "/v1/accounts?limit=500", h.keyA, nil).wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
		if n := len(h.req("GET", "/v1/accounts", h.keyB, nil).wantStatus(t, 200).data()["items"].([]any)); n != 0 {
			t.Fatalf("tenant B sees %d accounts", n)
		}
	})
}

func TestActionQueryAndSystem(t *testing.T) {
	forEachGateway(t, func(t *testing.T, h *gwHarness) {
		h.req("POST", "/v1/reports", h.keyA, map[string]any{"projection": "revenue", "filters": map[string]any{}}).
			wantProblem(t, 404, "not-found", "Not Found", "Projection revenue not found")
		if h.req("POST", "/v1/reports", h.keyA, map[string]any{}).fieldErrors()["projection"] != "required" {
			t.Fatal("query without projection accepted")
		}
		d := h.req("GET", "/v1/status", "", nil).wantStatus(t, 200).data()
		if str(d["name"]) != "test-gateway" || str(d["version"]) != "9.9.9" || str(d["status"]) != "ok" {
			t.Fatalf("system %v", d)
		}
	})
}

func TestManifestRouteErrors(t *testing.T) {
	forEachGateway(t, func(t *testing.T, h *gwHarness) {
		for _, key := range []string{"", "fl_live_nonexistentkeynonexistentkey"} {
			r := h.req("GET", "/v1/accounts/x", key, nil)
			r.wantProblem(t, 401, "unauthorized", "Unauthorized", "Invalid or missing API key")
		}
		r := h.req("DELETE", "/v1/accounts/x", h.keyA, nil)
		r.wantProblem(t, 405, "method-not-allowed", "Method Not Allowed", "Method DELETE is not allowed on /v1/accounts/x")
		if r.header.Get("Allow") != "GET, HEAD" {
			t.Fatalf("Allow %q", r.header.Get("Allow"))
		}
		h.req("GET", "/v1/nothing-here", h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches GET /v1/nothing-here")
		h.req("POST", "/v1/accounts", h.keyA, `{"data":{}}`, "Content-Type", "text/csv").
			wantProblem(t, 415, "unsupported-media-type", "Unsupported Media Type", "Content-Type must be application/json (got text/csv)")
		// Platform routes keep working beside the manifest's.
		h.req("GET", "/v1/configs", h.keyA, nil).wantStatus(t, 200)
	})
}

func TestRateLimitTenantScope(t *testing.T) {
	forEachGateway(t, func(t *testing.T, h *gwHarness) {
		id := h.account(t, h.keyA)
		idB := h.account(t, h.keyB)
		for i := 0; i < 5; i++ {
			r := h.req("GET", "/v1/accounts/"+id, h.keyA, nil).wantStatus(t, 200)
			if r.header.Get("RateLimit-Limit") != "5" || r.header.Get("RateLimit-Remaining") != strconv.Itoa(4-i) || r.header.Get("RateLimit-Reset") == "" {
				t.Fatalf("request %d headers %v", i, r.header)
			}
		}
		r := h.req("GET", "/v1/accounts/"+id, h.keyA, nil)
		r.wantProblem(t, 429, "rate-limit-exceeded", "Too Many Requests", "Rate limit exceeded: 5 requests per minute")
		// rpm 5: one request every 12 s.
		if r.header.Get("Retry-After") != "12" {
			t.Fatalf("Retry-After %q, want 12", r.header.Get("Retry-After"))
		}
		// Tenant B is unaffected.
		h.req("GET", "/v1/accounts/"+idB, h.keyB, nil).wantStatus(t, 200)
		// Retry-After tells the truth: a second early is still refused,
		// at Retry-After it passes.
		h.clock.Advance(11 * time.Second)
		h.req("GET", "/v1/accounts/"+id, h.keyA, nil).wantStatus(t, 429)
		h.clock.Advance(time.Second)
		h.req("GET", "/v1/accounts/"+id, h.keyA, nil).wantStatus(t, 200)
		h.req("GET", "/v1/accounts/"+id, h.keyA, nil).wantStatus(t, 429)
	})
}

func TestRateLimitGlobalScopeAndPublic(t *testing.T) {
	forEachGateway(t, func(t *testing.T, h *gwHarness) {
		for _, key := range []string{h.keyA, h.keyB} {
			h.req("POST", "/v1/entities", key, map[string]any{"type": "asset", "id": "line", "name": "L", "status": "on", "identifier": "x", "subtype": "phone"}).wantStatus(t, 201)
		}
		codes := []int{}
		for i, key := range []string{h.keyA, h.keyB, h.keyA, h.keyB} {
			codes = append(codes, h.req("POST", "/v1/assets/line/outcomes", key, map[string]any{"subtype": "no_answer", "data": map[string]any{"n": i}}).status)
		}
		if fmt.Sprint(codes) != "[201 201 201 429]" {
			t.Fatalf("global rpm 3 across tenants: %v", codes)
		}
		// Public route limited per client address.
		codes = codes[:0]
		for i := 0; i < 3; i++ {
			codes = append(codes, h.req("GET", "/v1/public-status", "", nil).status)
		}
		if fmt.Sprint(codes) != "[200 200 429]" {
			t.Fatalf("public rate limit: %v", codes)
		}
	})
}

func TestSwapRoutes(t *testing.T) {
	h := setupGateway(t, "sqlite")
	base, _ := manifest.LoadDomainFile("../../../manifests/domain.yaml")
	next, err := manifest.ParseGateway("next.yaml", []byte(`
name: next
version: "3"
routes:
  - {path: /v2/status, method: GET, entity: system, action: get, auth: public}
`), base)
	if err != nil {
		t.Fatal(err)
	}
	h.req("GET", "/v1/status", "", nil).wantStatus(t, 200)
	h.srv.SetRoutes(next)
	h.req("GET", "/v1/status", "", nil).wantStatus(t, 404)
	if d := h.req("GET", "/v2/status", "", nil).wantStatus(t, 200).data(); str(d["name"]) != "next" {
		t.Fatalf("swapped routes: %v", d)
	}
}

// TestRateLimitTwoProcessesShareRedis: two gateway servers (as two
// processes would be: separate limiters and Redis clients) share one real
// Redis; four clients fire 300 requests at a route limited to 60 rpm.
// Both decide on one test clock that stands still during the run, so GCRA
// with a burst of the whole minute admits exactly 60, however long the run
// takes; moving the clock by Retry-After admits the next.
func TestRateLimitTwoProcessesShareRedis(t *testing.T) {
	redisURL := testutil.Redis(t)
	st := teststore.Open(t, "postgres")
	base, _ := manifest.LoadDomainFile("../../../manifests/domain.yaml")
	gw, err := manifest.ParseGateway("rl.yaml", []byte(`
name: rl
version: "1"
routes:
  - {path: /v1/accounts/:id, method: GET, entity: account, action: get, rateLimit: {rpm: 60, scope: tenant}}
`), base)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := auth.CreateKey(context.Background(), st, "tenant-a", "live", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyB, _, _ := auth.CreateKey(context.Background(), st, "tenant-b", "live", "", time.Now())
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	var bases []string
	for i := 0; i < 2; i++ {
		p, err := platform.New(platform.Options{Store: st, Domain: base})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		opt, _ := redis.ParseURL(redisURL)
		client := redis.NewClient(opt)
		t.Cleanup(func() { client.Close() })
		srv, err := gateway.New(gateway.Config{}, gateway.Deps{Platform: p, Auth: auth.NewAuthenticator(st), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Limiter: ratelimit.NewRedis(client, ratelimit.RedisOptions{Clock: clock}), Routes: gw})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Shutdown(5 * time.Second) })
		bases = append(bases, "http://"+ln.Addr().String())
	}
	// The route answers 404 for a missing entity after the limiter has
	// counted the request; successes are everything but 429.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	get := func(base, k string) (int, http.Header) {
		req, _ := http.NewRequest("GET", base+"/v1/accounts/missing", nil)
		req.Header.Set("X-API-Key", k)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	var passed, limited, sent atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent.Add(1) <= 300 {
				code, _ := get(bases[c%2], key)
				switch code {
				case 404:
					passed.Add(1)
				case 429:
					limited.Add(1)
				default:
					t.Errorf("unexpected status %d", code)
				}
			}
		}()
	}
	wg.Wait()
	if passed.Load() != 60 || limited.Load() != 240 {
		t.Fatalf("%d passed, %d limited; want 60 and 240", passed.Load(), limited.Load())
	}
	// Tenant B is unaffected by A's exhaustion.
	if code, _ := get(bases[0], keyB); code != 404 {
		t.Fatalf("tenant B got %d", code)
	}
	// Retry-After is truthful: waiting it out lets the next request pass.
	code, hdr := get(bases[1], key)
	if code != 429 {
		t.Fatalf("expected 429, got %d", code)
	}
	wait, err := strconv.Atoi(hdr.Get("Retry-After"))
	if err != nil || wait < 1 || wait > 1 {
		t.Fatalf("Retry-After %q, want 1 (one request per second at 60 rpm)", hdr.Get("Retry-After"))
	}
	clock.Advance(time.Duration(wait)*time.Second - time.Millisecond)
	if code, _ := get(bases[0], key); code != 429 {
		t.Fatalf("before Retry-After the request got %d", code)
	}
	clock.Advance(time.Millisecond)
	if code, _ := get(bases[0], key); code != 404 {
		t.Fatalf("after Retry-After the request got %d", code)
	}
}

func TestOpenAPIServedForCurrentRoutes(t *testing.T) {
	h := setupGateway(t, "sqlite")
	paths := func() map[string]any {
		resp, err := h.srv.App().Test(mustRequest("GET", "/openapi.json"), 5000)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("/openapi.json %d", resp.StatusCode)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(readAll(resp)), &doc); err != nil {
			t.Fatal(err)
		}
		if doc["openapi"] != "3.0.3" {
			t.Fatalf("openapi version %v", doc["openapi"])
		}
		return doc["paths"].(map[string]any)
	}
	p := paths()
	for _, want := range []string{"/v1/accounts/{id}", "/v1/status", "/v1/entities", "/v1/facts/{id}"} {
		if _, ok := p[want]; !ok {
			t.Errorf("/openapi.json lacks %s", want)
		}
	}
	base, _ := manifest.LoadDomainFile("../../../manifests/domain.yaml")
	next, _ := manifest.ParseGateway("n.yaml", []byte("name: n\nversion: \"1\"\nroutes:\n  - {path: /v9/ping, method: GET, entity: system, action: get, auth: public}\n"), base)
	h.srv.SetRoutes(next)
	p = paths()
	if _, ok := p["/v9/ping"]; !ok {
		t.Fatal("/openapi.json does not follow a route swap")
	}
	if _, ok := p["/v1/accounts/{id}"]; ok {
		t.Fatal("/openapi.json still lists a removed route")
	}
	resp, _ := h.srv.App().Test(mustRequest("GET", "/docs"), 5000)
	if body := readAll(resp); resp.StatusCode != 200 || !strings.Contains(body, "/v9/ping") || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/docs %d %.200s", resp.StatusCode, body)
	}
}

func TestMountedEndpoints(t *testing.T) {
	h := setupGateway(t, "sqlite")
	h.srv.Mount(openapi.Endpoint{Method: "GET", Path: "/v1/admin/things", ID: "listThings", Access: openapi.AdminKey, Status: 200, OK: "Things."}, func(c *fiber.Ctx) error {
		return gateway.Respond(c, 200, fiber.Map{"tenant": gateway.Tenant(c)})
	})
	h.srv.Mount(openapi.Endpoint{Method: "POST", Path: "/v1/things", ID: "createThing", Status: 201, OK: "A thing."}, func(c *fiber.Ctx) error {
		m, _, err := gateway.ReadJSON(c)
		if err != nil {
			return err
		}
		return gateway.Respond(c, 201, m)
	})
	if d := h.req("GET", "/v1/admin/things", h.adminA, nil).wantStatus(t, 200).data(); str(d["tenant"]) != "tenant-a" {
		t.Fatalf("mounted admin endpoint: %v", d)
	}
	h.req("GET", "/v1/admin/things", h.keyA, nil).wantProblem(t, 403, "forbidden", "Forbidden", "This endpoint requires an admin API key")
	h.req("GET", "/v1/admin/things", "", nil).wantProblem(t, 401, "unauthorized", "Unauthorized", "Invalid or missing API key")
	h.req("POST", "/v1/things", h.keyB, map[string]any{"a": 1}).wantStatus(t, 201)
	h.req("POST", "/v1/things", h.keyB, "{").wantStatus(t, 400)
	r := h.req("DELETE", "/v1/things", h.keyB, nil)
	r.wantProblem(t, 405, "method-not-allowed", "Method Not Allowed", "Method DELETE is not allowed on /v1/things")
	h.req("GET", "/v1/nope", h.keyB, nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches GET /v1/nope")
	// Manifest routes still win for their own paths.
	h.req("GET", "/v1/status", "", nil).wantStatus(t, 200)
}
