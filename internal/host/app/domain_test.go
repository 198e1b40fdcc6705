package app_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/testutil"
)

const claimsLayer = `name: claims
version: "1"
entities:
  claim:
    ledger: builtin
    fields:
      status: {type: string, required: true, storage: ix_s_1}
      amount: {type: number, storage: ix_n_1}
    facts: [filed, paid]
`

// writeAtomic replaces a file by renaming, so a watcher never reads half
// of it.
func writeAtomic(t *testing.T, path, src string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestWatchedDomainDirectoryAddsAnEntityType: a domain manifest written
// into a --domain directory under --watch adds its entity type without a
// restart; until then the type is unknown.
func TestWatchedDomainDirectoryAddsAnEntityType(t *testing.T) {
	dir := t.TempDir()
	domains := filepath.Join(dir, "domains")
	os.Mkdir(domains, 0o755)
	l := startLive(t, "sqlite", filepath.Join(dir, "data"), func(c *app.Config) {
		c.Domains, c.Watch = []string{domains}, true
	})
	claim := map[string]any{"type": "claim", "id": "c1", "status": "open", "amount": 12.5}
	if code, body := l.call("POST", "/v1/entities", l.key, claim); code != 400 {
		t.Fatalf("claim before its manifest: %d %v", code, body)
	}
	writeAtomic(t, filepath.Join(domains, "claims.yaml"), claimsLayer)
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		code, body := l.call("POST", "/v1/entities", l.key, claim)
		if code != 201 && code != 400 {
			t.Fatalf("claim after its manifest: %d %v", code, body)
		}
		if code != 201 {
			return fmt.Errorf("claim after its manifest: %d %v", code, body)
		}
		return nil
	})
	if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c1", "type": "filed"}); code != 201 {
		t.Fatalf("fact on the new type: %d %v", code, body)
	}
}

