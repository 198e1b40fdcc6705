package gateway_test

import (
	"encoding/json"
	"fmt"
	"mime"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// TestMountedReadsCheckTheirQuery: a mounted GET endpoint (the webhook,
// plugin, domain, stream and projection reads) refuses a query parameter
// its documentation does not name (unknown_field) and one given twice
// (format) before its handler runs; a documented one, once, answers. So
// do the platform's GET /v1/admin/keys and a manifest route of the system
// entity, which take none.
func TestMountedReadsCheckTheirQuery(t *testing.T) {
	t.Parallel()
	h := setupGateway(t, "sqlite")
	ran := 0
	handler := func(c *fiber.Ctx) error { ran++; return gateway.Respond(c, 200, fiber.Map{}) }
	h.srv.Mount(openapi.Endpoint{Method: "GET", Path: "/v1/admin/bare", ID: "bare", Access: openapi.AdminKey, Status: 200, OK: "."}, handler)
	h.srv.Mount(openapi.Endpoint{Method: "GET", Path: "/v1/listed/:id", ID: "listed", Status: 200, OK: ".",
		Params: []openapi.Param{openapi.IDParam("thing"), openapi.QueryParam("status", "", openapi.String("")), openapi.Limit, openapi.Cursor}}, handler)
	h.srv.Mount(openapi.Endpoint{Method: "GET", Path: "/v1/filtered", ID: "filtered", Status: 200, OK: ".",
		Params: []openapi.Param{openapi.EntityTypeParam("", true), openapi.EntityFilters}}, handler)
	for _, tc := range []struct {
		name, path, key, field, code string
	}{
		{"no params, one sent", "/v1/admin/bare?x=1", h.adminA, "x", "unknown_field"},
		{"misspelt filter", "/v1/listed/a?stauts=dead", h.keyA, "stauts", "unknown_field"},
		{"path parameter is no query parameter", "/v1/listed/a?id=a", h.keyA, "id", "unknown_field"},
		{"limit twice", "/v1/listed/a?limit=1&limit=2", h.keyA, "limit", "format"},
		{"filter twice", "/v1/filtered?entity_type=ticket&a=1&a=2", h.keyA, "a", "format"},
		{"admin keys", "/v1/admin/keys?x=1", h.adminA, "x", "unknown_field"},
		{"system route", "/v1/status?x=1", "", "x", "unknown_field"},
		{"system route, repeated", "/v1/public-status?x=1&x=2", h.keyA, "x", "unknown_field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.req("GET", tc.path, tc.key, nil).wantFieldError(t, tc.field, tc.code, tc.field)
		})
	}
	if ran != 0 {
		t.Fatalf("a handler ran %d times on refused queries", ran)
	}
	for _, tc := range []struct{ path, key string }{
		{"/v1/admin/bare", h.adminA},
		{"/v1/listed/a?status=dead&limit=2&cursor=x", h.keyA},
		{"/v1/filtered?entity_type=ticket&a=1&b=2", h.keyA},
		{"/v1/admin/keys", h.adminA},
		{"/v1/status", ""},
	} {
		h.req("GET", tc.path, tc.key, nil).wantStatus(t, 200)
	}
}

// TestNumberFiltersFollowTheBodysRules: a number filter is held to the
// body's number rules (store.NumberInRange): a non-zero number that
// rounds to zero (1e-400 would match 0) or one of more than 100 digits
// written out (1e200) is a range error, on GET /v1/entities and a
// manifest list route alike; what a body could carry matches as before.
func TestNumberFiltersFollowTheBodysRules(t *testing.T) {
	t.Parallel()
	h := setupGateway(t, "sqlite")
	h.req("POST", "/v1/tickets", h.keyA, map[string]any{"data": map[string]any{"subject": "zero", "priority": 0}}).wantStatus(t, 201)
	h.req("POST", "/v1/tickets", h.keyA, `{"data":{"subject":"big","priority":1e99}}`).wantStatus(t, 201)
	for _, list := range []string{"/v1/tickets?", "/v1/entities?entity_type=ticket&"} {
		for _, v := range []string{"1e-400", "-1e-400", "1e200", "1e-100", "0.00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001"} {
			t.Run(list+v, func(t *testing.T) {
				h.req("GET", list+"priority="+v, h.keyA, nil).wantFieldError(t, "priority", "range", "at most 100 digits")
			})
		}
		// Numbers strconv reads and JSON does not.
		for _, v := range []string{"0x1p3", ".5", "1.", "00"} {
			t.Run(list+v, func(t *testing.T) {
				h.req("GET", list+"priority="+v, h.keyA, nil).wantFieldError(t, "priority", "type", "written as in JSON")
			})
		}
		for _, tc := range []struct {
			q    string
			want int
		}{{"priority=0", 1}, {"priority=1e99", 1}, {"priority=1e-99", 0}, {"priority=0e5", 1}} {
			if n := len(h.req("GET", list+tc.q, h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)); n != tc.want {
				t.Fatalf("%s%s: %d items, want %d", list, tc.q, n, tc.want)
			}
		}
	}
}

