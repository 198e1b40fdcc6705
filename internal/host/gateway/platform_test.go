package gateway_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
)

func TestUnauthorized(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		for _, tc := range []struct{ name, key string }{
			{"missing", ""},
			{"malformed", "not-a-key"},
			{"unknown", "fl_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		} {
			for _, path := range []string{"/v1/entities/x?entity_type=account", "/v1/facts/x", "/v1/configs/x"} {
				r := h.req(http.MethodGet, path, tc.key, nil)
				r.wantProblem(t, 401, "unauthorized", "Unauthorized", "Invalid or missing API key")
				if len(r.body) != 6 {
					t.Errorf("%s %s: 401 body has %d members, want exactly type,title,status,detail,instance,trace_id: %s", tc.name, path, len(r.body), r.raw)
				}
			}
		}
	})
}

// TestTwoKeysAreRefused: a request with X-API-Key twice, valid keys of
// two tenants, is refused like a bad key; it was served as the first
// key's tenant.
func TestTwoKeysAreRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		a, b := h.newKey("tenant-a", "live"), h.newKey("tenant-b", "live")
		for _, keys := range [][]string{{a, b}, {a, a}} {
			r := httptest.NewRequest(http.MethodGet, "/v1/configs?limit=1", nil)
			for _, k := range keys {
				r.Header.Add("X-API-Key", k)
			}
			resp, err := h.srv.App().Test(r, 10_000)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 || !strings.Contains(string(body), "Invalid or missing API key") {
				t.Fatalf("two X-API-Key headers: %d %s", resp.StatusCode, body)
			}
		}
		h.req("GET", "/v1/configs?limit=1", a, nil).wantStatus(t, 200)
	})
}

func TestRevokedKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		key := h.newKey("tenant-a", "live")
		h.req("GET", "/v1/configs?limit=1", key, nil).wantStatus(t, 200)
		list := h.req("GET", "/v1/admin/keys", h.adminA, nil).wantStatus(t, 200)
		var id string
		for _, it := range list.data()["items"].([]any) {
			m := it.(map[string]any)
			if strings.HasPrefix(key, str(m["prefix"])) {
				id = str(m["id"])
			}
			if _, leaked := m["hash"]; leaked {
				t.Fatal("key listing leaks the hash")
			}
		}
		revoked := h.req("DELETE", "/v1/admin/keys/"+id, h.adminA, nil).wantStatus(t, 200).data()["revoked_at"]
		h.req("GET", "/v1/configs", key, nil).wantProblem(t, 401, "unauthorized", "Unauthorized", "Invalid or missing API key")
		// The answer is the key as stored; revoking it again changes
		// nothing and answers the first revocation's time.
		var stored any
		for _, it := range h.req("GET", "/v1/admin/keys", h.adminA, nil).wantStatus(t, 200).data()["items"].([]any) {
			if m := it.(map[string]any); m["id"] == id {
				stored = m["revoked_at"]
			}
		}
		again := h.req("DELETE", "/v1/admin/keys/"+id, h.adminA, nil).wantStatus(t, 200).data()["revoked_at"]
		if revoked == nil || revoked != stored || again != stored {
			t.Fatalf("revoked_at: answered %v, then %v; stored %v", revoked, again, stored)
		}
	})
}

func TestAdminOnly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.req("GET", "/v1/admin/keys", h.keyA, nil).wantProblem(t, 403, "forbidden", "Forbidden", "This endpoint requires an admin API key")
		// Names are labels for people: at most 200 characters.
		h.req("POST", "/v1/admin/keys", h.adminA, map[string]any{"mode": "test", "name": strings.Repeat("é", 201)}).
			wantProblem(t, 400, "validation-failed", "Validation Failed", "")
		h.req("POST", "/v1/configs", h.keyA, map[string]any{"type": "pricing", "name": strings.Repeat("n", 201), "settings": map[string]any{}}).
			wantProblem(t, 400, "validation-failed", "Validation Failed", "")
		h.req("POST", "/v1/admin/keys", h.adminA, map[string]any{"mode": "test", "name": strings.Repeat("é", 200)}).wantStatus(t, 201)
		r := h.req("POST", "/v1/admin/keys", h.adminA, map[string]any{"mode": "test", "name": "ci"}).wantStatus(t, 201)
		newKey := str(r.data()["key"])
		if !strings.HasPrefix(newKey, "fl_test_") {
			t.Fatalf("new key %q", newKey)
		}
		// Shown once: no cache keeps it.
		if cc := r.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("new key answered with Cache-Control %q, want no-store", cc)
		}
		h.req("GET", "/v1/configs", newKey, nil).wantStatus(t, 200)
		h.req("POST", "/v1/admin/keys", h.adminA, map[string]any{"mode": "root"}).wantStatus(t, 400)
	})
}

