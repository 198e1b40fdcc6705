package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/teststore"
)

// echoLedger serves account entities: earn records a deposit whose data
// is the command's input (as does tip, served at /v1/entities/:id/tip),
// summary answers its input, and nothing else.
type echoLedger struct{ decides atomic.Int64 }

func (l *echoLedger) Name() string         { return "account" }
func (l *echoLedger) StateDependent() bool { return false }
func (l *echoLedger) Commands() []ledger.CommandSpec {
	return []ledger.CommandSpec{
		{Name: "earn", Emits: []string{"deposit"}},
		{Name: "tip", Method: "POST", Path: "/tip", Emits: []string{"deposit"}},
		{Name: "summary", Method: "GET", Path: "/summary", ReadOnly: true},
	}
}

func (l *echoLedger) Decide(_ context.Context, _ json.RawMessage, cmd ledger.Command) (ledger.Decision, error) {
	l.decides.Add(1)
	if cmd.Name == "summary" {
		return ledger.Decision{Result: json.RawMessage(`{"input":` + string(cmd.Input) + `}`)}, nil
	}
	return ledger.Decision{Facts: []ledger.NewFact{{Type: "deposit", Subtype: "manual", Data: cmd.Input}}}, nil
}

func (l *echoLedger) Evolve(_ context.Context, state, _ json.RawMessage) (json.RawMessage, error) {
	return state, nil
}

const commandRoutes = `
name: commands
version: "1"
routes:
  - {path: /api/accounts/:id/earn, method: POST, entity: account, action: command, command: earn}
  - {path: /api/shops/:shop/accounts/:id/earn, method: POST, entity: account, action: command, command: earn}
  - {path: /api/accounts/:id/summary, method: GET, entity: account, action: command, command: summary}
  - {path: /api/assets/:id/summary, method: GET, entity: asset, action: command, command: summary}
  - {path: /api/accounts/:id/refund, method: POST, entity: account, action: command, command: refund}
`

func setupCommandRoutes(t *testing.T, backend string) (*harness, *echoLedger) {
	t.Helper()
	l := &echoLedger{}
	h := setupOnWith(t, teststore.Open(t, backend), ledger.Static{"account": l})
	domain, err := manifest.LoadDomainFile("../../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := manifest.ParseGateway("commands.yaml", []byte(commandRoutes), domain)
	if err != nil {
		t.Fatal(err)
	}
	deps := h.deps
	deps.Routes = gw
	if h.srv, err = gateway.New(gateway.Config{DocsURL: docsURL, BodyLimit: 64 << 10}, deps); err != nil {
		t.Fatal(err)
	}
	return h, l
}

func TestCommandRouteWriteAnswers201WithTheRecordedFact(t *testing.T) {
	t.Parallel()
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h, l := setupCommandRoutes(t, backend)
			ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
			first := h.req("POST", "/api/accounts/"+ent+"/earn", h.keyA, `{"amount":5}`, "Idempotency-Key", "e-1").wantStatus(t, 201)
			d := first.data()
			if d["type"] != "deposit" || d["entity_id"] != ent {
				t.Fatalf("recorded fact %s", first.raw)
			}
			if data, _ := d["data"].(map[string]any); fmt.Sprint(data["amount"]) != "5" {
				t.Fatalf("input not passed to the ledger: %s", first.raw)
			}
			// The same idempotency key replays the answer; the ledger is
			// not asked again.
			again := h.req("POST", "/api/accounts/"+ent+"/earn", h.keyA, `{"amount":5}`, "Idempotency-Key", "e-1").wantStatus(t, 201)
			again.wantReplayOf(t, first)
			if l.decides.Load() != 1 {
				t.Fatalf("replay: %s (decided %d times)", again.raw, l.decides.Load())
			}
			h.req("POST", "/api/accounts/"+ent+"/earn", h.keyA, `{"amount":6}`, "Idempotency-Key", "e-1").wantStatus(t, 422)
		})
	}
}