// TestOutOfRangeTimesAndTimestamps: a time filter that is a whole number
// too large for int64 is out of range (code range), not badly formed; a
// fact timestamp out of range names a fact timestamp's own bounds.
func TestOutOfRangeTimesAndTimestamps(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	for _, tc := range []struct {
		name, method, path, body, field, msg string
	}{
		{"from", "GET", "/v1/facts?from=99999999999999999999", "", "from", "from is out of range"},
		{"to", "GET", "/v1/facts?to=99999999999999999999", "", "to", "to is out of range"},
		{"negative from", "GET", "/v1/facts?from=-99999999999999999999", "", "from", "from is out of range"},
		{"timestamp 1e20", "POST", "/v1/facts", `{"entity_id":"` + ent + `","type":"deposit","data":{},"timestamp":1e20}`,
			"timestamp", "between 1 and 253402300799999 (9999-12-31T23:59:59.999Z)"},
		// A version's bounds are a version's, not int64's.
		{"expected_version 1e20", "POST", "/v1/facts", `{"entity_id":"` + ent + `","type":"deposit","data":{},"expected_version":1e20}`,
			"expected_version", "expected_version is out of range: it must be a positive integer, at most 9223372036854775807"},
		{"version -1e20", "PATCH", "/v1/entities/" + ent, `{"version":-1e20}`,
			"version", "version is out of range: it must be a positive integer, at most 9223372036854775807"},
		{"config version 1e20", "PUT", "/v1/configs/cfg_none", `{"settings":{},"version":1e20}`,
			"version", "version is out of range: it must be a positive integer, at most 9223372036854775807"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			h.req(tc.method, tc.path, h.keyA, body).wantFieldError(t, tc.field, "range", tc.msg)
		})
	}
	h.req("GET", "/v1/facts?from=1&to=9223372036854775807", h.keyA, nil).wantStatus(t, 200)
}

// TestRepeatedContentTypes: Content-Type lines naming different media
// types are a 415 on every body, uploads (plugins, domain manifests)
// included, where fasthttp's last value would have passed; lines naming
// one media type, whatever the case of the type or of charset's value,
// are one type.
func TestRepeatedContentTypes(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	upload := func(allowed ...string) fiber.Handler {
		return func(c *fiber.Ctx) error {
			mt, _, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
			for _, a := range allowed {
				if err == nil && mt == a {
					return gateway.Respond(c, 201, fiber.Map{})
				}
			}
			return problem.New(problem.UnsupportedMediaType, "not an upload")
		}
	}
	h.srv.Mount(openapi.Endpoint{Method: "PUT", Path: "/v1/admin/plugins/:name", ID: "putPlugin", Access: openapi.AdminKey, Status: 201, OK: "."}, upload("application/wasm"))
	h.srv.Mount(openapi.Endpoint{Method: "PUT", Path: "/v1/admin/domain/:name", ID: "putDomain", Access: openapi.AdminKey, Status: 201, OK: "."}, upload("application/yaml"))
	const twice = "Content-Type is given more than once with different values: send one"
	body := `{"type":"vendor","name":"V","status":"active"}`
	for _, tc := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
	}{
		{"plugin: text then wasm", "PUT", "/v1/admin/plugins/p", "\x00asm", []string{"Content-Type", "text/plain", "Content-Type", "application/wasm"}, 415},
		{"domain: html then yaml", "PUT", "/v1/admin/domain/d", "a: 1", []string{"Content-Type", "text/html", "Content-Type", "application/yaml"}, 415},
		{"plugin: wasm twice", "PUT", "/v1/admin/plugins/p", "\x00asm", []string{"Content-Type", "application/wasm", "Content-Type", "application/wasm"}, 201},
		{"JSON: case of type differs", "POST", "/v1/entities", body, []string{"Content-Type", "application/json", "content-type", "Application/JSON"}, 201},
		{"JSON: case of charset differs", "POST", "/v1/entities", body, []string{"Content-Type", "application/json; charset=utf-8", "Content-Type", `application/json;charset="UTF-8"`}, 201},
		{"JSON: a parameter differs", "POST", "/v1/entities", body, []string{"Content-Type", "application/json", "Content-Type", "application/json; charset=utf-8"}, 415},
		{"JSON: JSON then text", "POST", "/v1/entities", body, []string{"Content-Type", "application/json", "Content-Type", "text/plain"}, 415},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.reqRepeated(tc.method, tc.path, h.adminA, tc.body, tc.headers...)
			if tc.status == 201 {
				r.wantStatus(t, 201)
				return
			}
			r.wantProblem(t, 415, "unsupported-media-type", "Unsupported Media Type", twice)
		})
	}
}

