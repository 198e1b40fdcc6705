package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/platform"
)

// stored is what a refused write must leave unchanged: every entity of
// the tenant with its version, the entity's facts and every config with
// its version.
func (h *harness) stored(entityID string) string {
	h.t.Helper()
	var b strings.Builder
	ents := h.req("GET", "/v1/entities?entity_type=account&limit=100", h.keyA, nil).wantStatus(h.t, 200).data()["items"].([]any)
	for _, e := range ents {
		m := e.(map[string]any)
		fmt.Fprintf(&b, "entity %s v%s %s;", m["id"], m["version"], m["data"])
	}
	facts := h.req("GET", "/v1/entities/"+entityID+"/facts", h.keyA, nil).wantStatus(h.t, 200).data()["items"].([]any)
	fmt.Fprintf(&b, "facts %d;", len(facts))
	cfgs := h.req("GET", "/v1/configs?limit=100", h.keyA, nil).wantStatus(h.t, 200).data()["items"].([]any)
	for _, c := range cfgs {
		m := c.(map[string]any)
		fmt.Fprintf(&b, "config %s v%s %s;", m["id"], m["version"], m["settings"])
	}
	return b.String()
}

// unstorableBodyCases are writes on every body-taking endpoint whose one bad
// value (a string, a key or a number) must be reported by its JSON path.
func unstorableBodyCases(ent, cfg string, bad, badKey, num string) []struct{ name, method, path, body, field, code string } {
	return []struct{ name, method, path, body, field, code string }{
		{"entity field", "POST", "/v1/entities", `{"type":"account","name":"` + bad + `","status":"active","subtype":"customer"}`, "name", "format"},
		{"entity id", "POST", "/v1/entities", `{"type":"account","id":"` + bad + `","name":"A","status":"active","subtype":"customer"}`, "id", "format"},
		{"entity metadata key", "POST", "/v1/entities", `{"type":"account","name":"A","status":"active","subtype":"customer","metadata":{"` + badKey + `":1}}`, "metadata.k\uFFFD", "format"},
		{"entity extra number", "POST", "/v1/entities", `{"type":"account","name":"A","status":"active","subtype":"customer","score":` + num + `}`, "score", "range"},
		{"entity patch", "PATCH", "/v1/entities/" + ent, `{"version":1,"name":"` + bad + `"}`, "name", "format"},
		{"fact data", "POST", "/v1/facts", `{"entity_id":"` + ent + `","type":"deposit","data":{"note":"` + bad + `"}}`, "data.note", "format"},
		{"fact data array", "POST", "/v1/facts", `{"entity_id":"` + ent + `","type":"deposit","data":{"lines":[1,{"amount":` + num + `}]}}`, "data.lines[1].amount", "range"},
		{"fact subtype", "POST", "/v1/facts", `{"entity_id":"` + ent + `","type":"deposit","subtype":"` + bad + `"}`, "subtype", "format"},
		{"config settings", "POST", "/v1/configs", `{"type":"pricing","scope_type":"global","settings":{"beta":"` + bad + `"}}`, "settings.beta", "format"},
		{"config huge number", "POST", "/v1/configs", `{"type":"pricing","scope_type":"global","settings":{"beta":` + num + `}}`, "settings.beta", "range"},
		{"config name", "POST", "/v1/configs", `{"type":"pricing","name":"` + bad + `","settings":{}}`, "name", "format"},
		{"config update key", "PUT", "/v1/configs/" + cfg, `{"settings":{"` + badKey + `":true}}`, "settings.k\uFFFD", "format"},
		{"ledger command", "POST", "/v1/entities/" + ent + "/deposit", `{"amount":1,"note":"` + bad + `"}`, "note", "format"},
	}
}