// TestRefusedDomainChangeKeepsTheOldModel: changes that would retype a
// field with data, remove a fact type in use or name a missing ledger are
// refused whole with file:line:col problems; the old model keeps serving.
func TestRefusedDomainChangeKeepsTheOldModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	layer := filepath.Join(dir, "claims.yaml")
	writeAtomic(t, layer, claimsLayer)
	l := startLive(t, "sqlite", filepath.Join(dir, "data"), func(c *app.Config) { c.Domains = []string{layer} })
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "claim", "id": "c1", "status": "open", "amount": 3}); code != 201 {
		t.Fatalf("create claim: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c1", "type": "filed"}); code != 201 {
		t.Fatalf("fact: %d %v", code, body)
	}
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"retypes a field with data", "amount: {type: number, storage: ix_n_1}", "amount: {type: string, storage: ix_s_2}",
			layer + ":8:7: entities.claim.fields.amount: retypes field from number to string, which 1 stored entities have"},
		{"removes a fact type in use", "[filed, paid]", "[paid]",
			layer + `:4:3: entities.claim.facts: removes fact type "filed", which facts of stored entities have`},
		{"names a missing ledger", "ledger: builtin", "ledger: nowhere",
			layer + `:4:3: entities.claim.ledger: no built-in ledger or installed plugin is named "nowhere"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeAtomic(t, layer, strings.Replace(claimsLayer, tc.from, tc.to, 1)+
				"  badge:\n    ledger: builtin\n    fields: {}\n    facts: [issued]\n")
			err := l.a.Reload()
			var me *manifest.Error
			if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("reload: %v\nwant a problem %s", err, tc.want)
			}
			// Refused whole: the type the same change adds is not there.
			if code, _ := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "badge", "id": "b-" + tc.name[:4]}); code != 400 {
				t.Errorf("type of a refused change: %d", code)
			}
			if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c1", "type": "filed"}); code != 201 {
				t.Errorf("old model after a refused change: %d %v", code, body)
			}
		})
	}
	// The file on disk is still the refused one. A change through the
	// admin API is built on the files being served, not on that file: it
	// is neither refused for it nor blamed on it.
	const gadgets = "name: gadgets\nversion: \"1\"\nentities:\n  gadget:\n    ledger: builtin\n    fields: {}\n    facts: [made]\n"
	if code, body := l.putDomain("gadgets", gadgets); code != 201 {
		t.Fatalf("a domain manifest put while a refused file is on disk: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "gadget", "id": "g1"}); code != 201 {
		t.Fatalf("the type it adds: %d %v", code, body)
	}
	if code, _ := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "badge", "id": "b-after"}); code != 400 {
		t.Errorf("the refused file's type is served after an unrelated change: %d", code)
	}
	writeAtomic(t, layer, claimsLayer)
	if err := l.a.Reload(); err != nil {
		t.Fatalf("reload of the served model: %v", err)
	}
}

const loyaltyDomain = `name: loyalty
version: "1"
entities:
  member:
    ledger: points
    fields:
      tier: {type: string, storage: ix_s_1}
    facts:
      earned:
        fields:
          points: {type: integer, required: true}
routes:
  - {path: /api/members/:id/earn, method: POST, entity: member, action: command, command: earn}
`

// putDomain sends a domain manifest to the admin API as YAML.
func (l *live) putDomain(name, src string) (int, map[string]any) {
	l.t.Helper()
	req, _ := http.NewRequest("PUT", l.base+"/v1/admin/domain/"+name, strings.NewReader(src))
	req.Header.Set("Content-Type", "application/yaml")
	req.Header.Set("X-API-Key", l.op)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestEntityTypeAddedThroughOneProcessIsServedByAnother is the issue's
// acceptance: two processes on one Postgres and Redis; a plugin and the
// domain manifest of a new entity type are uploaded to process A; within
// 10 s process B serves create, the plugin's command routes, the
// manifest's command route and the fact schema for it (refusing a fact
// that breaks the schema, storing one that fits, publishing it in
// /openapi.json), neither restarted, while a steady load on an existing
// type on both processes sees no failed request.
func TestEntityTypeAddedThroughOneProcessIsServedByAnother(t *testing.T) {
	pg, rd := testutil.Postgres(t), testutil.Redis(t)
	redis := func(c *app.Config) { c.RedisURL = rd }
	a := startLive(t, "postgres", pg, redis)
	b := startLive(t, "postgres", pg, redis)
	createAccount(a, "acct-1")

	deposit := map[string]any{"entity_id": "acct-1", "type": "deposit", "data": map[string]any{"amount": 1, "currency": "USD"}}
	var loads []*load
	for _, l := range []*live{a, b} {
		ld := startLoad(2, 201, func() int { return l.status("POST", "/v1/facts", deposit) })
		defer ld.Stop()
		loads = append(loads, ld)
	}
	count := func(f func(*load) int64) (n int64) {
		for _, ld := range loads {
			n += f(ld)
		}
		return n
	}
	ok := func() int64 { return count(func(ld *load) int64 { return ld.ok.Load() }) }
	failed := func() int64 { return count(func(ld *load) int64 { return ld.failed.Load() }) }
	// Load runs before the change too.
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		if ok() < 20 {
			return fmt.Errorf("steady load not running: %d ok, %d failed", ok(), failed())
		}
		return nil
	})

	if code, body := b.call("POST", "/v1/entities", b.key, map[string]any{"type": "member", "id": "m1"}); code != 400 {
		t.Fatalf("member before the change: %d %v", code, body)
	}
	if code, body := a.call("PUT", "/v1/admin/plugins/points", a.op, fixture(t, "points")); code != 201 {
		t.Fatalf("upload plugin: %d %v", code, body)
	}
	if code, body := a.putDomain("loyalty", loyaltyDomain); code != 201 {
		t.Fatalf("upload domain manifest: %d %v", code, body)
	}
	changed := time.Now()
	if code, body := a.call("POST", "/v1/entities", a.key, map[string]any{"type": "member", "id": "m0"}); code != 201 {
		t.Fatalf("process A serves the new type at once: %d %v", code, body)
	}
	// Polled with the usual deadline; the 10 s the change may take is
	// checked below.
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		code, body := b.call("POST", "/v1/entities", b.key, map[string]any{"type": "member", "id": "m1", "tier": "gold"})
		if code != 201 && code != 400 && code != 503 {
			t.Fatalf("process B, %v after the change: %d %v", time.Since(changed), code, body)
		}
		if code != 201 {
			return fmt.Errorf("process B, %v after the change: %d %v", time.Since(changed), code, body)
		}
		return nil
	})
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		code, body := b.call("POST", "/v1/entities/m1/earn", b.key, map[string]any{"points": 5})
		if code != 201 && code != 404 && code != 503 {
			t.Fatalf("command route on process B, %v after the change: %d %v", time.Since(changed), code, body)
		}
		if code != 201 {
			return fmt.Errorf("command route on process B, %v after the change: %d %v", time.Since(changed), code, body)
		}
		return nil
	})
	if code, body := b.call("POST", "/api/members/m1/earn", b.key, map[string]any{"points": 2}); code != 201 || dataOf(body)["type"] != "earned" {
		t.Fatalf("manifest command route on process B: %d %v", code, body)
	}
	code, body := b.call("POST", "/v1/facts", b.key, map[string]any{"entity_id": "m1", "type": "earned", "data": map[string]any{"points": "ten"}})
	if code != 400 || body["type"] == nil || !strings.HasSuffix(fmt.Sprint(body["type"]), "validation-failed") ||
		!strings.Contains(fmt.Sprint(body["errors"]), "code:type field:data.points") {
		t.Fatalf("fact breaking the schema on process B: %d %v", code, body)
	}
	if code, body := b.call("POST", "/v1/facts", b.key, map[string]any{"entity_id": "m1", "type": "earned", "data": map[string]any{"points": 3}}); code != 201 {
		t.Fatalf("fact fitting the schema on process B: %d %v", code, body)
	}
	code, body = b.call("GET", "/openapi.json", "", nil)
	components, _ := body["components"].(map[string]any)
	schemas, _ := components["schemas"].(map[string]any)
	earned, _ := schemas["member.earned.Data"].(map[string]any)
	if code != 200 || fmt.Sprint(earned["required"]) != "[points]" {
		t.Fatalf("openapi on process B: %d, member.earned.Data %v", code, earned)
	}
	if since := time.Since(changed); since > 10*time.Second {
		t.Fatalf("process B served the new type's routes and schema %v after the change, over 10s", since)
	}
	t.Logf("process B served create, commands and the fact schema of the new type %v after the upload", time.Since(changed).Round(time.Millisecond))
	code, body = b.call("GET", "/v1/entities/m1/points", b.key, nil)
	if code != 200 || fmt.Sprint(dataOf(body)["points"]) != "10" {
		t.Fatalf("read command on process B: %d %v", code, body)
	}
	// Keep the load going a little past the change on both processes.
	after := ok() + 20
	testutil.Eventually(t, 30*time.Second, "load past the change", func() bool { return ok() >= after })
	for _, ld := range loads {
		ld.Stop()
	}
	if failed() != 0 {
		t.Fatalf("%d of %d requests on the existing type failed (statuses %v %v)", failed(), ok()+failed(), loads[0].Failures(), loads[1].Failures())
	}
	t.Logf("%d requests on the existing type, none failed", ok())
}

// TestDomainAdminAPI: installing, refusing, listing and removing domain
// manifests through the operator's admin API.
func TestDomainAdminAPI(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	claims := claimsLayer
	// A manifest that names itself otherwise is most likely sent to the
	// wrong place: refused at its name, nothing stored.
	if code, body := l.putDomain("claims", strings.Replace(claims, "name: claims", "name: claims-api", 1)); code != 422 ||
		!strings.Contains(fmt.Sprint(body["errors"]), `domain/claims:1:7: name: "claims-api", but the manifest is installed as "claims"`) {
		t.Fatalf("name other than the path: %d %v", code, body)
	}
	if code, body := l.putDomain("claims", claims); code != 201 || dataOf(body)["file"] != "domain/claims" {
		t.Fatalf("install: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "claim", "id": "c1", "status": "open", "amount": 2}); code != 201 {
		t.Fatalf("create on the installed type: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c1", "type": "filed"}); code != 201 {
		t.Fatalf("fact: %d %v", code, body)
	}
	if code, body := l.putDomain("claims", claims); code != 200 {
		t.Fatalf("same manifest again: %d %v", code, body)
	}
	tenantAdmin := l.newKey("t1", "admin")
	for _, tc := range []struct {
		name, layer, src, key, ct string
		status                    int
		problem                   string
	}{
		{"retypes a field with data", "claims", strings.Replace(claims, "amount: {type: number, storage: ix_n_1}", "amount: {type: string, storage: ix_s_2}", 1), "", "", 422,
			"domain/claims:8:7: entities.claim.fields.amount: retypes field from number to string, which 1 stored entities have"},
		{"removes a fact type in use", "claims", strings.Replace(claims, "[filed, paid]", "[paid]", 1), "", "", 422,
			`domain/claims:4:3: entities.claim.facts: removes fact type "filed", which facts of stored entities have`},
		{"names a missing ledger", "more", "name: more\nversion: \"1\"\nentities:\n  badge: {ledger: nowhere, fields: {}, facts: [issued]}\n", "", "", 422,
			`domain/more:4:3: entities.badge.ledger: no built-in ledger or installed plugin is named "nowhere"`},
		{"names a ledger plugin that does not serve the type", "more", "name: more\nversion: \"1\"\nentities:\n  badge: {ledger: generic, fields: {}, facts: [issued]}\n", "", "", 422,
			`domain/more:4:3: entities.badge.ledger: ledger "generic" serves entity types campaign, contact, deal, tool, user, vendor, not "badge"`},
		{"conflicts with another layer", "more", "name: more\nversion: \"1\"\nentities:\n  claim: {ledger: builtin, fields: {}, facts: [filed]}\n", "", "", 422,
			`domain/more:4:3: entities.claim: removes field "status" declared at domain/claims:7:7`},
		{"is not YAML", "more", "entities: [", "", "", 422, "domain/more:1:11: YAML syntax error"},
		{"JSON body", "json-layer", `{"name": "json-layer", "version": "1", "entities": {"badge": {"ledger": "builtin", "fields": {}, "facts": ["issued"]}}}`, "", "application/json", 201, ""},
		{"not the operator", "more", claims, tenantAdmin, "", 403, ""},
		{"bad name", "Bad.Name", claims, "", "", 400, ""},
		{"wrong content type", "more", claims, "", "application/wasm", 415, ""},
		{"content type a manifest type only begins", "more", claims, "", "application/jsonx", 415, ""},
		{"content type in another charset", "more", claims, "", "application/yaml; charset=latin1", 415, ""},
		{"content type in UTF-8", "yaml-utf8", "name: yaml-utf8\nversion: \"1\"\nentities:\n  token: {ledger: builtin, fields: {}, facts: [issued]}\n", "", "text/yaml; charset=UTF-8", 201, ""},
		{"empty body", "more", "", "", "", 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, ct := l.op, "application/yaml"
			if tc.key != "" {
				key = tc.key
			}
			if tc.ct != "" {
				ct = tc.ct
			}
			req, _ := http.NewRequest("PUT", l.base+"/v1/admin/domain/"+tc.layer, strings.NewReader(tc.src))
			req.Header.Set("Content-Type", ct)
			req.Header.Set("X-API-Key", key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]any
			json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %v", resp.StatusCode, tc.status, body)
			}
			if tc.status >= 400 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
				t.Errorf("content type %s", resp.Header.Get("Content-Type"))
			}
			if tc.problem != "" && !strings.Contains(fmt.Sprint(body["errors"]), tc.problem) {
				t.Errorf("problems %v\nwant %s", body["errors"], tc.problem)
			}
		})
	}
	// The OpenAPI document lists every media type the 415 names.
	resp, err := http.Get(l.base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content map[string]any `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range []string{"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "application/json", "text/plain"} {
		if _, ok := doc.Paths["/v1/admin/domain/{name}"]["put"].RequestBody.Content[mt]; !ok {
			t.Errorf("the OpenAPI document does not list %s for PUT /v1/admin/domain/{name}", mt)
		}
	}
	// Refused changes left the model as it was.
	if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c1", "type": "filed"}); code != 201 {
		t.Fatalf("old model after refusals: %d %v", code, body)
	}
	// The model spans every tenant: a tenant's admin key may not list it.
	if code, body := l.call("GET", "/v1/admin/domain", tenantAdmin, nil); code != 403 {
		t.Fatalf("list with a tenant's admin key: %d %v", code, body)
	}
	code, body := l.call("GET", "/v1/admin/domain", l.op, nil)
	items, _ := dataOf(body)["items"].([]any)
	if code != 200 || len(items) != 3 {
		t.Fatalf("list: %d %v", code, body)
	}
	if code, body := l.call("DELETE", "/v1/admin/domain/claims", l.op, nil); code != 422 || !strings.Contains(fmt.Sprint(body["errors"]), "removes an entity type 1 stored entities have") {
		t.Fatalf("delete a manifest whose type has data: %d %v", code, body)
	}
	if code, body := l.call("DELETE", "/v1/admin/domain/json-layer", l.op, nil); code != 200 {
		t.Fatalf("delete: %d %v", code, body)
	}
	if code, _ := l.call("DELETE", "/v1/admin/domain/json-layer", l.op, nil); code != 404 {
		t.Fatalf("delete again: %d", code)
	}
	if code, _ := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "badge", "id": "b1"}); code != 400 {
		t.Fatalf("type of a deleted manifest: %d", code)
	}
}