func TestCreateAndGetEntity(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		r := h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "account", "name": "Acme", "status": "active", "subtype": "customer", "balance_note": "extra fields allowed"}).wantStatus(t, 201)
		d := r.data()
		id := str(d["id"])
		if !strings.HasPrefix(id, "ent_") {
			t.Fatalf("generated id %q lacks ent_ prefix", id)
		}
		meta, _ := r.body["meta"].(map[string]any)
		if str(meta["request_id"]) != r.header.Get("X-Request-Id") || meta["timestamp"] == nil {
			t.Fatalf("meta %v", meta)
		}
		ent := d["entity"].(map[string]any)
		if ent["version"] != json.Number("1") || str(ent["type"]) != "account" || str(ent["tenant_id"]) != "tenant-a" {
			t.Fatalf("entity %v", ent)
		}

		g := h.req("GET", "/v1/entities/"+id+"?entity_type=account", h.keyA, nil).wantStatus(t, 200).data()
		data := g["data"].(map[string]any)
		if str(g["id"]) != id || str(data["name"]) != "Acme" || str(data["balance_note"]) != "extra fields allowed" {
			t.Fatalf("get %v", g)
		}
		for _, k := range []string{"id", "type", "version", "data", "created_at", "updated_at"} {
			if _, ok := g[k]; !ok {
				t.Errorf("entity object lacks %s", k)
			}
		}

		// Client-chosen id.
		h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "asset", "id": "line-1", "name": "Line", "status": "on", "identifier": "+15550100", "subtype": "phone"}).wantStatus(t, 201)
		h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "asset", "id": "line-1", "name": "Line", "status": "on", "identifier": "+15550100", "subtype": "phone"}).
			wantProblem(t, 409, "conflict", "Conflict", "Entity line-1 already exists")
		// The same id is free in another tenant.
		h.req("POST", "/v1/entities", h.keyB, map[string]any{"type": "asset", "id": "line-1", "name": "B", "status": "on", "identifier": "x", "subtype": "phone"}).wantStatus(t, 201)
	})
}

// Path parameters are matched decoded (fiber's are the raw path bytes): an
// id sent percent-encoded finds its entity, and a detail quotes the id
// the client meant, not its escapes.
func TestPercentEncodedPathParameters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "asset", "id": "line_1", "name": "Line", "status": "on", "identifier": "x", "subtype": "phone"}).wantStatus(t, 201)
		if g := h.req("GET", "/v1/entities/line%5F1?entity_type=asset", h.keyA, nil).wantStatus(t, 200).data(); str(g["id"]) != "line_1" {
			t.Fatalf("get by encoded id: %v", g)
		}
		h.req("GET", "/v1/facts/fct%3Cx%3E", h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "Fact fct<x> not found")
	})
}

func TestEntityErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "spaceship", "name": "x"}).
			wantProblem(t, 400, "bad-request", "Bad Request", "Unknown entity type: spaceship")
		h.req("GET", "/v1/entities/ent_x", h.keyA, nil).
			wantProblem(t, 400, "bad-request", "Bad Request", "entity_type required")
		h.req("GET", "/v1/entities/ent_x?entity_type=spaceship", h.keyA, nil).
			wantProblem(t, 400, "bad-request", "Bad Request", "Unknown entity type: spaceship")
		h.req("GET", "/v1/entities/ent_missing?entity_type=account", h.keyA, nil).
			wantProblem(t, 404, "not-found", "Not Found", "Entity ent_missing not found")

		r := h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "account", "name": 42})
		r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
		got := r.fieldErrors()
		want := map[string]string{"name": "type", "status": "required", "subtype": "required"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("field errors %v, want %v", got, want)
		}
		// Shape errors and the entity type's errors in one response.
		r = h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "account", "id": "no spaces", "metadata": 5, "name": 42})
		want = map[string]string{"id": "format", "metadata": "type", "name": "type", "status": "required", "subtype": "required"}
		if got := r.fieldErrors(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("field errors %v, want %v", got, want)
		}
		r = h.req("POST", "/v1/entities", h.keyA, map[string]any{"name": "x"})
		r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
		if r.fieldErrors()["type"] != "required" {
			t.Fatalf("missing type: %s", r.raw)
		}
		r = h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "deal", "name": "D", "stage": "s", "status": "maybe"})
		if r.fieldErrors()["status"] != "enum" {
			t.Fatalf("enum: %s", r.raw)
		}
		// Stored entity of another type answers 404 for a type mismatch.
		id := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
		h.req("GET", "/v1/entities/"+id+"?entity_type=asset", h.keyA, nil).
			wantProblem(t, 404, "not-found", "Not Found", "Entity "+id+" not found")
	})
}

