package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/teststore"
)

// recordingProjections remembers what the query action asked for.
type recordingProjections struct {
	mu      sync.Mutex
	tenant  string
	name    string
	filters map[string]any
}

func (p *recordingProjections) Query(_ context.Context, tenant, name string, filters map[string]any) ([]any, map[string]any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tenant, p.name, p.filters = tenant, name, filters
	return []any{map[string]any{"count": 1}}, map[string]any{"config_version": 3}, nil
}

const queryRoutes = `name: q
version: "1"
routes:
  - {path: /v1/stats, method: GET, entity: account, action: query}
  - {path: /v1/stats/:projection, method: GET, entity: account, action: query}
  - {path: /v1/reports/:projection, method: POST, entity: account, action: query}
  - {path: /v1/reports, method: POST, entity: account, action: query}
`

// TestQueryActionInputs: the query action takes the projection from the
// body, a :projection path parameter or the query string, and on GET its
// filters from the query string, typed as JSON would type them.
func TestQueryActionInputs(t *testing.T) {
	st := teststore.Open(t, "sqlite")
	base, err := manifest.LoadDomainFile("../../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := manifest.ParseGateway("q.yaml", []byte(queryRoutes), base)
	if err != nil {
		t.Fatal(err)
	}
	p, err := platform.New(platform.Options{Store: st, Domain: base, Ledgers: ledger.Fallback{Static: ledger.Builtin()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	rec := &recordingProjections{}
	srv, err := gateway.New(gateway.Config{DocsURL: docsURL}, gateway.Deps{Platform: p, Auth: auth.NewAuthenticator(st),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Projections: rec, Routes: gw})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, store: st}
	key := h.newKey("tenant-q", auth.ModeLive)

	tests := []struct {
		name        string
		method      string
		path        string
		body        any
		wantName    string
		wantFilters map[string]any
	}{
		{"GET query string", "GET", "/v1/stats?projection=sales&from=1705276800000&to=2024-01-15T10&aggregate=true&mode=compute&data.currency=EUR",
			nil, "sales", map[string]any{"from": json.Number("1705276800000"), "to": "2024-01-15T10", "aggregate": true, "mode": "compute", "data.currency": "EUR"}},
		{"GET projection in the path", "GET", "/v1/stats/sales?aggregate=false", nil, "sales", map[string]any{"aggregate": false}},
		{"GET without filters", "GET", "/v1/stats/sales", nil, "sales", nil},
		{"POST projection in the path", "POST", "/v1/reports/sales", map[string]any{"filters": map[string]any{"from": 5}}, "sales", map[string]any{"from": json.Number("5")}},
		{"POST body", "POST", "/v1/reports", map[string]any{"projection": "sales", "filters": map[string]any{"mode": "verify"}}, "sales", map[string]any{"mode": "verify"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.req(tt.method, tt.path, key, tt.body).wantStatus(t, 200)
			d := r.data()
			if d["count"] != json.Number("1") || d["_meta"].(map[string]any)["config_version"] != json.Number("3") {
				t.Errorf("data %s", r.raw)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if rec.tenant != "tenant-q" || rec.name != tt.wantName || !reflect.DeepEqual(rec.filters, tt.wantFilters) {
				t.Errorf("asked tenant %q, projection %q, filters %#v; want tenant-q, %q, %#v", rec.tenant, rec.name, rec.filters, tt.wantName, tt.wantFilters)
			}
		})
	}
	if h.req("POST", "/v1/reports/sales", key, map[string]any{"projection": "other"}).fieldErrors()["projection"] != "enum" {
		t.Error("a body projection other than the path's was accepted")
	}
	if h.req("GET", "/v1/stats", key, nil).fieldErrors()["projection"] != "required" {
		t.Error("GET without a projection accepted")
	}
	// Only one value of a parameter can count, and a query string beside a
	// body would be ignored: both are refused.
	if got := h.req("GET", "/v1/stats?projection=a&projection=b&aggregate=true&aggregate=false", key, nil).fieldErrors(); got["projection"] != "format" || got["aggregate"] != "format" {
		t.Errorf("repeated parameters: %v", got)
	}
	if got := h.req("POST", "/v1/reports/sales?from=abc", key, map[string]any{}).fieldErrors(); got["from"] != "unknown_field" {
		t.Errorf("a query string beside a body: %v", got)
	}
}