// TestTypeWhoseLedgerPluginIsNotLoadedAnswers503: a type added at run time
// whose ledger plugin is installed (active in the store) but not loaded on
// this process answers 503, not the generic ledger's answer.
func TestTypeWhoseLedgerPluginIsNotLoadedAnswers503(t *testing.T) {
	l := startLive(t, "sqlite", t.TempDir())
	ctx := t.Context()
	// A stored version this process cannot load stands for one still
	// compiling: installed, not loaded.
	if err := l.a.Store.SavePluginVersion(ctx, &store.PluginBinary{Name: "points", SHA256: "broken", Version: "0.0.1", Wasm: []byte("not wasm"), CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.a.Store.ActivatePlugin(ctx, "points", "broken", 1); err != nil {
		t.Fatal(err)
	}
	if code, body := l.putDomain("loyalty", loyaltyDomain); code != 201 {
		t.Fatalf("install: %d %v", code, body)
	}
	// Creating needs no ledger decision; recording a fact does.
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "member", "id": "m1"}); code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "m1", "type": "earned", "data": map[string]any{"points": 1}})
	if code != 503 || !strings.Contains(fmt.Sprint(body["detail"]), "points ledger plugin is not loaded on this process yet") {
		t.Fatalf("fact on a type whose plugin is not loaded: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "acct-x", "type": "deposit"}); code == 503 {
		t.Fatalf("other types are not affected: %d %v", code, body)
	}
	// Its commands are not known yet: a command path is a 503 to retry,
	// not a 404; on a type whose plugin is loaded, an unknown one is a 404.
	code, header, body := l.callHeader("POST", "/v1/entities/m1/redeem", l.key, map[string]any{"points": 1})
	if code != 503 || header.Get("Retry-After") == "" || !strings.Contains(fmt.Sprint(body["detail"]), "points ledger plugin is not loaded on this process yet") {
		t.Fatalf("command path of a type whose plugin is not loaded: %d %v %v", code, header, body)
	}
	createAccount(l, "acct-y")
	if code, body := l.call("POST", "/v1/entities/acct-y/redeem", l.key, map[string]any{"points": 1}); code != 404 {
		t.Fatalf("unknown command path of a loaded plugin's type: %d %v", code, body)
	}
}

