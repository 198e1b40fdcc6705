package webhook

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// addDeliveries appends n webhook.triggered facts with their outbox rows
// straight through the store: delivery i has config cfg_<i%2>, status
// dead when i%5 == 0 (else pending), created at clockStart + i seconds.
func addDeliveries(t *testing.T, st store.Store, tenant string, n int) []string {
	t.Helper()
	base := clockStart.UnixMilli()
	ids := make([]string, 0, n)
	for start := 0; start < n; start += 500 {
		var items []store.Append
		for i := start; i < min(n, start+500); i++ {
			factID := fmt.Sprintf("fct_%s_%06d", tenant, i)
			row := &store.OutboxRow{DeliveryID: "del_" + factID + fmt.Sprintf("_cfg_%d_1700000000", i%2), TenantID: tenant,
				TriggeredFactID: factID, ConfigID: fmt.Sprintf("cfg_%d", i%2), ConfigVersion: 1, Endpoint: "https://r.example:443",
				Status: store.OutboxPending, Attempt: 1, MaxAttempts: 5, TimeoutSeconds: 30, SigTimestamp: 1_700_000_000,
				Payload: []byte(`{}`), Message: []byte(`{"url":"https://r.example/hook"}`), NextAttemptAt: base + int64(i)*1000,
				CreatedAt: base + int64(i)*1000, UpdatedAt: base}
			if i%5 == 0 {
				row.Status, row.DeadAt = store.OutboxDead, base
			}
			items = append(items, store.Append{Fact: store.Fact{ID: factID, TenantID: tenant, Type: ConfigType, Subtype: "triggered",
				Timestamp: base, Data: []byte(`{}`), CreatedAt: base}, Outbox: row})
			ids = append(ids, row.DeliveryID)
		}
		res, err := st.AppendFacts(t.Context(), items)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	return ids
}

func TestDeliveriesListFilters(t *testing.T) {
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t, backend, nil)
			a := newAPI(t, e)
			addDeliveries(t, e.st, tenantA, 20)
			addDeliveries(t, e.st, "tenant-b", 5)
			ms := func(i int) string { return fmt.Sprint(clockStart.UnixMilli() + int64(i)*1000) }
			for _, c := range []struct {
				name  string
				query url.Values
				want  []int // delivery numbers, in order
			}{
				{"all", nil, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
				{"status", url.Values{"status": {"dead"}}, []int{0, 5, 10, 15}},
				{"config", url.Values{"config_id": {"cfg_1"}, "to": {ms(8)}}, []int{1, 3, 5, 7}},
				{"time", url.Values{"from": {ms(17)}}, []int{17, 18, 19}},
				{"all filters", url.Values{"status": {"pending"}, "config_id": {"cfg_0"}, "from": {ms(2)}, "to": {ms(9)}}, []int{2, 4, 6, 8}},
			} {
				r := a.do("GET", "/v1/admin/webhooks/deliveries?"+c.query.Encode(), a.admin, nil)
				if r.status != 200 {
					t.Fatalf("%s: %d %s", c.name, r.status, r.raw)
				}
				var got, want []string
				for _, it := range r.data()["items"].([]any) {
					got = append(got, it.(map[string]any)["delivery_id"].(string))
				}
				for _, i := range c.want {
					want = append(want, fmt.Sprintf("del_fct_%s_%06d_cfg_%d_1700000000", tenantA, i, i%2))
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("%s: deliveries\n%v\nwant\n%v", c.name, got, want)
				}
			}
			// Pending deliveries say when they are next tried.
			r := a.do("GET", "/v1/admin/webhooks/deliveries?status=pending&limit=1", a.admin, nil)
			it := r.data()["items"].([]any)[0].(map[string]any)
			if it["next_retry_at"] == nil || it["url"] != "https://r.example/hook" || it["status"] != "pending" {
				t.Errorf("a pending delivery: %v", it)
			}
		})
	}
}

