package gateway_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/teststore"
)

// reqRepeated is req with headers added, not set, so that a name may
// repeat: pairs of name and value.
func (h *harness) reqRepeated(method, path, key, body string, headers ...string) *response {
	h.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if key != "" {
		r.Header.Set("X-API-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	resp, err := h.srv.App().Test(r, 10_000)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return decode(h.t, method, path, resp)
}

// wantFieldError checks a validation problem whose errors include field
// with code, its message containing msg.
func (r *response) wantFieldError(t *testing.T, field, code, msg string) {
	t.Helper()
	r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
	list, _ := r.body["errors"].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		if m["field"] == field {
			if m["code"] != code || !strings.Contains(str(m["message"]), msg) {
				t.Fatalf("%s: code %v, message %q; want %s, %q", field, m["code"], m["message"], code, msg)
			}
			return
		}
	}
	t.Fatalf("no error on %s: %s", field, r.raw)
}

// TestRepeatedSingleValueHeaders: fiber reads one of several values of a
// header that has one, so a request repeating Idempotency-Key (400, as
// for an empty one) or
// Content-Type with differing values (415, as for a type that is not
// JSON) is refused rather than served by whichever value fiber picked.
// Repeats of one Content-Type are one type.
func TestRepeatedSingleValueHeaders(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	body := `{"type":"vendor","name":"V","status":"active"}`
	const js = "application/json"
	const twiceKey = "Idempotency-Key is given more than once: send one key"
	const twiceType = "Content-Type is given more than once with different values: send one"
	for _, tc := range []struct {
		name                string
		headers             []string
		status              int
		slug, title, detail string
	}{
		{"two Idempotency-Keys", []string{"Content-Type", js, "Idempotency-Key", "z1", "Idempotency-Key", "z2"},
			400, "bad-request", "Bad Request", twiceKey},
		{"Idempotency-Key twice with one value", []string{"Content-Type", js, "Idempotency-Key", "z3", "Idempotency-Key", "z3"},
			400, "bad-request", "Bad Request", twiceKey},
		// A key lost on its way (an unset variable) is no key to write
		// without: a retry would write again.
		{"empty Idempotency-Key", []string{"Content-Type", js, "Idempotency-Key", ""},
			400, "validation-failed", "Validation Failed", "Request validation failed"},
		{"Content-Type latin1, then JSON", []string{"Content-Type", js + "; charset=latin1", "Content-Type", js},
			415, "unsupported-media-type", "Unsupported Media Type", twiceType},
		{"Content-Type text, then JSON", []string{"Content-Type", "text/plain", "Content-Type", js},
			415, "unsupported-media-type", "Unsupported Media Type", twiceType},
		{"Content-Type JSON, then text", []string{"Content-Type", js, "Content-Type", "text/plain"},
			415, "unsupported-media-type", "Unsupported Media Type", twiceType},
		{"Content-Type JSON twice", []string{"Content-Type", js, "Content-Type", js}, 201, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.reqRepeated("POST", "/v1/entities", h.keyA, body, tc.headers...)
			if tc.status == 201 {
				r.wantStatus(t, 201)
				return
			}
			r.wantProblem(t, tc.status, tc.slug, tc.title, tc.detail)
		})
	}
	// Only the accepted request wrote; neither key was recorded.
	if n := len(h.req("GET", "/v1/entities?entity_type=vendor", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)); n != 1 {
		t.Fatalf("%d vendors written, want 1", n)
	}
	h.req("POST", "/v1/entities", h.keyA, body, "Idempotency-Key", "z1").wantStatus(t, 201)
}

// TestIdempotencyKeyIsPerTenant: a key is the tenant's, whatever the
// endpoint: the same key on another endpoint is another request (422),
// not a second operation. Another tenant's key of that name is its own.
func TestIdempotencyKeyIsPerTenant(t *testing.T) {
	t.Parallel()
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testIdempotencyKeyIsPerTenant(t, backend)
		})
	}
}