// TestDomainLayerRoutesAreServedAfterPut: a domain manifest installed
// through the admin API brings its entity type and its routes, a command
// route among them; one naming a command its loaded ledger lacks is
// refused at its file:line:col.
func TestDomainLayerRoutesAreServedAfterPut(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	createAccount(l, "acct-1")
	layer := `name: vouchers
version: "1"
entities:
  voucher:
    ledger: builtin
    fields:
      code: {type: string, required: true, storage: ix_s_1}
    facts: [redeemed]
routes:
  - {path: /api/vouchers, method: POST, entity: voucher, action: create}
  - {path: /api/accounts/:id/deposit, method: POST, entity: account, action: command, command: deposit}
  - {path: /api/accounts/:id/budget, method: GET, entity: account, action: command, command: budget}
`
	if code, body := l.call("POST", "/api/vouchers", l.key, map[string]any{"data": map[string]any{"code": "v1"}}); code != 404 {
		t.Fatalf("route before the layer: %d %v", code, body)
	}
	bad := strings.Replace(layer, "command: budget", "command: refund", 1)
	code, body := l.putDomain("vouchers", bad)
	if code != 422 || !strings.Contains(fmt.Sprint(body["errors"]), `domain/vouchers:12:94: route GET /api/accounts/:id/budget: ledger account of entity type account has no command "refund"`) {
		t.Fatalf("layer naming a missing command: %d %v", code, body)
	}
	if code, body := l.putDomain("vouchers", layer); code != 201 {
		t.Fatalf("install: %d %v", code, body)
	}
	if code, body := l.call("POST", "/api/vouchers", l.key, map[string]any{"data": map[string]any{"code": "v1"}}); code != 201 {
		t.Fatalf("create route of the layer: %d %v", code, body)
	}
	if code, body := l.call("POST", "/api/accounts/acct-1/deposit", l.key, map[string]any{"amount": 5}); code != 201 || dataOf(body)["type"] != "deposit" {
		t.Fatalf("command route, write: %d %v", code, body)
	}
	if code, body := l.call("GET", "/api/accounts/acct-1/budget", l.key, nil); code != 200 || fmt.Sprint(dataOf(body)["balance"]) != "5" {
		t.Fatalf("command route, read: %d %v", code, body)
	}
	// A layer of routes alone routes commands of types other layers declare.
	if code, body := l.putDomain("account-routes", "name: account-routes\nversion: \"1\"\nroutes:\n  - {path: /api/accounts/:id/balance, method: GET, entity: account, action: command, command: budget}\n"); code != 201 {
		t.Fatalf("install a routes-only layer: %d %v", code, body)
	}
	if code, body := l.call("GET", "/api/accounts/acct-1/balance", l.key, nil); code != 200 || fmt.Sprint(dataOf(body)["balance"]) != "5" {
		t.Fatalf("route of the routes-only layer: %d %v", code, body)
	}
}

