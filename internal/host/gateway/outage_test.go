package gateway_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// TestDatabaseOutageIsServiceUnavailable: while PostgreSQL cannot be
// reached, authentication, writes and reads answer a 503 problem with
// Retry-After promptly instead of a 500 or a hang, /health names the
// database, and once it is back requests succeed with nothing lost or
// stored twice.
func TestDatabaseOutageIsServiceUnavailable(t *testing.T) {
	t.Parallel()
	direct := testutil.Postgres(t)
	proxied, px := testutil.ProxyPostgres(t, direct)
	h := setupOn(t, teststore.OpenAt(t, "postgres", proxied))
	t.Cleanup(func() { h.store.Close() })

	id := str(h.req("POST", "/v1/entities", h.keyA, validAccount).wantStatus(t, 201).data()["id"])
	deposit := map[string]any{"entity_id": id, "type": "deposit", "subtype": "manual", "data": map[string]any{"amount": 0.1}}
	h.req("POST", "/v1/facts", h.keyA, deposit).wantStatus(t, 201)

	px.SetDown(true)
	for _, tc := range []struct {
		name, method, path, key string
		body                    any
		detail                  string
	}{
		// keyB was never looked up, so no cached principal hides the outage.
		{"auth", "GET", "/v1/entities?entity_type=account", h.keyB, nil, "Authentication is temporarily unavailable"},
		{"append fact", "POST", "/v1/facts", h.keyA, deposit, ""},
		{"create entity", "POST", "/v1/entities", h.keyA, validAccount, ""},
		{"get entity", "GET", "/v1/entities/acct-never-read?entity_type=account", h.keyA, nil, ""},
		{"list entities", "GET", "/v1/entities?entity_type=account", h.keyA, nil, ""},
		{"list facts", "GET", "/v1/entities/" + id + "/facts", h.keyA, nil, ""},
	} {
		start := time.Now()
		r := h.req(tc.method, tc.path, tc.key, tc.body)
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s: answered after %v", tc.name, took)
		}
		detail := tc.detail
		if detail == "" {
			detail = "The database is not answering; retry in a few seconds"
		}
		r.wantProblem(t, 503, "unavailable", "Service Unavailable", detail)
		if ra := r.header.Get("Retry-After"); ra != "5" {
			t.Errorf("%s: Retry-After %q, want 5", tc.name, ra)
		}
	}
	r := h.req("GET", "/health", "", nil)
	r.wantProblem(t, 503, "unavailable", "Service Unavailable", "Unhealthy: [store]; down: database")

	px.SetDown(false)
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		r := h.req("POST", "/v1/facts", h.keyA, deposit)
		if r.status != 201 && r.status != 503 {
			t.Fatalf("after the outage: %d %s", r.status, r.raw)
		}
		if r.status != 201 {
			return fmt.Errorf("after the outage: %d %s", r.status, r.raw)
		}
		return nil
	})
	d := h.req("GET", "/health", "", nil).wantStatus(t, 200).data()
	if deps, _ := d["dependencies"].(map[string]any); deps["database"] != "up" {
		t.Errorf("health dependencies %v", d["dependencies"])
	}
	h.req("GET", "/v1/entities?entity_type=account", h.keyB, nil).wantStatus(t, 200)
	facts := h.req("GET", "/v1/entities/"+id+"/facts", h.keyA, nil).wantStatus(t, 200).data()
	items, _ := facts["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("facts after the outage: %d, want 2 (one before, one after): %v", len(items), items)
	}
	ent := h.req("GET", "/v1/entities/"+id+"?entity_type=account", h.keyA, nil).wantStatus(t, 200).data()
	if v := ent["version"]; v != json.Number("3") {
		t.Errorf("entity version %v, want 3", v)
	}
}