func TestUpdateEntityVersionConflict(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		id := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
		u := h.req("PATCH", "/v1/entities/"+id, h.keyA, map[string]any{"version": 1, "name": "Acme 2"}).wantStatus(t, 200).data()
		if u["version"] != json.Number("2") {
			t.Fatalf("version after update: %v", u["version"])
		}
		h.req("PATCH", "/v1/entities/"+id, h.keyA, map[string]any{"version": 1, "name": "stale"}).
			wantProblem(t, 409, "conflict", "Conflict", "Entity "+id+" is at version 2, not 1")
		g := h.req("GET", "/v1/entities/"+id+"?entity_type=account", h.keyA, nil).wantStatus(t, 200).data()
		if str(g["data"].(map[string]any)["name"]) != "Acme 2" || g["version"] != json.Number("2") {
			t.Fatalf("conflicting update changed the row: %v", g)
		}
		h.req("PATCH", "/v1/entities/"+id, h.keyB, map[string]any{"version": 2, "name": "theirs"}).
			wantProblem(t, 404, "not-found", "Not Found", "Entity "+id+" not found")
	})
}

func TestListEntities(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		for i := 0; i < 7; i++ {
			status := "active"
			if i%2 == 1 {
				status = "closed"
			}
			h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "account", "name": fmt.Sprint("A", i), "status": status, "subtype": "customer"}).wantStatus(t, 201)
		}
		h.req("POST", "/v1/entities", h.keyB, validAccount).wantStatus(t, 201)
		seen := map[string]bool{}
		cursor := ""
		pages := 0
		for {
			path := "/v1/entities?entity_type=account&status=active&limit=2"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			d := h.req("GET", path, h.keyA, nil).wantStatus(t, 200).data()
			for _, it := range d["items"].([]any) {
				m := it.(map[string]any)
				if seen[str(m["id"])] {
					t.Fatalf("duplicate %s across pages", m["id"])
				}
				seen[str(m["id"])] = true
				if str(m["data"].(map[string]any)["status"]) != "active" || str(m["tenant_id"]) != "tenant-a" {
					t.Fatalf("filter leaked %v", m)
				}
			}
			pages++
			if d["hasMore"] != true {
				if _, ok := d["cursor"]; ok {
					t.Fatalf("last page has a cursor")
				}
				break
			}
			cursor = str(d["cursor"])
		}
		if len(seen) != 4 || pages != 2 {
			t.Fatalf("saw %d active accounts in %d pages, want 4 in 2", len(seen), pages)
		}
		// Out of 1..200, limit=0 included, is refused on every listing.
		for _, path := range []string{"/v1/entities?entity_type=account&limit=", "/v1/facts?limit=", "/v1/configs?limit=",
			"/v1/entities/" + str(h.req("GET", "/v1/entities?entity_type=account&limit=1", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)[0].(map[string]any)["id"]) + "/facts?limit="} {
			for _, l := range []string{"201", "0", "-1"} {
				if got := h.req("GET", path+l, h.keyA, nil).fieldErrors()["limit"]; got != "range" {
					t.Errorf("GET %s%s: limit error %q, want range", path, l, got)
				}
			}
		}
		r := h.req("GET", "/v1/entities?entity_type=account&nickname=x", h.keyA, nil)
		if r.fieldErrors()["nickname"] != "unknown_field" {
			t.Fatalf("unindexed filter: %s", r.raw)
		}
		h.req("GET", "/v1/entities?entity_type=account&cursor=%%%", h.keyA, nil).wantStatus(t, 400)
	})
}