// TestLayerAddsAFactTypeToAGenericType: examples/domain adds claim_filed
// to contact, whose ledger is the generic plugin; the plugin records it
// (it records any fact type the model declares) and the host still
// refuses a fact type the model does not declare, before the plugin.
func TestLayerAddsAFactTypeToAGenericType(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir(), func(c *app.Config) { c.Domains = []string{"../../../examples/domain"} })
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "contact", "id": "c-1", "name": "Ada", "status": "active"}); code != 201 {
		t.Fatalf("create contact: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c-1", "type": "claim_filed", "data": map[string]any{"claim": "cl-1"}}); code != 201 {
		t.Fatalf("claim_filed on a contact: %d %v", code, body)
	}
	code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c-1", "type": "claim_paid"})
	if code != 400 || !strings.Contains(fmt.Sprint(body["errors"]), "fact type claim_paid is not declared by entity type contact") {
		t.Fatalf("an undeclared fact type: %d %v", code, body)
	}
	code, body = l.call("GET", "/api/contacts/c-1/summary", l.key, nil)
	if code != 200 || fmt.Sprint(dataOf(body)["counts"]) != "map[claim_filed:1]" {
		t.Fatalf("summary through the layer's route: %d %v", code, body)
	}

	// The same file stored through the admin API (as the README's runtime
	// section does) is the layer itself: no duplicate route, and removing
	// it leaves the file's types, so it is not refused for their data.
	src, err := os.ReadFile("../../../examples/domain/claims.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := l.putDomain("claims", string(src)); code != 201 {
		t.Fatalf("store the file's manifest: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "claim", "id": "clm-1", "status": "open", "amount": 120}); code != 201 {
		t.Fatalf("create claim: %d %v", code, body)
	}
	if code, body := l.call("GET", "/api/contacts/c-1/summary", l.key, nil); code != 200 {
		t.Fatalf("summary with the layer stored too: %d %v", code, body)
	}
	if code, body := l.call("DELETE", "/v1/admin/domain/claims", l.op, nil); code != 200 && code != 204 {
		t.Fatalf("remove the stored copy: %d %v", code, body)
	}
	if code, body := l.call("GET", "/v1/entities/clm-1?entity_type=claim", l.key, nil); code != 200 {
		t.Fatalf("claim after the stored copy is removed: %d %v", code, body)
	}
}