// testUnstorableBodies sends the cases whose code is code (format for bad
// strings and keys, range for numbers).
func testUnstorableBodies(t *testing.T, code, bad, badKey, num string) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			l := &countingLedger{}
			testUnstorableBodiesOn(t, setupLedgers(t, backend, ledger.Static{"account": l}), code, bad, badKey, num)
			if n := l.decides.Load(); n != 0 {
				t.Errorf("the ledger was called %d times for refused commands", n)
			}
		})
	}
}

func testUnstorableBodiesOn(t *testing.T, h *harness, code, bad, badKey, num string) {
	ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	cfg := str(h.req("POST", "/v1/configs", h.keyA, map[string]any{"type": "pricing", "scope_type": "global", "settings": map[string]any{"rate": 1}}).wantStatus(t, 201).data()["id"])
	before := h.stored(ent)
	for _, tc := range unstorableBodyCases(ent, cfg, bad, badKey, num) {
		if tc.code != code {
			continue
		}
		r := h.req(tc.method, tc.path, h.keyA, tc.body)
		r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
		if got := r.fieldErrors(); got[tc.field] != tc.code {
			t.Errorf("%s: field errors %v, want %s: %s", tc.name, got, tc.field, tc.code)
		}
	}
	if after := h.stored(ent); after != before {
		t.Fatalf("refused writes changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

func TestInvalidUTF8BodyIsRefused(t *testing.T) {
	t.Parallel()
	testUnstorableBodies(t, "format", "bad\xff\xfe", "k\xc0\xaf", "1")
}

func TestLoneSurrogateEscapeIsRefused(t *testing.T) {
	t.Parallel()
	testUnstorableBodies(t, "format", `bad\ud800`, `k\udfff`, "2")
}

func TestNULInBodyIsRefused(t *testing.T) {
	t.Parallel()
	testUnstorableBodies(t, "format", `bad\u0000`, `k\u0000`, "3")
}

func TestHugeNumberIsRefused(t *testing.T) {
	t.Parallel()
	for _, num := range []string{"1e1000000000", "-1e400", "1e-400", strings.Repeat("7", 101)} {
		t.Run(num[:min(len(num), 12)], func(t *testing.T) {
			t.Parallel()
			testUnstorableBodies(t, "range", "ok", "k", num)
		})
	}
}

func TestNULAndInvalidUTF8InQueryAndPathAreRefused(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
		for _, bad := range []string{"%00", "%ED%A0%80", "%C0%AF", "a%FFb"} {
			for _, tc := range []struct{ method, path, field string }{
				{"GET", "/v1/entities?entity_type=account&name=" + bad, "name"},
				{"GET", "/v1/entities?entity_type=" + bad, "entity_type"},
				{"GET", "/v1/entities?entity_type=account&cursor=" + bad, "cursor"},
				{"GET", "/v1/configs?type=" + bad, "type"},
				{"GET", "/v1/configs?status=" + bad, "status"},
				{"GET", "/v1/entities/" + ent + "?entity_type=" + bad, "entity_type"},
				{"GET", "/v1/entities/" + bad + "?entity_type=account", "path"},
				{"GET", "/v1/entities/" + bad + "/facts", "path"},
				{"GET", "/v1/facts/" + bad, "path"},
				{"GET", "/v1/configs/" + bad, "path"},
				{"GET", "/v1/configs/" + bad + "/versions", "path"},
				{"DELETE", "/v1/configs/" + bad, "path"},
				{"GET", "/v1/entities?entity_type=account&" + bad + "=x", "\uFFFD"},
			} {
				r := h.req(tc.method, tc.path, h.keyA, nil)
				r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
				field := tc.field
				if field == "\uFFFD" {
					u, _ := url.QueryUnescape(bad)
					field = strings.ToValidUTF8(strings.ReplaceAll(u, "\x00", "\uFFFD"), "\uFFFD")
				}
				if got := r.fieldErrors(); got[field] != "format" {
					t.Errorf("%s %s: field errors %v, want %q: format", tc.method, tc.path, got, field)
				}
			}
		}
	})
}

// countingLedger serves the account type's deposit command and counts the
// decisions it is asked for.
type countingLedger struct{ decides atomic.Int64 }

func (l *countingLedger) Name() string         { return "account" }
func (l *countingLedger) StateDependent() bool { return false }
func (l *countingLedger) Commands() []ledger.CommandSpec {
	return []ledger.CommandSpec{{Name: "deposit", Method: "POST", Path: "/deposit", Emits: []string{"deposit"}}}
}

func (l *countingLedger) Decide(_ context.Context, _ json.RawMessage, cmd ledger.Command) (ledger.Decision, error) {
	l.decides.Add(1)
	return ledger.Decision{Facts: []ledger.NewFact{{Type: "deposit", Subtype: "manual", Data: json.RawMessage(`{"amount":1}`)}}}, nil
}

func (l *countingLedger) Evolve(_ context.Context, state, _ json.RawMessage) (json.RawMessage, error) {
	return state, nil
}

// TestRefusalsSayTheRule: a refused value's message states the rule it
// broke (length, first character), and keys that name the entity's own
// properties are refused where a request cannot set them, not stored as
// fields that contradict them.
func TestRefusalsSayTheRule(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	before := fmt.Sprint(h.req("GET", "/v1/entities/"+ent+"?entity_type=account", h.keyA, nil).wantStatus(t, 200).data())
	for _, tc := range []struct {
		name, method, path, body string
		field, code, says        string
	}{
		{"config type too long", "POST", "/v1/configs", `{"type":"` + strings.Repeat("t", 65) + `","settings":{}}`, "type", "format", "1-64 characters"},
		{"config type starts with a digit", "POST", "/v1/configs", `{"type":"1t","settings":{}}`, "type", "format", "a lowercase letter, then"},
		{"scope type too long", "POST", "/v1/configs", `{"type":"t","scope_type":"` + strings.Repeat("s", 33) + `","settings":{}}`, "scope_type", "format", "1-32 characters"},
		{"fact type starts with a digit", "POST", "/v1/facts", `{"entity_id":"` + ent + `","type":"1deposit"}`, "type", "format", "a lowercase letter, then"},
		{"empty entity id", "POST", "/v1/entities", `{"type":"account","id":"","name":"A","status":"active","subtype":"customer"}`, "id", "format", "or left out to have one generated"},
		{"tenant on create", "POST", "/v1/entities", `{"type":"account","name":"A","status":"active","subtype":"customer","tenant_id":"other"}`, "tenant_id", "unknown_field", "inside data"},
		{"version on create", "POST", "/v1/entities", `{"type":"account","name":"A","status":"active","subtype":"customer","version":3}`, "version", "unknown_field", "inside data"},
		{"type on patch", "PATCH", "/v1/entities/" + ent, `{"version":1,"type":"asset"}`, "type", "unknown_field", "the entity's own"},
		{"duplicate member", "POST", "/v1/entities", `{"type":"account","name":"A","name":"B","status":"active","subtype":"customer"}`, "name", "format", "more than once"},
		{"field at the top level and in data", "POST", "/v1/entities", `{"type":"account","name":"A","status":"active","subtype":"customer","data":{"name":"B"}}`, "data.name", "format", "both at the top level and in data"},
		{"field at the top level and in data on patch", "PATCH", "/v1/entities/" + ent, `{"version":1,"name":"A","data":{"name":"B"}}`, "data.name", "format", "both at the top level and in data"},
		{"duplicate member in data", "POST", "/v1/facts", `{"entity_id":"` + ent + `","type":"deposit","data":{"amount":1,"amount":2}}`, "data.amount", "format", "more than once"},
		{"duplicate member in settings", "POST", "/v1/configs", `{"type":"t","settings":{"a":{"b":1,"b":1}}}`, "settings.a.b", "format", "more than once"},
		{"id on patch", "PATCH", "/v1/entities/" + ent, `{"version":1,"id":"hijack"}`, "id", "unknown_field", "the entity's own"},
		{"tenant on patch", "PATCH", "/v1/entities/" + ent, `{"version":1,"tenant_id":"other","created_at":1}`, "tenant_id", "unknown_field", "the entity's own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.req(tc.method, tc.path, h.keyA, tc.body)
			r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
			var found bool
			for _, e := range r.body["errors"].([]any) {
				e := e.(map[string]any)
				if e["field"] == tc.field && e["code"] == tc.code && strings.Contains(str(e["message"]), tc.says) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no %s/%s error saying %q: %s", tc.field, tc.code, tc.says, r.raw)
			}
		})
	}
	if after := fmt.Sprint(h.req("GET", "/v1/entities/"+ent+"?entity_type=account", h.keyA, nil).wantStatus(t, 200).data()); after != before {
		t.Errorf("refused patches changed the entity:\n%s\n%s", before, after)
	}
	// A domain field of such a name goes inside data.
	h.req("PATCH", "/v1/entities/"+ent+"?entity_type=account", h.keyA, `{"version":1,"data":{"note":"kept"}}`).wantStatus(t, 200)
}