func TestFacts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		id := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
		var ids []string
		for i := 1; i <= 3; i++ {
			f := h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": id, "type": "deposit", "subtype": "manual", "data": map[string]any{"amount": 0.1}}).wantStatus(t, 201).data()
			if f["seq"] != json.Number(fmt.Sprint(i)) || !strings.HasPrefix(str(f["id"]), "fct_") || str(f["entity_type"]) != "account" {
				t.Fatalf("fact %d: %v", i, f)
			}
			ids = append(ids, str(f["id"]))
		}
		g := h.req("GET", "/v1/facts/"+ids[1], h.keyA, nil).wantStatus(t, 200).data()
		if str(g["id"]) != ids[1] || str(g["subtype"]) != "manual" || g["data"].(map[string]any)["amount"] != json.Number("0.1") {
			t.Fatalf("get fact %v", g)
		}
		// Entity version follows its ledger.
		e := h.req("GET", "/v1/entities/"+id+"?entity_type=account", h.keyA, nil).wantStatus(t, 200).data()
		if e["version"] != json.Number("4") {
			t.Fatalf("entity version after 3 facts: %v", e["version"])
		}
		l := h.req("GET", "/v1/entities/"+id+"/facts?limit=2", h.keyA, nil).wantStatus(t, 200).data()
		if len(l["items"].([]any)) != 2 || l["hasMore"] != true {
			t.Fatalf("ledger page 1: %v", l)
		}
		l = h.req("GET", "/v1/entities/"+id+"/facts?limit=2&cursor="+str(l["cursor"]), h.keyA, nil).wantStatus(t, 200).data()
		if items := l["items"].([]any); len(items) != 1 || items[0].(map[string]any)["seq"] != json.Number("3") {
			t.Fatalf("ledger page 2: %v", l)
		}

		h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": "ent_nope", "type": "deposit"}).
			wantProblem(t, 404, "not-found", "Not Found", "Entity ent_nope not found")
		r := h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": id, "type": "invocation"})
		r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
		if r.fieldErrors()["type"] != "enum" {
			t.Fatalf("undeclared fact type: %s", r.raw)
		}
		r = h.req("POST", "/v1/facts", h.keyA, map[string]any{"data": "x", "colour": 1})
		want := map[string]string{"entity_id": "required", "type": "required", "data": "type", "colour": "unknown_field"}
		if got := r.fieldErrors(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("field errors %v, want %v", got, want)
		}
		h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": id, "type": "deposit", "data": map[string]any{"amount": "1"}, "expected_version": 2}).
			wantProblem(t, 409, "conflict", "Conflict", "Entity "+id+" is at version 4, not 2")
		h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": id, "type": "deposit", "data": map[string]any{"amount": "1"}, "expected_version": 4}).wantStatus(t, 201)
		// No entity is at version 0: asking for it is a mistake, not "no check".
		r = h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": id, "type": "deposit", "data": map[string]any{"amount": "1"}, "expected_version": 0})
		if got := r.fieldErrors(); r.status != 400 || got["expected_version"] != "range" {
			t.Fatalf("expected_version 0: %d %s", r.status, r.raw)
		}
		// Fact times run to the end of the year 9999: projections bucket
		// them by four-digit years.
		r = h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": id, "type": "deposit", "data": map[string]any{"amount": "1"}, "timestamp": platform.MaxFactTime + 1})
		if got := r.fieldErrors(); r.status != 400 || got["timestamp"] != "range" || !strings.Contains(string(r.raw), "9999-12-31T23:59:59.999Z") {
			t.Fatalf("timestamp after 9999: %d %s", r.status, r.raw)
		}
		h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": id, "type": "deposit", "data": map[string]any{"amount": "1"}, "timestamp": platform.MaxFactTime}).wantStatus(t, 201)
		// 0 would be read as "now": refused, as leaving it out means that.
		if r := h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": id, "type": "deposit", "data": map[string]any{"amount": "1"}, "timestamp": 0}); r.status != 400 || r.fieldErrors()["timestamp"] != "range" {
			t.Fatalf("timestamp 0: %d %s", r.status, r.raw)
		}
		h.req("GET", "/v1/facts/fct_missing", h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "Fact fct_missing not found")
	})
}

// TestConcurrentConfigUpdates: updates without a version all land, one
// version each (a lost race is read again and built on); updates naming
// one version are checked, so exactly one of them lands.
func TestConcurrentConfigUpdates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		id := str(h.req("POST", "/v1/configs", h.keyA, map[string]any{"type": "pricing", "settings": map[string]any{"rate": 0}}).wantStatus(t, 201).data()["id"])
		put := func(body map[string]any) []int {
			const writers = 10
			statuses := make([]int, writers)
			var wg sync.WaitGroup
			for i := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					b := map[string]any{"settings": map[string]any{"rate": i}}
					for k, v := range body {
						b[k] = v
					}
					statuses[i] = h.req("PUT", "/v1/configs/"+id, h.keyA, b).status
				}()
			}
			wg.Wait()
			return statuses
		}
		if got := put(nil); strings.Count(fmt.Sprint(got), "200") != 10 {
			t.Fatalf("unversioned updates: %v, want ten 200s", got)
		}
		vs := h.req("GET", "/v1/configs/"+id+"/versions", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)
		if len(vs) != 11 {
			t.Fatalf("%d versions after ten updates, want 11", len(vs))
		}
		got := put(map[string]any{"version": 11})
		if strings.Count(fmt.Sprint(got), "200") != 1 || strings.Count(fmt.Sprint(got), "409") != 9 {
			t.Fatalf("updates of version 11: %v, want one 200 and nine 409s", got)
		}
	})
}