// TestStoredManifestWaitingForItsPluginIsApplied: a stored domain
// manifest read before the plugin it needs is loaded here is refused,
// and applied once the plugin is; it was not tried again until the stored
// set changed, and the process served its old model for good.
func TestStoredManifestWaitingForItsPluginIsApplied(t *testing.T) {
	t.Parallel()
	logs := &testutil.Logs{}
	l := startLive(t, "sqlite", t.TempDir(), func(c *app.Config) { c.Logger = logs.Logger() })
	// What another process stores: its manifest reaches this one first.
	layer := &store.DomainLayer{Name: "loyalty", Source: []byte(loyaltyDomain), UpdatedAt: time.Now().UnixMilli()}
	layer.SHA256 = fmt.Sprintf("%x", sha256.Sum256(layer.Source))
	if err := l.a.Store.PutDomainLayer(context.Background(), layer, store.LayersDigest(nil)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the stored manifest to be refused", func() bool {
		return logs.Contains(`no built-in ledger or installed plugin is named \"points\"`)
	})
	// Refused here for now, and stored: its type and routes answer 503
	// to retry, not 400 and 404.
	member := map[string]any{"type": "member", "id": "m1"}
	if code, header, body := l.callHeader("POST", "/v1/entities", l.key, member); code != 503 || header.Get("Retry-After") == "" {
		t.Fatalf("create member before its manifest applies: %d %v", code, body)
	}
	if code, body := l.call("POST", "/api/members/m1/earn", l.key, map[string]any{"points": 2}); code != 503 {
		t.Fatalf("a route of the manifest not applied yet: %d %v", code, body)
	}
	if code, body := l.call("PUT", "/v1/admin/plugins/points", l.op, fixture(t, "points")); code != 201 {
		t.Fatalf("install points: %d %v", code, body)
	}
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		if code, body := l.call("POST", "/v1/entities", l.key, member); code != 201 {
			return fmt.Errorf("create member once its plugin is loaded: %d %v", code, body)
		}
		return nil
	})
	if code, body := l.call("POST", "/api/members/m1/earn", l.key, map[string]any{"points": 2}); code != 201 {
		t.Fatalf("the stored manifest's route: %d %v", code, body)
	}
}