// TestQueryParametersAreChecked: every platform listing and read refuses
// a query parameter it does not know (a misspelt filter would otherwise
// list everything) and one given twice (only one of them could count).
func TestQueryParametersAreChecked(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	for _, tc := range []struct {
		path, field, code string
	}{
		{"/v1/configs?typ=webhook", "typ", "unknown_field"},
		{"/v1/configs?limit=2&limit=3", "limit", "format"},
		{"/v1/facts?typ=deposit", "typ", "unknown_field"},
		{"/v1/facts?type=deposit&type=withdrawal", "type", "format"},
		{"/v1/entities/" + ent + "/facts?foo=1", "foo", "unknown_field"},
		{"/v1/entities/" + ent + "?entity_type=account&extra=1", "extra", "unknown_field"},
		{"/v1/entities/" + ent + "?entity_type=account&entity_type=asset", "entity_type", "format"},
		{"/v1/entities?entity_type=account&entity_type=asset", "entity_type", "format"},
		{"/v1/entities?entity_type=account&nofield=1", "nofield", "unknown_field"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := h.req("GET", tc.path, h.keyA, nil)
			r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
			if errs, _ := r.body["errors"].([]any); len(errs) == 0 || errs[0].(map[string]any)["field"] != tc.field || errs[0].(map[string]any)["code"] != tc.code {
				t.Fatalf("want %s/%s first: %s", tc.field, tc.code, r.raw)
			}
		})
	}
	// The same reads with what they know answer.
	for _, path := range []string{"/v1/configs?type=webhook&limit=2", "/v1/facts?type=deposit", "/v1/entities/" + ent + "/facts?limit=5",
		"/v1/entities/" + ent + "?entity_type=account", "/v1/entities?entity_type=account&status=active"} {
		h.req("GET", path, h.keyA, nil).wantStatus(t, 200)
	}
}