func TestConfigs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		c := h.req("POST", "/v1/configs", h.keyA, map[string]any{"type": "pricing", "scope_type": "global", "settings": map[string]any{"rate": 1}}).wantStatus(t, 201).data()
		id := str(c["id"])
		if !strings.HasPrefix(id, "cfg_") || c["version"] != json.Number("1") || str(c["status"]) != "active" || c["superseded_at"] != nil {
			t.Fatalf("created %v", c)
		}
		u := h.req("PUT", "/v1/configs/"+id, h.keyA, map[string]any{"settings": map[string]any{"rate": 2}}).wantStatus(t, 200).data()
		if u["version"] != json.Number("2") || u["settings"].(map[string]any)["rate"] != json.Number("2") || str(u["type"]) != "pricing" {
			t.Fatalf("updated %v", u)
		}
		h.req("PUT", "/v1/configs/"+id, h.keyA, map[string]any{"version": 1, "settings": map[string]any{}}).
			wantProblem(t, 409, "conflict", "Conflict", "Config "+id+" is at version 2, not 1")
		// No config is at version 0: asking for it is a mistake, not "no check".
		if r := h.req("PUT", "/v1/configs/"+id, h.keyA, map[string]any{"version": 0, "settings": map[string]any{}}); r.status != 400 || r.fieldErrors()["version"] != "range" {
			t.Fatalf("version 0: %d %s", r.status, r.raw)
		}
		vs := h.req("GET", "/v1/configs/"+id+"/versions", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)
		if len(vs) != 2 {
			t.Fatalf("versions %v", vs)
		}
		v1, v2 := vs[0].(map[string]any), vs[1].(map[string]any)
		if v1["version"] != json.Number("1") || v1["superseded_at"] != v2["created_at"] || v2["superseded_at"] != nil {
			t.Fatalf("version history %v", vs)
		}
		a := h.req("DELETE", "/v1/configs/"+id, h.keyA, nil).wantStatus(t, 200).data()
		if str(a["status"]) != "archived" {
			t.Fatalf("archived %v", a)
		}
		if n := len(h.req("GET", "/v1/configs/"+id+"/versions", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)); n != 2 {
			t.Fatalf("versions after archive: %d", n)
		}
		h.req("GET", "/v1/configs/"+id+"/versions/1", h.keyA, nil).wantStatus(t, 200)
		h.req("PUT", "/v1/configs/"+id, h.keyA, map[string]any{"settings": map[string]any{}}).
			wantProblem(t, 409, "conflict", "Conflict", "Config "+id+" is archived")
		r := h.req("POST", "/v1/configs", h.keyA, map[string]any{"settings": 3})
		if fmt.Sprint(r.fieldErrors()) != fmt.Sprint(map[string]string{"type": "required", "settings": "type"}) {
			t.Fatalf("config validation: %s", r.raw)
		}
		h.req("GET", "/v1/configs/cfg_missing", h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "Config cfg_missing not found")
	})
}

func TestTenantIsolation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
		fct := str(h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": ent, "type": "deposit", "data": map[string]any{"amount": "1"}}).wantStatus(t, 201).data()["id"])
		cfg := str(h.req("POST", "/v1/configs", h.keyA, map[string]any{"type": "pricing", "settings": map[string]any{}}).wantStatus(t, 201).data()["id"])

		for _, tc := range []struct{ method, path, detail string }{
			{"GET", "/v1/entities/" + ent + "?entity_type=account", "Entity " + ent + " not found"},
			{"GET", "/v1/entities/" + ent + "/facts", "Entity " + ent + " not found"},
			{"GET", "/v1/facts/" + fct, "Fact " + fct + " not found"},
			{"GET", "/v1/configs/" + cfg, "Config " + cfg + " not found"},
			{"GET", "/v1/configs/" + cfg + "/versions", "Config " + cfg + " not found"},
			{"DELETE", "/v1/configs/" + cfg, "Config " + cfg + " not found"},
		} {
			h.req(tc.method, tc.path, h.keyB, nil).wantProblem(t, 404, "not-found", "Not Found", tc.detail)
		}
		h.req("PUT", "/v1/configs/"+cfg, h.keyB, map[string]any{"settings": map[string]any{}}).wantProblem(t, 404, "not-found", "Not Found", "Config "+cfg+" not found")
		h.req("POST", "/v1/facts", h.keyB, map[string]any{"entity_id": ent, "type": "deposit"}).wantProblem(t, 404, "not-found", "Not Found", "Entity "+ent+" not found")
		if items := h.req("GET", "/v1/entities?entity_type=account", h.keyB, nil).wantStatus(t, 200).data()["items"].([]any); len(items) != 0 {
			t.Fatalf("tenant B lists tenant A's entities: %v", items)
		}
		// Tenant A's data is untouched by B's attempts.
		if a := h.req("GET", "/v1/configs/"+cfg, h.keyA, nil).wantStatus(t, 200).data(); str(a["status"]) != "active" {
			t.Fatalf("tenant B archived tenant A's config")
		}
	})
}