// TestPatchHonoursIdempotencyKey: PATCH /v1/entities/:id takes part in
// idempotency: a key used by another request (POST /v1/entities) is a
// 422 and the patch does not run; the same patch under its own key is
// replayed rather than answered 409 for the version it moved on.
func TestPatchHonoursIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	id := str(h.req("POST", "/v1/entities", h.keyA, validAccount, "Idempotency-Key", "p1").wantStatus(t, 201).data()["id"])
	patch := map[string]any{"version": 1, "name": "Renamed"}
	h.req("PATCH", "/v1/entities/"+id+"?entity_type=account", h.keyA, patch, "Idempotency-Key", "p1").
		wantProblem(t, 422, "unprocessable", "Unprocessable Entity", "This Idempotency-Key was already used with a different request")
	if v := h.req("GET", "/v1/entities/"+id+"?entity_type=account", h.keyA, nil).wantStatus(t, 200).data()["version"]; fmt.Sprint(v) != "1" {
		t.Fatalf("version %v after a refused patch, want 1", v)
	}
	first := h.req("PATCH", "/v1/entities/"+id, h.keyA, patch, "Idempotency-Key", "p2").wantStatus(t, 200)
	h.req("PATCH", "/v1/entities/"+id, h.keyA, patch, "Idempotency-Key", "p2").wantReplayOf(t, first)
	// Another patch under p2 is another request.
	h.req("PATCH", "/v1/entities/"+id, h.keyA, map[string]any{"version": 2, "name": "Other"}, "Idempotency-Key", "p2").wantStatus(t, 422)
	// With a query, the body is still compared as JSON: members in
	// another order are the same request (it was a 422).
	first = h.req("PATCH", "/v1/entities/"+id+"?entity_type=account", h.keyA, `{"version":2,"name":"Third"}`, "Idempotency-Key", "p3").wantStatus(t, 200)
	h.req("PATCH", "/v1/entities/"+id+"?entity_type=account", h.keyA, `{"name": "Third", "version": 2}`, "Idempotency-Key", "p3").wantReplayOf(t, first)
}

// TestConfigScopeIDAlone: a new version's scope_id without a scope_type
// moves the config to another scope of the type it has; it was dropped
// without a word.
func TestConfigScopeIDAlone(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	scoped := str(h.req("POST", "/v1/configs", h.keyA, map[string]any{"type": "limits", "settings": map[string]any{"max": 1}, "scope_type": "account", "scope_id": "acct-1"}).
		wantStatus(t, 201).data()["id"])
	got := h.req("PUT", "/v1/configs/"+scoped, h.keyA, map[string]any{"settings": map[string]any{"max": 2}, "scope_id": "acct-2"}).wantStatus(t, 200).data()
	if got["scope_type"] != "account" || got["scope_id"] != "acct-2" {
		t.Fatalf("new version's scope %v/%v, want account/acct-2", got["scope_type"], got["scope_id"])
	}
	got = h.req("PUT", "/v1/configs/"+scoped, h.keyA, map[string]any{"settings": map[string]any{"max": 3}}).wantStatus(t, 200).data()
	if got["scope_type"] != "account" || got["scope_id"] != "acct-2" {
		t.Fatalf("a version without scope has %v/%v, want the scope kept: account/acct-2", got["scope_type"], got["scope_id"])
	}
}