// TestRawFactDataIsBoundedLikeCommandInput: a raw fact reaches every
// subscription handler, so its data is held to a command input's nesting
// and member bounds; at the bounds it is recorded.
func TestRawFactDataIsBoundedLikeCommandInput(t *testing.T) {
	t.Parallel()
	h := setup(t, "sqlite")
	ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	fact := func(data string) string {
		return `{"entity_id":"` + ent + `","type":"deposit","source_id":"s","data":` + data + `}`
	}
	// depth n: data is level 1, each [ one more.
	deep := func(n int) string {
		return `{"amount":1,"x":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + "}"
	}
	wide := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"amount":1,"k0":{}`)
		for i := 2; i < n; i++ {
			fmt.Fprintf(&b, `,"k%d":%d`, i, i)
		}
		return b.String() + "}"
	}
	h.req("POST", "/v1/facts", h.keyA, fact(deep(platform.MaxFactDataDepth))).wantStatus(t, 201)
	h.req("POST", "/v1/facts", h.keyA, fact(wide(platform.MaxFactDataKeys))).wantStatus(t, 201)
	for _, tc := range []struct{ name, data, says string }{
		{"too deep", deep(platform.MaxFactDataDepth + 1), "data nests deeper than 32 levels"},
		{"too many members", wide(platform.MaxFactDataKeys + 1), "data has more than 1000 keys"},
	} {
		r := h.req("POST", "/v1/facts", h.keyA, fact(tc.data))
		r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
		if got := fmt.Sprint(r.body["errors"]); !strings.Contains(got, tc.says) || r.fieldErrors()["data"] != "range" {
			t.Errorf("%s: errors %s, want data: range saying %q", tc.name, got, tc.says)
		}
	}
	if n := len(h.req("GET", "/v1/entities/"+ent+"/facts", h.keyA, nil).wantStatus(t, 200).data()["items"].([]any)); n != 2 {
		t.Errorf("%d facts stored, want the 2 within the bounds", n)
	}
}