func TestIdempotency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		first := h.req("POST", "/v1/entities", h.keyA, validAccount, "Idempotency-Key", "k-1").wantStatus(t, 201)
		again := h.req("POST", "/v1/entities", h.keyA, validAccount, "Idempotency-Key", "k-1").wantStatus(t, 201)
		again.wantReplayOf(t, first)
		h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "account", "name": "Other", "status": "a", "subtype": "b"}, "Idempotency-Key", "k-1").
			wantProblem(t, 422, "unprocessable", "Unprocessable Entity", "This Idempotency-Key was already used with a different request")
		// Keys are per tenant.
		h.req("POST", "/v1/entities", h.keyB, validAccount, "Idempotency-Key", "k-1").wantStatus(t, 201)

		// Concurrent duplicates write once.
		var wg sync.WaitGroup
		statuses := make([]int, 8)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "vendor", "name": "V", "status": "active"}, "Idempotency-Key", "k-conc").status
			}()
		}
		wg.Wait()
		for _, s := range statuses {
			if s != 201 && s != 409 {
				t.Fatalf("concurrent duplicate answered %d", s)
			}
		}
		if items := h.req("GET", "/v1/entities?entity_type=vendor", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any); len(items) != 1 {
			t.Fatalf("concurrent duplicates wrote %d vendors, want 1", len(items))
		}

		// Facts too.
		ent := str(first.data()["id"])
		f1 := h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": ent, "type": "deposit", "data": map[string]any{"amount": "1"}}, "Idempotency-Key", "f-1").wantStatus(t, 201)
		f2 := h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": ent, "type": "deposit", "data": map[string]any{"amount": "1"}}, "Idempotency-Key", "f-1").wantStatus(t, 201)
		if str(f1.data()["id"]) != str(f2.data()["id"]) {
			t.Fatal("fact append replay recorded a second fact")
		}
		if n := len(h.req("GET", "/v1/entities/"+ent+"/facts", h.keyA, nil).data()["items"].([]any)); n != 1 {
			t.Fatalf("facts after replay: %d", n)
		}
		// A failed first attempt releases the key.
		h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": "ent_nope", "type": "deposit"}, "Idempotency-Key", "f-2").wantStatus(t, 404)
		h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": "ent_nope", "type": "deposit"}, "Idempotency-Key", "f-2").wantStatus(t, 404)
	})
}