func TestCommandRoutePathParamsWinOverBodyMembers(t *testing.T) {
	t.Parallel()
	h, _ := setupCommandRoutes(t, "sqlite")
	ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	r := h.req("POST", "/api/shops/s-9/accounts/"+ent+"/earn", h.keyA, `{"amount":5,"shop":"other","id":"x"}`).wantStatus(t, 201)
	data, _ := r.data()["data"].(map[string]any)
	if data["shop"] != "s-9" || fmt.Sprint(data["amount"]) != "5" || data["id"] != "x" {
		t.Fatalf("input %v: want shop from the path, amount and id from the body", data)
	}
}

func TestCommandRouteReadAnswers200WithTheResult(t *testing.T) {
	t.Parallel()
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			h, _ := setupCommandRoutes(t, backend)
			ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
			r := h.req("GET", "/api/accounts/"+ent+"/summary?period=week", h.keyA, nil).wantStatus(t, 200)
			in, _ := r.data()["input"].(map[string]any)
			if in["period"] != "week" || r.body["meta"] == nil {
				t.Fatalf("answer %s", r.raw)
			}
		})
	}
}

func TestCommandRouteProblems(t *testing.T) {
	t.Parallel()
	h, l := setupCommandRoutes(t, "sqlite")
	ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	asset := str(h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "asset", "name": "a", "status": "active", "identifier": "a-1", "subtype": "line"}).wantStatus(t, 201).data()["id"])
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		slug                     string
	}{
		{"missing entity", "POST", "/api/accounts/nope/earn", `{}`, 404, "not-found"},
		{"entity of another type", "GET", "/api/accounts/" + asset + "/summary", "", 404, "not-found"},
		{"command the loaded ledger lacks", "POST", "/api/accounts/" + ent + "/refund", `{}`, 503, "unavailable"},
		{"ledger without commands", "GET", "/api/assets/" + asset + "/summary", "", 503, "unavailable"},
		{"body not JSON", "POST", "/api/accounts/" + ent + "/earn", `{`, 400, "bad-request"},
		{"no key", "POST", "/api/accounts/" + ent + "/earn", `{}`, 401, "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := h.keyA
			if tc.status == 401 {
				key = ""
			}
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := h.req(tc.method, tc.path, key, body).wantStatus(t, tc.status)
			if r.body["type"] != docsURL+"/errors/"+tc.slug {
				t.Errorf("problem %s", r.raw)
			}
		})
	}
	if n := l.decides.Load(); n != 0 {
		t.Fatalf("ledger decided %d times for refused requests", n)
	}
}

// TestLedgerReadCommandsAnswerHead: HEAD runs a read-only GET command as
// GET does, without the body; it never runs a write, and a 405's Allow
// lists HEAD beside a read-only GET only.
func TestLedgerReadCommandsAnswerHead(t *testing.T) {
	t.Parallel()
	h, l := setupCommandRoutes(t, "sqlite")
	ent := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	path := "/v1/entities/" + ent + "/summary?period=week"
	get := h.req("GET", path, h.keyA, nil).wantStatus(t, 200)
	head := h.req("HEAD", path, h.keyA, nil)
	if head.status != 200 || len(head.raw) != 0 || head.header.Get("Content-Length") != strconv.Itoa(len(get.raw)) {
		t.Fatalf("HEAD %s: %d Content-Length %q body %q; GET body %d bytes", path, head.status, head.header.Get("Content-Length"), head.raw, len(get.raw))
	}
	before := l.decides.Load()
	for _, tc := range []struct{ method, path, allow string }{
		{"HEAD", "/v1/entities/" + ent + "/tip", "POST"},
		{"PUT", "/v1/entities/" + ent + "/summary", "GET, HEAD"},
	} {
		r := h.req(tc.method, tc.path, h.keyA, nil)
		if r.status != 405 || r.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", tc.method, tc.path, r.status, r.header.Get("Allow"), tc.allow)
		}
	}
	if n := l.decides.Load(); n != before {
		t.Fatalf("the ledger decided %d times for refused methods", n-before)
	}
}