func TestDeliveriesListRefusesBadFilters(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	a := newAPI(t, e)
	for _, c := range []struct{ query, field string }{
		{"status=failed", "status"},
		{"from=yesterday", "from"},
		{"to=-5", "to"},
		{"from=2000&to=1000", "to"},
		{"limit=0", "limit"},
		{"cursor=%25%25", ""},
	} {
		r := a.do("GET", "/v1/admin/webhooks/deliveries?"+c.query, a.admin, nil)
		if r.status != 400 && r.status != 422 || !strings.Contains(string(r.raw), `"status":`) {
			t.Errorf("%s: %d %s, want a problem", c.query, r.status, r.raw)
			continue
		}
		if c.field != "" && !strings.Contains(string(r.raw), `"field":"`+c.field+`"`) {
			t.Errorf("%s: %s does not name %s", c.query, r.raw, c.field)
		}
	}
	if r := a.do("GET", "/v1/admin/webhooks/deliveries", a.live, nil); r.status != 403 {
		t.Errorf("a live key lists deliveries: %d", r.status)
	}
}

// A tenant with 10,000 deliveries gets one page, and the next by its
// cursor, without the list reading them all.
func TestDeliveriesListPagesTenThousand(t *testing.T) {
	// Under the race detector 1,000 deliveries page the same way; the
	// 10,000 and the page times are checked by make test's non-race run.
	n := 10_000
	if testutil.Race {
		n = 1_000
	}
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t, backend, nil)
			a := newAPI(t, e)
			ids := addDeliveries(t, e.st, tenantA, n)
			start := time.Now()
			r := a.do("GET", "/v1/admin/webhooks/deliveries?limit=50", a.admin, nil)
			first := time.Since(start)
			items, _ := r.data()["items"].([]any)
			if r.status != 200 || len(items) != 50 || r.data()["hasMore"] != true {
				t.Fatalf("first page: %d, %d items, %v", r.status, len(items), r.data()["hasMore"])
			}
			r = a.do("GET", "/v1/admin/webhooks/deliveries?limit=50&cursor="+url.QueryEscape(r.data()["cursor"].(string)), a.admin, nil)
			items, _ = r.data()["items"].([]any)
			if len(items) != 50 || items[0].(map[string]any)["delivery_id"] != ids[50] {
				t.Fatalf("second page starts at %v, want %s", items[0], ids[50])
			}
			start = time.Now()
			r = a.do("GET", "/v1/admin/webhooks/deliveries?status=dead&from="+fmt.Sprint(clockStart.UnixMilli()+int64(n-n/4)*1000), a.admin, nil)
			filtered := time.Since(start)
			if n := len(r.data()["items"].([]any)); r.status != 200 || n != 50 {
				t.Fatalf("filtered page: %d, %d items", r.status, n)
			}
			t.Logf("%s: first page of %d in %v, a filtered page in %v", backend, n, first, filtered)
			if first > 2*time.Second || filtered > 2*time.Second {
				t.Errorf("pages took %v and %v, want well under 2s", first, filtered)
			}
		})
	}
}

// TestLiveAndTestKeysReadTheirTenantsDeliveries: GET /v1/webhooks/deliveries
// and /v1/webhooks/deliveries/:id answer live, test and admin keys with
// their own tenant's deliveries only, while the admin listing and every
// write stay 403 for live and test keys.
func TestLiveAndTestKeysReadTheirTenantsDeliveries(t *testing.T) {
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t, backend, nil)
			a := newAPI(t, e)
			test, _, err := auth.CreateKey(t.Context(), e.st, tenantA, auth.ModeTest, "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			other, _, err := auth.CreateKey(t.Context(), e.st, "tenant-b", auth.ModeLive, "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			mine := addDeliveries(t, e.st, tenantA, 6)
			theirs := addDeliveries(t, e.st, "tenant-b", 2)
			for _, c := range []struct {
				name, key string
				want      []string
			}{{"live", a.live, mine}, {"test", test, mine}, {"admin", a.admin, mine}, {"other tenant", other, theirs}} {
				r := a.do("GET", "/v1/webhooks/deliveries?limit=50", c.key, nil)
				if r.status != 200 {
					t.Fatalf("%s: %d %s", c.name, r.status, r.raw)
				}
				var got []string
				for _, it := range r.data()["items"].([]any) {
					got = append(got, it.(map[string]any)["delivery_id"].(string))
				}
				if strings.Join(got, " ") != strings.Join(c.want, " ") {
					t.Errorf("%s key lists %v, want %v", c.name, got, c.want)
				}
			}
			if r := a.do("GET", "/v1/webhooks/deliveries?status=dead", a.live, nil); len(r.data()["items"].([]any)) != 2 {
				t.Errorf("live key, status=dead: %s", r.raw)
			}
			if r := a.do("GET", "/v1/webhooks/deliveries?status=lost", a.live, nil); r.status != 400 || !strings.Contains(string(r.raw), "validation-failed") {
				t.Errorf("live key, bad filter: %d %s", r.status, r.raw)
			}
			r := a.do("GET", "/v1/webhooks/deliveries/"+mine[1], a.live, nil)
			if r.status != 200 || r.data()["delivery_id"] != mine[1] || r.data()["attempts"] == nil {
				t.Errorf("live key reads one delivery: %d %s", r.status, r.raw)
			}
			if r := a.do("GET", "/v1/webhooks/deliveries/"+theirs[0], a.live, nil); r.status != 404 {
				t.Errorf("live key reads another tenant's delivery: %d %s", r.status, r.raw)
			}
			if r := a.do("GET", "/v1/webhooks/deliveries", "", nil); r.status != 401 {
				t.Errorf("no key: %d", r.status)
			}
			for _, w := range [][2]string{{"GET", "/v1/admin/webhooks/deliveries"}, {"POST", "/v1/admin/webhooks/dead-letters/" + mine[0] + "/replay"}} {
				if r := a.do(w[0], w[1], a.live, nil); r.status != 403 {
					t.Errorf("live key %s %s: %d, want 403", w[0], w[1], r.status)
				}
			}
		})
	}
}