func TestHostErrors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.req("GET", "/nowhere", "", nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches GET /nowhere")
		r := h.req("PATCH", "/v1/facts", h.keyA, map[string]any{})
		r.wantProblem(t, 405, "method-not-allowed", "Method Not Allowed", "Method PATCH is not allowed on /v1/facts")
		if r.header.Get("Allow") == "" {
			t.Errorf("405 without Allow header")
		}
		// A doubled slash matches no route: a 404, not a 405 whose Allow
		// lists the method refused.
		h.req("GET", "//v1/entities/e1?entity_type=account", h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches GET //v1/entities/e1")
		h.req("POST", "//v1/facts", "", nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches POST //v1/facts")
		// So does a trailing slash, an empty last segment.
		h.req("PATCH", "/v1/facts/", h.keyA, map[string]any{}).wantProblem(t, 404, "not-found", "Not Found", "No route matches PATCH /v1/facts/")
		h.req("GET", "/v1/facts/", h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches GET /v1/facts/")
		h.req("GET", "/v1/entities/e1/?entity_type=account", h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches GET /v1/entities/e1/")
		h.req("GET", "/health/", "", nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches GET /health/")
		// Pages for people keep the slash a browser may add.
		if resp, err := h.srv.App().Test(mustRequest("GET", "/docs/"), 5000); err != nil || resp.StatusCode != 200 {
			t.Errorf("GET /docs/: %v %v", resp, err)
		}
		h.req("POST", "/v1/entities", h.keyA, `{"type": "account",`).wantProblem(t, 400, "bad-request", "Bad Request", "")
		h.req("POST", "/v1/entities", h.keyA, `[1,2]`).wantProblem(t, 400, "bad-request", "Bad Request", "")
		deep := `{"type":"account","x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`
		h.req("POST", "/v1/entities", h.keyA, deep).wantProblem(t, 400, "bad-request", "Bad Request", "Malformed JSON body: nested more than 10000 levels deep at byte 10022")
		h.req("POST", "/v1/entities", h.keyA, "").wantProblem(t, 400, "bad-request", "Bad Request", "Request body is required: send a JSON object")
		// encoding/json named the mark's first byte as a letter: "invalid character 'ï'".
		h.req("POST", "/v1/entities", h.keyA, "\xEF\xBB\xBF"+`{"type":"account"}`).wantProblem(t, 400, "bad-request", "Bad Request",
			"Malformed JSON body: it starts with a byte order mark (EF BB BF); send the JSON without it")
		h.req("POST", "/v1/entities", h.keyA, `{"type":"account"}`, "Content-Type", "text/plain").
			wantProblem(t, 415, "unsupported-media-type", "Unsupported Media Type", "Content-Type must be application/json (got text/plain)")
		h.req("POST", "/v1/entities", h.keyA, `{"type":"account"}`, "Content-Type", "application/json; charset=latin1").
			wantProblem(t, 415, "unsupported-media-type", "Unsupported Media Type", "JSON bodies are UTF-8: charset latin1 is not accepted")
		h.req("POST", "/v1/entities", h.keyA, validAccount, "Content-Type", "application/json; charset=UTF-8").wantStatus(t, 201)
		// A compressed body is refused before anything inflates it: 8 MiB
		// of JSON in 8 KiB of gzip was inflated whole, then refused as too
		// large.
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write([]byte(`{"type":"account","name":"` + strings.Repeat("x", 8<<20) + `"}`))
		zw.Close()
		for _, key := range []string{h.keyA, ""} {
			r := h.req("POST", "/v1/entities", key, gz.String(), "Content-Encoding", "gzip")
			r.wantProblem(t, 415, "unsupported-media-type", "Unsupported Media Type", "Content-Encoding gzip is not accepted: send the request body uncompressed")
			if got := r.header.Get("Accept-Encoding"); got != "identity" {
				t.Errorf("Accept-Encoding %q on the 415, want identity", got)
			}
		}
		h.req("POST", "/v1/entities", h.keyA, `{"type":"account","id":"plain","name":"A","status":"active","subtype":"customer"}`, "Content-Encoding", "identity").wantStatus(t, 201)
		// Every value counts, in one header or repeated: fiber inflates by
		// one that a check reading the first would miss.
		h.req("POST", "/v1/entities", h.keyA, gz.String(), "Content-Encoding", "identity, gzip").
			wantProblem(t, 415, "unsupported-media-type", "Unsupported Media Type", "Content-Encoding gzip is not accepted: send the request body uncompressed")
		twice := httptest.NewRequest("POST", "/v1/entities", strings.NewReader(gz.String()))
		twice.Header.Set("Content-Type", "application/json")
		twice.Header.Set("X-API-Key", h.keyA)
		twice.Header.Add("Content-Encoding", "identity")
		twice.Header.Add("Content-Encoding", "gzip")
		resp, err := h.srv.App().Test(twice, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		decode(t, "POST", "/v1/entities", resp).wantProblem(t, 415, "unsupported-media-type", "Unsupported Media Type", "Content-Encoding gzip is not accepted: send the request body uncompressed")
		// fiber's in-memory test transport refuses oversized bodies itself,
		// so this one goes over a real loopback connection.
		big := `{"type":"account","name":"` + strings.Repeat("x", 70<<10) + `"}`
		h.overHTTP("POST", "/v1/entities", h.keyA, big).wantProblem(t, 413, "payload-too-large", "Payload Too Large", "Request body exceeds the limit of 65536 bytes")
	})
}

func TestInternalErrorLeaksNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.req("GET", "/v1/facts/fct_x", h.keyA, nil).wantStatus(t, 404) // caches the key
		h.store.Close()
		r := h.req("GET", "/v1/facts/fct_x", h.keyA, nil)
		r.wantProblem(t, 500, "internal", "Internal Server Error", "An internal error occurred; quote the trace_id when reporting it")
		for _, leak := range []string{"sql", "closed", "pool", "platform:"} {
			if strings.Contains(strings.ToLower(string(r.raw)), leak) {
				t.Fatalf("500 body leaks %q: %s", leak, r.raw)
			}
		}
	})
}

func TestRequestID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		// A client's X-Request-Id does not become the request id: the
		// contract has it unique per request, and two requests may send
		// the same (or a problem type's slug, as /errors/<id> would then
		// name that type's page).
		seen := map[string]bool{}
		for _, sent := range []string{"client-trace-42", "client-trace-42", "conflict", "bad id with spaces", ""} {
			r := h.req("GET", "/health", "", nil, "X-Request-Id", sent).wantStatus(t, 200)
			rid := r.header.Get("X-Request-Id")
			if !strings.HasPrefix(rid, "req_") || str(r.body["meta"].(map[string]any)["request_id"]) != rid || seen[rid] {
				t.Fatalf("sent %q: request id %q (meta %s), want a new req_ id", sent, rid, r.raw)
			}
			seen[rid] = true
		}
		r := h.req("GET", "/v1/facts/x", h.keyA, nil, "X-Request-Id", "conflict")
		if rid := r.header.Get("X-Request-Id"); !strings.HasPrefix(rid, "req_") || r.body["instance"] != "/errors/"+rid || r.body["trace_id"] != rid {
			t.Fatalf("a problem's request id %q: %s", rid, r.raw)
		}
	})
}