func testIdempotencyKeyIsPerTenant(t *testing.T, backend string) {
	l := &countingLedger{}
	h := setupLedgers(t, backend, ledger.Static{"account": l})
	first := h.req("POST", "/v1/entities", h.keyA, validAccount, "Idempotency-Key", "k1").wantStatus(t, 201)
	ent := str(first.data()["id"])
	facts := func() int {
		return len(h.req("GET", "/v1/facts", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any))
	}
	before := facts()
	for _, tc := range []struct {
		name, method, path, body string
	}{
		{"a fact", "POST", "/v1/facts", `{"entity_id":"` + ent + `","type":"deposit","data":{"amount":1}}`},
		{"a config", "POST", "/v1/configs", `{"type":"limits","settings":{"max":1}}`},
		{"another entity", "POST", "/v1/entities", `{"type":"vendor","name":"V","status":"active"}`},
		{"a ledger command", "POST", "/v1/entities/" + ent + "/deposit", `{"amount":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.req(tc.method, tc.path, h.keyA, tc.body, "Idempotency-Key", "k1").
				wantProblem(t, 422, "unprocessable", "Unprocessable Entity", "This Idempotency-Key was already used with a different request")
		})
	}
	if n := facts(); n != before || l.decides.Load() != 0 {
		t.Fatalf("%d facts after the refused reuses (want %d), %d commands decided", n, before, l.decides.Load())
	}
	if n := len(h.req("GET", "/v1/configs", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)); n != 0 {
		t.Fatalf("%d configs written under a used key", n)
	}
	// The first request is still replayed; tenant B's k1 is its own.
	h.req("POST", "/v1/entities", h.keyA, validAccount, "Idempotency-Key", "k1").wantReplayOf(t, first)
	entB := str(h.req("POST", "/v1/entities", h.keyB, validAccount).wantStatus(t, 201).data()["id"])
	h.req("POST", "/v1/facts", h.keyB, `{"entity_id":"`+entB+`","type":"deposit","data":{"amount":1}}`, "Idempotency-Key", "k1").wantStatus(t, 201)
}

// TestEveryReadChecksItsQueryParameters: manifest reads and the platform's
// single-resource reads refuse a parameter they do not know
// (unknown_field) and one given twice (format), as the listings do.
func TestEveryReadChecksItsQueryParameters(t *testing.T) {
	t.Parallel()
	h := setupGateway(t, "sqlite")
	tk := str(h.req("POST", "/v1/tickets", h.keyA, map[string]any{"data": map[string]any{"subject": "S", "priority": 2}}).wantStatus(t, 201).data()["id"])
	acct := h.account(t, h.keyA)
	fct := str(h.req("POST", "/v1/facts", h.keyA, map[string]any{"entity_id": acct, "type": "deposit", "data": map[string]any{"amount": 1}}).wantStatus(t, 201).data()["id"])
	cfg := str(h.req("POST", "/v1/configs", h.keyA, map[string]any{"type": "limits", "settings": map[string]any{}}).wantStatus(t, 201).data()["id"])
	for _, tc := range []struct {
		path, field, code string
	}{
		{"/v1/tickets?limit=1&limit=2", "limit", "format"},
		{"/v1/tickets?priority=1&priority=2", "priority", "format"},
		{"/v1/tickets?subject=a&subject=b", "subject", "format"},
		{"/v1/tickets/" + tk + "?entity_type=x", "entity_type", "unknown_field"},
		{"/v1/facts/" + fct + "?x=1", "x", "unknown_field"},
		{"/v1/configs/" + cfg + "?x=1", "x", "unknown_field"},
		{"/v1/configs/" + cfg + "?limit=1&limit=2", "limit", "unknown_field"},
		{"/v1/configs/" + cfg + "/versions?x=1", "x", "unknown_field"},
		{"/v1/configs/" + cfg + "/versions/1?x=1", "x", "unknown_field"},
		{"/v1/entities/" + acct + "/balance?entity_type=account&entity_type=asset", "entity_type", "format"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			h.req("GET", tc.path, h.keyA, nil).wantFieldError(t, tc.field, tc.code, tc.field)
		})
	}
	// What they know, once, answers.
	for _, path := range []string{"/v1/tickets?limit=1&priority=2", "/v1/tickets/" + tk, "/v1/facts/" + fct, "/v1/configs/" + cfg,
		"/v1/configs/" + cfg + "/versions", "/v1/configs/" + cfg + "/versions/1"} {
		h.req("GET", path, h.keyA, nil).wantStatus(t, 200)
	}
}

// TestEmptyListFiltersAreRefused: a listing reads an empty filter as
// none, so ?type= would list the whole tenant; it is refused instead.
func TestEmptyListFiltersAreRefused(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	for _, tc := range []struct {
		path, field string
	}{
		{"/v1/facts?entity_id=", "entity_id"},
		{"/v1/facts?type=", "type"},
		{"/v1/facts?type", "type"},
		{"/v1/facts?source_id=", "source_id"},
		{"/v1/facts?type=deposit&subtype=", "subtype"},
		{"/v1/facts?from=", "from"},
		{"/v1/facts?to=", "to"},
		{"/v1/configs?type=", "type"},
		{"/v1/configs?status=", "status"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			h.req("GET", tc.path, h.keyA, nil).wantFieldError(t, tc.field, "format", "must not be empty")
		})
	}
	h.req("GET", "/v1/facts?type=deposit&subtype=manual", h.keyA, nil).wantStatus(t, 200)
}

// TestNonFiniteNumberFiltersAreRefused: strconv.ParseFloat reads NaN and
// infinities, which no stored number equals; as filters on a number field
// they are refused, on manifest listings and GET /v1/entities alike.
func TestNonFiniteNumberFiltersAreRefused(t *testing.T) {
	t.Parallel()
	h := setupGateway(t, "sqlite")
	h.req("POST", "/v1/tickets", h.keyA, map[string]any{"data": map[string]any{"subject": "NaN", "priority": 2}}).wantStatus(t, 201)
	for _, list := range []string{"/v1/tickets?", "/v1/entities?entity_type=ticket&"} {
		for _, v := range []string{"NaN", "nan", "Infinity", "-inf", "%2Binf", "1e400"} {
			t.Run(list+"priority="+v, func(t *testing.T) {
				h.req("GET", list+"priority="+v, h.keyA, nil).wantFieldError(t, "priority", "range", "priority must be a finite number")
			})
		}
		// A finite number matches; a string field takes the text.
		for _, q := range []string{"priority=2", "priority=2.0", "subject=NaN"} {
			if n := len(h.req("GET", list+q, h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)); n != 1 {
				t.Fatalf("%s%s: %d items, want 1", list, q, n)
			}
		}
	}
}

// TestMalformedPlatformPathsNeedAKey: a platform path with an empty
// segment is no route, but like every platform path it needs a key first:
// 401 without one, 404 with one. A path outside the platform's prefixes
// stays a 404.
func TestMalformedPlatformPathsNeedAKey(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/entities/acct-1/"},
		{"GET", "/v1/entities/"},
		{"GET", "/v1/facts/"},
		{"POST", "/v1/facts/"},
		{"GET", "/v1/configs/"},
		{"GET", "/v1/entities/acct-1//facts"},
		{"DELETE", "/v1/configs//x"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			for _, key := range []string{"", "fl_live_nonexistentkeynonexistentkey"} {
				h.req(tc.method, tc.path, key, nil).wantProblem(t, 401, "unauthorized", "Unauthorized", "Invalid or missing API key")
			}
			h.req(tc.method, tc.path, h.keyA, nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches "+tc.method+" "+tc.path)
		})
	}
	h.req("GET", "//v1/facts", "", nil).wantProblem(t, 404, "not-found", "Not Found", "No route matches GET //v1/facts")
}

// TestOutOfRangeIntegers: a whole number too large for its integer is out
// of range (code range), not "not an integer" (code type); a fraction is
// still a type error.
func TestOutOfRangeIntegers(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	cfg := str(h.req("POST", "/v1/configs", h.keyA, map[string]any{"type": "limits", "settings": map[string]any{}}).wantStatus(t, 201).data()["id"])
	fact := func(extra string) string {
		return `{"entity_id":"` + ent + `","type":"deposit","data":{}` + extra + `}`
	}
	for _, tc := range []struct {
		name, method, path, body string
		field, code, msg         string
	}{
		{"limit on facts", "GET", "/v1/facts?limit=99999999999999999999", "", "limit", "range", "limit is out of range"},
		{"negative limit on entities", "GET", "/v1/entities?entity_type=account&limit=-99999999999999999999", "", "limit", "range", "limit is out of range"},
		{"limit on configs", "GET", "/v1/configs?limit=99999999999999999999", "", "limit", "range", "limit is out of range"},
		{"limit not a number", "GET", "/v1/facts?limit=ten", "", "limit", "type", "limit must be an integer"},
		{"config version in the path", "GET", "/v1/configs/" + cfg + "/versions/99999999999999999999", "", "version", "range", "version is out of range"},
		{"timestamp 1e20", "POST", "/v1/facts", fact(`,"timestamp":1e20`), "timestamp", "range", "timestamp is out of range"},
		{"timestamp -1e20", "POST", "/v1/facts", fact(`,"timestamp":-1e20`), "timestamp", "range", "timestamp is out of range"},
		{"timestamp 2^63", "POST", "/v1/facts", fact(`,"timestamp":9223372036854775808`), "timestamp", "range", "timestamp is out of range"},
		{"expected_version 1e20", "POST", "/v1/facts", fact(`,"expected_version":1e20`), "expected_version", "range", "expected_version is out of range"},
		{"config version 1e50", "PUT", "/v1/configs/" + cfg, `{"settings":{},"version":1e50}`, "version", "range", "version is out of range"},
		{"timestamp 1.5", "POST", "/v1/facts", fact(`,"timestamp":1.5`), "timestamp", "type", "timestamp must be an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			h.req(tc.method, tc.path, h.keyA, body).wantFieldError(t, tc.field, tc.code, tc.msg)
		})
	}
}

// TestWritesRefuseUnknownQueryParameters: a write takes its input from its
// path and body, so a query parameter it does not document
// (?dry_run=true) would be ignored while the write went ahead. Platform
// writes, manifest create, emit and command routes and the platform's
// command paths refuse it, and nothing is written.
func TestWritesRefuseUnknownQueryParameters(t *testing.T) {
	t.Parallel()
	h := setupGateway(t, "sqlite")
	acct := h.account(t, h.keyA)
	cfg := str(h.req("POST", "/v1/configs", h.keyA, map[string]any{"type": "limits", "settings": map[string]any{}}).wantStatus(t, 201).data()["id"])
	for _, tc := range []struct {
		method, path, key string
		body              any
	}{
		{"POST", "/v1/entities?dry_run=true", h.keyA, validAccount},
		{"PATCH", "/v1/entities/" + acct + "?dry_run=true", h.keyA, map[string]any{"version": 1, "name": "Other"}},
		{"POST", "/v1/facts?dry_run=true", h.keyA, map[string]any{"entity_id": acct, "type": "deposit", "data": map[string]any{"amount": 1}}},
		{"POST", "/v1/configs?dry_run=true", h.keyA, map[string]any{"type": "limits", "settings": map[string]any{}}},
		{"PUT", "/v1/configs/" + cfg + "?dry_run=true", h.keyA, map[string]any{"settings": map[string]any{"a": 1}}},
		{"DELETE", "/v1/configs/" + cfg + "?dry_run=true", h.keyA, nil},
		{"POST", "/v1/admin/keys?dry_run=true", h.adminA, map[string]any{"mode": "live"}},
		{"POST", "/v1/tickets?dry_run=true", h.keyA, map[string]any{"data": map[string]any{"subject": "S", "priority": 2}}},
		{"POST", "/v1/deposits?dry_run=true", h.keyA, map[string]any{"entityId": acct, "data": map[string]any{"amount": 1}}},
		{"POST", "/v1/accounts/" + acct + "/deposits?dry_run=true", h.keyA, map[string]any{"data": map[string]any{"amount": 1}}},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			h.req(tc.method, tc.path, tc.key, tc.body).wantFieldError(t, "dry_run", "unknown_field", "unknown query parameter dry_run")
		})
	}
	// Nothing was written: one account, no facts, the config as created.
	if n := len(h.req("GET", "/v1/entities?entity_type=account", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)); n != 1 {
		t.Errorf("%d accounts after refused writes, want 1", n)
	}
	if n := len(h.req("GET", "/v1/entities/"+acct+"/facts", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)); n != 0 {
		t.Errorf("%d facts after refused writes, want 0", n)
	}
	if v := h.req("GET", "/v1/configs/"+cfg, h.keyA, nil).wantStatus(t, 200).data()["version"]; v != json.Number("1") {
		t.Errorf("config at version %v after refused writes, want 1", v)
	}
	if n := len(h.req("GET", "/v1/tickets", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)); n != 0 {
		t.Errorf("%d tickets after refused writes, want 0", n)
	}
	// What a write documents, it takes.
	h.req("PATCH", "/v1/entities/"+acct+"?entity_type=account", h.keyA, map[string]any{"version": 1, "name": "Other"}).wantStatus(t, 200)
}

// TestCommandsWithABodyRefuseQueryParameters: a command whose input is its
// body would ignore a query string; only entity_type, which names the
// type up front on the platform's command paths, is taken beside it.
func TestCommandsWithABodyRefuseQueryParameters(t *testing.T) {
	t.Parallel()
	h, l := setupCommandRoutes(t, "sqlite")
	ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	for _, path := range []string{"/api/accounts/" + ent + "/earn?amount=9", "/v1/entities/" + ent + "/tip?amount=9",
		"/api/accounts/" + ent + "/earn?entity_type=account"} {
		t.Run(path, func(t *testing.T) {
			field := "amount"
			if strings.Contains(path, "entity_type") {
				field = "entity_type"
			}
			h.req("POST", path, h.keyA, `{"amount":5}`).wantFieldError(t, field, "unknown_field", "unknown query parameter "+field)
		})
	}
	if n := l.decides.Load(); n != 0 {
		t.Fatalf("the ledger decided %d refused commands", n)
	}
	h.req("POST", "/v1/entities/"+ent+"/tip?entity_type=account", h.keyA, `{"amount":5}`).wantStatus(t, 201)
	// A command read from the query string takes its parameters.
	h.req("GET", "/api/accounts/"+ent+"/summary?q=1", h.keyA, nil).wantStatus(t, 200)
}