// TestIndexedValuesAreBoundedOnBothStores: what a store keeps in an index
// (string fields with a storage slot, a fact's subtype and source_id) has
// a length bound below Postgres's index entry limit. At the bound both
// stores store it; past it both refuse it with a 400 naming the field,
// where Postgres had failed the write with a 500.
func TestIndexedValuesAreBoundedOnBothStores(t *testing.T) {
	t.Parallel()
	atSlot := strings.Repeat("é", platform.MaxSlotLength/2) // bytes, not characters
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			// Random letters: Postgres compresses a repeated letter below
			// its limit. One source per subtest: they run in parallel.
			rnd := rand.New(rand.NewPCG(1, 2))
			letters := func(n int) string {
				b := make([]byte, n)
				for i := range b {
					b[i] = byte('a' + rnd.IntN(26))
				}
				return string(b)
			}
			h := setup(t, backend)
			// Ids of the longest kind, so the index entry is at its largest.
			account := func(id, name string) map[string]any {
				return map[string]any{"type": "account", "id": strings.Repeat(id, 128), "name": name, "status": "active", "subtype": "customer"}
			}
			ent := str(h.req("POST", "/v1/entities", h.keyA, account("a", atSlot)).wantStatus(t, 201).data()["id"])
			fact := map[string]any{"entity_id": ent, "type": "deposit", "data": map[string]any{"amount": 1},
				"subtype": letters(platform.MaxSubtypeLength), "source_id": letters(platform.MaxSourceIDLength), "trace_id": letters(platform.MaxTraceIDLength)}
			h.req("POST", "/v1/facts", h.keyA, fact).wantStatus(t, 201)
			h.req("PATCH", "/v1/entities/"+ent, h.keyA, map[string]any{"version": 2, "owner_id": letters(platform.MaxSlotLength)}).wantStatus(t, 200)
			before := h.stored(ent)
			for _, tc := range []struct {
				name, method, path string
				body               map[string]any
				field              string
			}{
				{"entity field", "POST", "/v1/entities", account("b", letters(3000)), "name"},
				{"entity field one byte over", "POST", "/v1/entities", account("c", atSlot+"x"), "name"},
				{"patched field", "PATCH", "/v1/entities/" + ent, map[string]any{"version": 3, "owner_id": letters(3000)}, "owner_id"},
				{"fact subtype", "POST", "/v1/facts", map[string]any{"entity_id": ent, "type": "deposit", "data": map[string]any{"amount": 1}, "subtype": letters(platform.MaxSubtypeLength + 1)}, "subtype"},
				{"fact source_id", "POST", "/v1/facts", map[string]any{"entity_id": ent, "type": "deposit", "data": map[string]any{"amount": 1}, "source_id": letters(3000)}, "source_id"},
				{"fact trace_id", "POST", "/v1/facts", map[string]any{"entity_id": ent, "type": "deposit", "data": map[string]any{"amount": 1}, "trace_id": letters(3000)}, "trace_id"},
			} {
				r := h.req(tc.method, tc.path, h.keyA, tc.body)
				r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
				if got := r.fieldErrors(); got[tc.field] != "range" {
					t.Errorf("%s: field errors %v, want %s: range", tc.name, got, tc.field)
				}
			}
			if after := h.stored(ent); after != before {
				t.Fatalf("refused writes changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestNumbersReadBackAsTheWriteAnswered: a number is stored written out
// (1e2 as 100), on both stores alike, so an entity, a fact and a config
// read back as the write that stored them answered, whichever store keeps
// them; a short exponent that would be a long number is refused.
func TestNumbersReadBackAsTheWriteAnswered(t *testing.T) {
	t.Parallel()
	const nums = `{"a":1e2,"b":-0,"c":1e-20,"d":1.50e1,"e":0.10,"f":[-12E-5,7]}`
	const want = `{"a":100,"b":0,"c":0.00000000000000000001,"d":15.0,"e":0.10,"f":[-0.00012,7]}`
	canon := func(t *testing.T, v any) string {
		t.Helper()
		b, err := json.Marshal(v) // members sorted, numbers as read
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var wantCanon string
	{
		var v any
		dec := json.NewDecoder(strings.NewReader(want))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		wantCanon = canon(t, v)
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h := setup(t, backend)
			created := h.req("POST", "/v1/entities", h.keyA, `{"type":"account","name":"N","status":"active","subtype":"customer","n":`+nums+`,"metadata":{"m":`+nums+`}}`).wantStatus(t, 201).data()
			ent := created["entity"].(map[string]any)
			id := str(ent["id"])
			read := h.req("GET", "/v1/entities/"+id+"?entity_type=account", h.keyA, nil).wantStatus(t, 200).data()
			for _, got := range []map[string]any{ent, read} {
				if c := canon(t, got["data"].(map[string]any)["n"]); c != wantCanon {
					t.Errorf("entity data n = %s, want %s", c, wantCanon)
				}
				if c := canon(t, got["metadata"].(map[string]any)["m"]); c != wantCanon {
					t.Errorf("entity metadata m = %s, want %s", c, wantCanon)
				}
			}
			fact := h.req("POST", "/v1/facts", h.keyA, `{"entity_id":"`+id+`","type":"deposit","data":{"amount":1,"n":`+nums+`}}`).wantStatus(t, 201).data()
			fid := str(fact["id"])
			readFact := h.req("GET", "/v1/facts/"+fid, h.keyA, nil).wantStatus(t, 200).data()
			for _, got := range []map[string]any{fact, readFact} {
				if c := canon(t, got["data"].(map[string]any)["n"]); c != wantCanon {
					t.Errorf("fact data n = %s, want %s", c, wantCanon)
				}
			}
			cfg := h.req("POST", "/v1/configs", h.keyA, `{"type":"pricing","scope_type":"global","settings":{"n":`+nums+`}}`).wantStatus(t, 201).data()
			cid := str(cfg["id"])
			readCfg := h.req("GET", "/v1/configs/"+cid, h.keyA, nil).wantStatus(t, 200).data()
			for _, got := range []map[string]any{cfg, readCfg} {
				if c := canon(t, got["settings"].(map[string]any)["n"]); c != wantCanon {
					t.Errorf("config settings n = %s, want %s", c, wantCanon)
				}
			}
			r := h.req("POST", "/v1/entities", h.keyA, `{"type":"account","name":"N","status":"active","subtype":"customer","tiny":1e-323}`)
			r.wantProblem(t, 400, "validation-failed", "Validation Failed", "Request validation failed")
			if got := r.fieldErrors(); got["tiny"] != "range" {
				t.Errorf("1e-323: field errors %v, want tiny: range", got)
			}
		})
	}
}