func TestHealthAndMetrics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		d := h.req("GET", "/health", "", nil).wantStatus(t, 200).data()
		checks := d["checks"].(map[string]any)
		if str(d["status"]) != "ok" || str(checks["store"].(map[string]any)["status"]) != "ok" {
			t.Fatalf("health %v", d)
		}
		resp, err := h.srv.App().Test(mustRequest("GET", "/metrics"), 5000)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(resp)
		for _, want := range []string{`factline_http_requests_total{method="GET",route="/health",status="200"}`, "factline_http_request_duration_seconds_bucket"} {
			if !strings.Contains(body, want) {
				t.Fatalf("/metrics lacks %s", want)
			}
		}
		h.store.Close()
		h.req("GET", "/health", "", nil).wantProblem(t, 503, "unavailable", "Service Unavailable", "Unhealthy: [store]; down: database")
	})
}

func mustRequest(method, path string) *http.Request { return httptest.NewRequest(method, path, nil) }

func readAll(r *http.Response) string {
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

func TestErrorPages(t *testing.T) {
	h := setup(t, "sqlite")
	for _, slug := range []string{"bad-request", "validation-failed", "unauthorized", "forbidden", "not-found", "method-not-allowed", "conflict",
		"payload-too-large", "unsupported-media-type", "unprocessable", "rate-limit-exceeded", "internal", "unavailable", "timeout", "request-header-fields-too-large"} {
		resp, err := h.srv.App().Test(mustRequest("GET", "/errors/"+slug), 5000)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(resp)
		if resp.StatusCode != 200 || !strings.Contains(body, docsURL+"/errors/"+slug) || len(body) < 200 {
			t.Errorf("/errors/%s: %d %s", slug, resp.StatusCode, body)
		}
	}
	h.req("GET", "/errors/no-such-slug", "", nil).wantStatus(t, 404)
	// The list the 404 points to exists, with a link to every page.
	for _, path := range []string{"/errors", "/errors/"} {
		resp, err := h.srv.App().Test(mustRequest("GET", path), 5000)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(resp)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		for _, k := range problem.Catalogue {
			if !strings.Contains(body, `<a href="/errors/`+k.Slug+`">`) {
				t.Errorf("%s lacks a link to %s", path, k.Slug)
			}
		}
	}
}

// TestReadyAnswers503UntilLoaded: /ready is a 503 problem saying what is
// still loading until Deps.Ready reports the plugins and domain loaded,
// then 200; /health answers 200 throughout.
func TestReadyAnswers503UntilLoaded(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	loaded := make(chan struct{})
	deps := h.deps
	deps.Ready = func() error {
		select {
		case <-loaded:
			return nil
		default:
			return errors.New("loading plugins: points")
		}
	}
	srv, err := gateway.New(gateway.Config{DocsURL: docsURL}, deps)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	r := h.req("GET", "/ready", "", nil)
	r.wantProblem(t, 503, "unavailable", "Service Unavailable", "Not ready: loading plugins: points")
	if got := r.header.Get("Retry-After"); got == "" {
		t.Error("503 from /ready without Retry-After")
	}
	h.req("GET", "/health", "", nil).wantStatus(t, 200)
	close(loaded)
	if got := h.req("GET", "/ready", "", nil).wantStatus(t, 200).data()["status"]; got != "ready" {
		t.Fatalf("status %v, want ready", got)
	}
}