// TestRemovedTypeStoredMeanwhileIsRestored: an entity of a type being
// removed, stored after the removal was checked (by a process still on the
// old model), makes the removal put the manifest back and answer 409; it
// answered 200 and left entities of an undeclared type, with the
// processes split between the two models for good.
func TestRemovedTypeStoredMeanwhileIsRestored(t *testing.T) {
	t.Parallel()
	logs := &testutil.Logs{}
	l := startLive(t, "postgres", testutil.Postgres(t), func(c *app.Config) { c.Logger = logs.Logger() })
	if code, body := l.putDomain("claims", claimsLayer); code != 201 {
		t.Fatalf("domain: %d %v", code, body)
	}
	type answer struct {
		code int
		body map[string]any
	}
	done := make(chan answer, 1)
	go func() {
		code, body := l.call("DELETE", "/v1/admin/domain/claims", l.op, nil)
		done <- answer{code, body}
	}()
	// The removal is stored and applied here; another process, still on
	// the old model, stores a claim.
	testutil.Eventually(t, 30*time.Second, "the removal to be applied", func() bool {
		return l.a.Platform.Domain().Entities["claim"] == nil
	})
	now := time.Now().UnixMilli()
	if err := l.a.Store.CreateEntity(context.Background(), &store.Entity{TenantID: "t1", ID: "c1", Type: "claim", Version: 1,
		Data: json.RawMessage(`{"status":"open"}`), CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	var got answer
	select {
	case got = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the removal did not answer within a minute")
	}
	if got.code != 409 || !strings.Contains(fmt.Sprint(got.body["detail"]), "claim (1 entities)") {
		t.Fatalf("a removal that lost the race: %d %v\n%s", got.code, got.body, logs)
	}
	if _, ok := l.a.Platform.Domain().Entities["claim"]; !ok {
		t.Fatal("the removed type is not declared again")
	}
	layers, err := l.a.Store.ListDomainLayers(context.Background())
	if err != nil || len(layers) != 1 || layers[0].Name != "claims" {
		t.Fatalf("stored manifests after the restore: %v %v", layers, err)
	}
}

// TestTypeNotAppliedYetIsRetried: an entity type a stored manifest adds,
// which this process has not applied yet (another process installed it
// within the last poll), answers 503 with Retry-After, not a 400 saying
// the type is unknown; once applied it is served.
func TestTypeNotAppliedYetIsRetried(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	saw503 := false
	var typ string
	for i := 0; i < 5 && !saw503; i++ {
		typ = fmt.Sprintf("gizmo%d", i)
		// Asked about just before it is stored: the answer then must not
		// stand for the one after.
		if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": typ, "id": "g1"}); code != 400 {
			t.Fatalf("a type not stored yet: %d %v", code, body)
		}
		storeLayer(t, l, typ, "name: "+typ+"\nversion: \"1\"\nentities:\n  "+typ+":\n    ledger: builtin\n    fields: {}\n    facts: [made]\n")
		code, header, body := l.callHeader("POST", "/v1/entities", l.key, map[string]any{"type": typ, "id": "g1"})
		switch {
		case code == 503 && header.Get("Retry-After") != "":
			saw503 = true
		case code == 201:
			// The poll applied it first; try with another type.
		default:
			t.Fatalf("a type stored but not applied yet: %d %v %v", code, header, body)
		}
	}
	if !saw503 {
		t.Fatal("never caught a type before the poll applied it")
	}
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": typ, "id": "g1"}); code != 201 {
			return fmt.Errorf("once applied: %d %v", code, body)
		}
		return nil
	})
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "nothing", "id": "n1"}); code != 400 {
		t.Fatalf("a type no manifest declares: %d %v", code, body)
	}
}

// TestRouteNotAppliedYetIsRetried: a route a stored domain change adds is
// a 503 to retry on a process that has not applied the change yet, as an
// entity type is, not a 404 a client would take as final.
func TestRouteNotAppliedYetIsRetried(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "account", "id": "r1", "name": "R", "status": "active", "subtype": "customer"})
	if code != 201 {
		t.Fatalf("create: %d %v", code, body)
	}
	saw503 := false
	var path string
	for i := 0; i < 5 && !saw503; i++ {
		name := fmt.Sprintf("route%d", i)
		path = "/api/" + name + "/r1"
		storeLayer(t, l, name, "name: "+name+"\nversion: \"1\"\nroutes:\n  - {path: /api/"+name+"/:id, method: GET, entity: account, action: get}\n")
		code, header, body := l.callHeader("GET", path, l.key, nil)
		switch {
		case code == 503 && header.Get("Retry-After") != "":
			saw503 = true
		case code == 200:
			// The poll applied it first; try with another route.
		default:
			t.Fatalf("a route stored but not applied yet: %d %v %v", code, header, body)
		}
	}
	if !saw503 {
		t.Fatal("never caught a route before the poll applied it")
	}
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		if code, body := l.call("GET", path, l.key, nil); code != 200 {
			return fmt.Errorf("once applied: %d %v", code, body)
		}
		return nil
	})
	if code, body := l.call("GET", "/api/nothing/r1", l.key, nil); code != 404 {
		t.Fatalf("a route no manifest declares: %d %v", code, body)
	}
	// A removal adds no route: until it is applied here, a path no route
	// serves stays a 404 (the removed route itself still serves).
	ctx := context.Background()
	stored, err := l.a.Store.ListDomainLayers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.a.Store.DeleteDomainLayer(ctx, "route0", store.LayersDigest(stored)); err != nil {
		t.Fatal(err)
	}
	if code, header, body := l.callHeader("GET", "/api/nothing/r1", l.key, nil); code != 404 {
		t.Fatalf("a path no route serves while a removal is not applied: %d %v %v", code, header, body)
	}
}

