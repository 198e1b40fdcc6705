package app_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// TestOperatorListsEveryTenantsProjections: GET /v1/admin/projections
// lists the projections of every tenant with their readiness, for admin
// keys of the operator tenant; other admin keys and live keys get 403.
// GET /v1/admin/stream/history answers the lag samples this process took,
// to the operator only.
func TestOperatorListsEveryTenantsProjections(t *testing.T) {
	t.Parallel()
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			l := startLive(t, backend, location(t, backend), func(c *app.Config) { c.LagSampleInterval = 20 * time.Millisecond })
			other := l.newKey("t2", "admin")
			settings := map[string]any{"source": "contact", "factTypes": []string{"call"}, "timeWindow": "hour",
				"aggregations": []map[string]any{{"field": "count", "function": "count"}}, "materialize": true, "storageVersion": 2}
			// A fact, so the stream has a head and its consumers positions.
			if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "contact", "id": "c1", "name": "Ada", "status": "active"}); code != 201 {
				t.Fatalf("create contact: %d %v", code, body)
			}
			if code, body := l.call("POST", "/v1/facts", l.key, map[string]any{"entity_id": "c1", "type": "call", "data": map[string]any{"n": 1}}); code != 201 {
				t.Fatalf("append a fact: %d %v", code, body)
			}
			ids := map[string]string{}
			for tenant, k := range map[string]string{"t1": l.key, "t2": other} {
				code, body := l.call("POST", "/v1/configs", k, map[string]any{"type": "projection", "name": "calls-" + tenant, "settings": settings})
				if code != 201 {
					t.Fatalf("create projection of %s: %d %v", tenant, code, body)
				}
				ids[tenant] = dataOf(body)["id"].(string)
			}
			var items []any
			testutil.EventuallyNil(t, time.Minute, func() error {
				code, body := l.call("GET", "/v1/admin/projections", l.op, nil)
				if code != 200 {
					t.Fatalf("operator: %d %v", code, body)
				}
				items, _ = dataOf(body)["items"].([]any)
				ready := 0
				for _, it := range items {
					if m := it.(map[string]any); m["ready"] == true && m["status"] == "ready" {
						ready++
					}
				}
				if ready != 2 {
					return fmt.Errorf("two ready projections not listed: %v", items)
				}
				return nil
			})
			var got []string
			for _, it := range items {
				m := it.(map[string]any)
				got = append(got, fmt.Sprint(m["tenant"], " ", m["config_id"], " ", m["name"], " ", m["config_version"]))
			}
			want := []string{"t1 " + ids["t1"] + " calls-t1 1", "t2 " + ids["t2"] + " calls-t2 1"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("operator lists %v, want %v", got, want)
			}
			for name, k := range map[string]string{"tenant admin": other, "tenant live": l.key, "operator live": l.newKey("operator", "live")} {
				for _, p := range []string{"/v1/admin/projections", "/v1/admin/stream", "/v1/admin/stream/history"} {
					if code, body := l.call("GET", p, k, nil); code != 403 {
						t.Errorf("%s key on %s: %d %v, want 403", name, p, code, body)
					}
				}
			}

			// The operator sees every tenant's projection consumers, by name.
			testutil.EventuallyNil(t, time.Minute, func() error {
				code, body := l.call("GET", "/v1/admin/stream", l.op, nil)
				consumers, _ := dataOf(body)["consumers"].([]any)
				var names []string
				for _, c := range consumers {
					names = append(names, fmt.Sprint(c.(map[string]any)["name"]))
				}
				seen := map[string]bool{}
				for _, n := range names {
					for tenant, id := range ids {
						if strings.Contains(n, ":"+tenant+":"+id) {
							seen[tenant] = true
						}
					}
				}
				if code != 200 || !slices.IsSorted(names) || !seen["t1"] || !seen["t2"] {
					return fmt.Errorf("operator's stream status: %d, consumers %v; want both tenants' projections, by name", code, names)
				}
				return nil
			})

			// The lag history fills as the process samples it.
			testutil.EventuallyNil(t, time.Minute, func() error {
				code, body := l.call("GET", "/v1/admin/stream/history", l.op, nil)
				if code != 200 {
					t.Fatalf("history: %d %v", code, body)
				}
				samples, _ := dataOf(body)["samples"].([]any)
				if len(samples) >= 2 {
					first, last := samples[0].(map[string]any), samples[len(samples)-1].(map[string]any)
					lag, _ := last["lag"].(map[string]any)
					if fmt.Sprint(first["at"]) < fmt.Sprint(last["at"]) && len(lag) > 0 && fmt.Sprint(last["head"]) != "0" && fmt.Sprint(dataOf(body)["interval_ms"]) == "20" {
						return nil
					}
				}
				return fmt.Errorf("no two lag samples with consumers: %d samples, interval %v", len(samples), dataOf(body)["interval_ms"])
			})
		})
	}
}

// TestDeclaredSubscriptionWithoutAPositionIsListed: a subscription that
// has not saved a position (its handler is not served, so it has read
// nothing) is listed at position 0 with the whole stream as its lag; it
// had been left out of the stream status until it saved one.
func TestDeclaredSubscriptionWithoutAPositionIsListed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := filepath.Join(dir, "stalled.yaml")
	if err := os.WriteFile(d, []byte("name: stalled\nversion: \"1\"\nsubscriptions:\n  - {name: stalled, patterns: [outcome.no_answer], handler: nowhere}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, "sqlite", dir, func(c *app.Config) { c.Domains = []string{d} })
	code, body := l.call("GET", "/v1/admin/stream", l.op, nil)
	if code != 200 {
		t.Fatalf("stream status: %d %v", code, body)
	}
	for _, c := range dataOf(body)["consumers"].([]any) {
		m := c.(map[string]any)
		if m["name"] == "subscription:stalled" {
			if fmt.Sprint(m["position"]) != "0" || m["declared"] != true {
				t.Fatalf("stalled subscription listed as %v", m)
			}
			return
		}
	}
	t.Fatalf("a declared subscription without a position is not listed: %v", body)
}