// TestIndexedNumbersAreExact: a number kept in a number index slot (a
// double) must be the shortest decimal of the double it rounds to, in a
// body and in a filter alike, so an equality filter matches only the
// value it names: 9007199254740993 (indexed as ...992) and
// 0.1000000000000000001 (as 0.1) are refused with code range, on both
// stores; 0.1 and 1.50 (which is 1.5) are kept and matched.
func TestIndexedNumbersAreExact(t *testing.T) {
	forEachGateway(t, func(t *testing.T, h *gwHarness) {
		for _, v := range []string{"9007199254740993", "0.1000000000000000001", "12345678901234567"} {
			h.req("POST", "/v1/tickets", h.keyA, `{"data":{"subject":"x","priority":`+v+`}}`).
				wantFieldError(t, "data.priority", "range", "double-precision")
			h.req("GET", "/v1/tickets?priority="+v, h.keyA, nil).wantFieldError(t, "priority", "range", "double-precision")
		}
		for _, v := range []string{"9007199254740992", "0.1", "1.50"} {
			h.req("POST", "/v1/tickets", h.keyA, `{"data":{"subject":"x","priority":`+v+`}}`).wantStatus(t, 201)
		}
		id := str(h.req("POST", "/v1/tickets", h.keyA, `{"data":{"subject":"patched","priority":2}}`).wantStatus(t, 201).data()["id"])
		h.req("PATCH", "/v1/entities/"+id, h.keyA, `{"version":1,"priority":9007199254740993}`).
			wantFieldError(t, "priority", "range", "would be indexed as 9007199254740992")
		for _, tc := range []struct {
			q    string
			want int
		}{{"priority=9007199254740992", 1}, {"priority=0.1", 1}, {"priority=1.5", 1}, {"priority=1.50", 1}, {"priority=2", 1}} {
			if n := len(h.req("GET", "/v1/entities?entity_type=ticket&"+tc.q, h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)); n != tc.want {
				t.Errorf("%s: %d items, want %d", tc.q, n, tc.want)
			}
		}
		// A value stored before the rule does not block a change to
		// another field; setting it again is held to the rule.
		legacy := str(h.req("POST", "/v1/tickets", h.keyA, `{"data":{"subject":"legacy","priority":2}}`).wantStatus(t, 201).data()["id"])
		if _, err := h.store.UpdateEntity(t.Context(), store.EntityUpdate{TenantID: "tenant-a", ID: legacy, ExpectedVersion: 1,
			Data: json.RawMessage(`{"subject":"legacy","status":"open","priority":9007199254740993}`), UpdatedAt: 1}); err != nil {
			t.Fatal(err)
		}
		h.req("PATCH", "/v1/entities/"+legacy, h.keyA, `{"version":2,"subject":"renamed"}`).wantStatus(t, 200)
		h.req("PATCH", "/v1/entities/"+legacy, h.keyA, `{"version":3,"priority":9007199254740993}`).
			wantFieldError(t, "priority", "range", "would be indexed as 9007199254740992")
	})
}

// TestNotFoundShowsOddIdsEscaped: an id no one could have stored, sent to
// look something up, is shown in the 404's detail quoted, its unprintable
// characters escaped and cut to 64 characters: a right-to-left override
// reordered the detail, and a 3,000-character id was echoed whole. An id
// that could be stored is shown as sent.
func TestNotFoundShowsOddIdsEscaped(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	long := strings.Repeat("x", 3000)
	for _, tc := range []struct{ name, path, detail string }{
		{"plain", "/v1/entities/acct-none?entity_type=account", "Entity acct-none not found"},
		{"bidi override", "/v1/entities/%E2%80%AEt1?entity_type=account", `Entity "\u202et1" not found`},
		{"long", "/v1/entities/" + long + "?entity_type=account", `Entity "` + long[:64] + `"... not found`},
		{"config", "/v1/configs/%E2%80%AEc1", `Config "\u202ec1" not found`},
		{"fact", "/v1/facts/f%07x", `Fact "f\ax" not found`},
		{"printable", "/v1/facts/f%20%3Cx%3E", `Fact f <x> not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.req("GET", tc.path, h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", tc.detail)
		})
	}
}