// storeLayer stores a domain manifest straight into the store, as another
// process would, without this process applying it.
func storeLayer(t *testing.T, l *live, name, source string) {
	t.Helper()
	ctx := context.Background()
	stored, err := l.a.Store.ListDomainLayers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	layer := &store.DomainLayer{Name: name, Source: []byte(source), UpdatedAt: time.Now().UnixMilli()}
	layer.SHA256 = fmt.Sprintf("%x", sha256.Sum256(layer.Source))
	if err := l.a.Store.PutDomainLayer(ctx, layer, store.LayersDigest(stored)); err != nil {
		t.Fatal(err)
	}
}

// TestLedgerPluginAbsentAtStartAnswers503: a domain file naming a ledger
// plugin that no source holds at start-up serves its type, and the type's
// facts and commands answer 503 until the plugin is installed; the
// built-in ledger stood in, recorded facts the plugin refuses, and left
// the state the plugin keeps behind those facts.
func TestLedgerPluginAbsentAtStartAnswers503(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "loyalty.yaml")
	if err := os.WriteFile(file, []byte(loyaltyDomain), 0o600); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, "sqlite", t.TempDir(), func(c *app.Config) { c.Domains = []string{file} })
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "member", "id": "m1"}); code != 201 {
		t.Fatalf("create member: %d %v", code, body)
	}
	earned := map[string]any{"entity_id": "m1", "type": "earned", "data": map[string]any{"points": 5}}
	for _, req := range []struct {
		path, detail string
		body         any
	}{
		{"/v1/facts", "points ledger plugin is not loaded on this process yet", earned},
		{"/api/members/m1/earn", "not available yet", map[string]any{"points": 5}},
	} {
		code, header, body := l.callHeader("POST", req.path, l.key, req.body)
		if code != 503 || header.Get("Retry-After") == "" || !strings.Contains(fmt.Sprint(body["detail"]), req.detail) {
			t.Fatalf("%s before the plugin is installed: %d %v %v", req.path, code, header, body)
		}
	}
	if code, body := l.call("PUT", "/v1/admin/plugins/points", l.op, fixture(t, "points")); code != 201 {
		t.Fatalf("install points: %d %v", code, body)
	}
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		if code, body := l.call("POST", "/api/members/m1/earn", l.key, map[string]any{"points": 5}); code != 201 {
			return fmt.Errorf("earn once the plugin is loaded: %d %v", code, body)
		}
		return nil
	})
	code, body := l.call("GET", "/v1/entities/m1/facts", l.key, nil)
	data, _ := body["data"].(map[string]any)
	if items, _ := data["items"].([]any); code != 200 || len(items) != 1 {
		t.Fatalf("facts of m1: %d %v, want only the one the plugin decided", code, body)
	}
}

// TestRefusedDomainManifestListsItsLedgerProblemsToo: a domain manifest
// with a problem of its own is refused with its types' ledger problems
// beside it, so one answer lists every problem; the unknown ledger was
// reported only once the misspelt field type was fixed.
func TestRefusedDomainManifestListsItsLedgerProblemsToo(t *testing.T) {
	t.Parallel()
	l := startLive(t, "sqlite", t.TempDir())
	src := "name: zz\nversion: \"1\"\nentities:\n" +
		"  zz:\n    ledger: nope\n    fields: {status: {type: strng, storage: ix_s_1}}\n    facts: [made]\n" +
		"  yy:\n    ledger: account\n    fields: {}\n    facts: [made]\n"
	code, body := l.putDomain("zz", src)
	errs := fmt.Sprint(body["errors"])
	for _, want := range []string{
		`domain/zz:4:3: entities.zz.ledger: no built-in ledger or installed plugin is named "nope"`,
		`domain/zz:6:29: entities.zz.fields.status.type: "strng" is not one of`,
		`domain/zz:8:3: entities.yy.ledger: ledger "account" serves entity types account, not "yy"`,
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("no problem %q", want)
		}
	}
	if code != 422 || t.Failed() {
		t.Fatalf("%d %v", code, body)
	}
	if code, body := l.call("GET", "/v1/admin/domain", l.op, nil); code != 200 || strings.Contains(fmt.Sprint(body), "zz") {
		t.Fatalf("the refused manifest is listed: %d %v", code, body)
	}
}