// TestBulkReplayReplaysEveryDeadLetter: POST /v1/admin/webhooks/dead-letters/replay
// puts back every dead delivery of the key's tenant (of one config when
// the body names it), each as the one-by-one replay does, and nothing of
// another tenant; live keys get 403 and a bad body 400.
func TestBulkReplayReplaysEveryDeadLetter(t *testing.T) {
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t, backend, nil)
			a := newAPI(t, e)
			ids := addDeliveries(t, e.st, tenantA, 12) // dead: 0 (cfg_0), 5 (cfg_1), 10 (cfg_0)
			other := addDeliveries(t, e.st, "tenant-b", 6)
			replayed := func(r apiResponse) []string {
				var out []string
				for _, it := range r.data()["replayed"].([]any) {
					m := it.(map[string]any)
					if m["status"] != "pending" || m["attempt"] != float64(1) || m["replay_fact_id"] == "" {
						t.Errorf("replayed item %v", m)
					}
					out = append(out, m["delivery_id"].(string))
				}
				return out
			}
			if r := a.do("POST", "/v1/admin/webhooks/dead-letters/replay", a.live, nil); r.status != 403 {
				t.Errorf("live key: %d", r.status)
			}
			if r := a.do("POST", "/v1/admin/webhooks/dead-letters/replay", a.admin, map[string]any{"config_id": 7}); r.status != 400 ||
				!strings.Contains(string(r.raw), `"field":"config_id"`) {
				t.Errorf("bad config_id: %d %s", r.status, r.raw)
			}
			r := a.do("POST", "/v1/admin/webhooks/dead-letters/replay", a.admin, map[string]any{"config_id": "cfg_0"})
			if got := replayed(r); r.status != 200 || strings.Join(got, " ") != ids[0]+" "+ids[10] {
				t.Fatalf("replay of cfg_0: %d %s", r.status, r.raw)
			}
			r = a.do("POST", "/v1/admin/webhooks/dead-letters/replay", a.admin, nil)
			if got := replayed(r); r.status != 200 || strings.Join(got, " ") != ids[5] || r.data()["hasMore"] != false {
				t.Fatalf("replay of the rest: %d %s", r.status, r.raw)
			}
			for _, id := range []string{ids[0], ids[5], ids[10]} {
				if row := e.delivery(id); row.Status != store.OutboxPending || row.Replays != 1 {
					t.Errorf("%s after the bulk replay: %s, %d replays", id, row.Status, row.Replays)
				}
			}
			if row, err := e.st.GetOutbox(t.Context(), "tenant-b", other[0]); err != nil || row.Status != store.OutboxDead {
				t.Errorf("another tenant's dead letter: %v %v", row, err)
			}
			if r := a.do("POST", "/v1/admin/webhooks/dead-letters/replay", a.admin, nil); r.status != 200 || len(r.data()["replayed"].([]any)) != 0 {
				t.Errorf("nothing left to replay: %d %s", r.status, r.raw)
			}
		})
	}
}
