package webhook

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
)

// addAttempts appends webhook.sent facts straight through the store, one
// per (timestamp, success, response time); a negative time is an attempt
// that got no answer (no response_time_ms).
func addAttempts(t *testing.T, st store.Store, tenant string, at []int64, ok []bool, ms []float64) {
	t.Helper()
	var items []store.Append
	for i := range at {
		d := map[string]any{"delivery_id": fmt.Sprintf("del_%s_%d", tenant, i), "success": ok[i], "attempt": 1}
		if ms[i] >= 0 {
			d["response_time_ms"] = ms[i]
		}
		raw, _ := json.Marshal(d)
		items = append(items, store.Append{Fact: store.Fact{ID: fmt.Sprintf("fct_sent_%s_%06d", tenant, i), TenantID: tenant,
			Type: ConfigType, Subtype: "sent", Timestamp: at[i], Data: raw, CreatedAt: at[i]}})
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

// nearestRank is the smallest value v with at least p of the values at
// or below it.
func nearestRank(values []float64, p float64) float64 {
	best := -1.0
	for _, v := range values {
		below := 0
		for _, w := range values {
			if w <= v {
				below++
			}
		}
		if float64(below) >= p*float64(len(values)) && (best < 0 || v < best) {
			best = v
		}
	}
	return best
}

// TestDeliveryStats: GET /v1/webhooks/deliveries/stats buckets the
// tenant's webhook.sent facts of [from, to): attempts, successes, their
// ratio and the p50/p99 response time of each span, for any key of the
// tenant and nothing of another tenant or outside the window.
func TestDeliveryStats(t *testing.T) {
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t, backend, nil)
			a := newAPI(t, e)
			from := clockStart.UnixMilli()
			const hour = int64(3_600_000)
			to := from + 4*hour
			rng := rand.New(rand.NewPCG(13, 4))
			var at []int64
			var ok []bool
			var ms []float64
			type span struct {
				n, succeeded int
				times        []float64
			}
			want := make([]span, 4)
			// Spans 0, 1 and 3 have attempts (span 2 none), and one outside
			// the window on each side.
			for _, b := range []int{0, 1, 3} {
				for i := 0; i < 37+b*11; i++ {
					ts := from + int64(b)*hour + rng.Int64N(hour)
					good := rng.IntN(4) != 0
					rt := float64(rng.IntN(5000)) + 0.5
					if !good && i%3 == 0 {
						rt = -1
					}
					at, ok, ms = append(at, ts), append(ok, good), append(ms, rt)
					want[b].n++
					if good {
						want[b].succeeded++
					}
					if rt >= 0 {
						want[b].times = append(want[b].times, rt)
					}
				}
			}
			at, ok, ms = append(at, from-1, to), append(ok, true, true), append(ms, 1, 1)
			addAttempts(t, e.st, tenantA, at, ok, ms)
			addAttempts(t, e.st, "tenant-b", []int64{from + 2*hour}, []bool{true}, []float64{7})

			for _, key := range []string{a.admin, a.live} {
				r := a.do("GET", fmt.Sprintf("/v1/webhooks/deliveries/stats?from=%d&to=%d&buckets=4", from, to), key, nil)
				if r.status != 200 {
					t.Fatalf("%d %s", r.status, r.raw)
				}
				buckets := r.data()["buckets"].([]any)
				if len(buckets) != 4 {
					t.Fatalf("%d buckets: %s", len(buckets), r.raw)
				}
				var all []float64
				total, succeeded := 0, 0
				for i, it := range buckets {
					b := it.(map[string]any)
					w := want[i]
					all = append(all, w.times...)
					total += w.n
					succeeded += w.succeeded
					if b["from"] != float64(from+int64(i)*hour) || b["to"] != float64(from+int64(i+1)*hour) {
						t.Errorf("bucket %d spans %v-%v", i, b["from"], b["to"])
					}
					if b["attempts"] != float64(w.n) || b["succeeded"] != float64(w.succeeded) {
						t.Errorf("bucket %d: %v attempts, %v succeeded; want %d, %d", i, b["attempts"], b["succeeded"], w.n, w.succeeded)
					}
					if w.n == 0 {
						if b["success_ratio"] != nil || b["p50_ms"] != nil || b["p99_ms"] != nil {
							t.Errorf("empty bucket %d: %v", i, b)
						}
						continue
					}
					if b["success_ratio"] != float64(w.succeeded)/float64(w.n) {
						t.Errorf("bucket %d ratio %v, want %v", i, b["success_ratio"], float64(w.succeeded)/float64(w.n))
					}
					if b["p50_ms"] != nearestRank(w.times, 0.5) || b["p99_ms"] != nearestRank(w.times, 0.99) {
						t.Errorf("bucket %d p50 %v p99 %v, want %v %v", i, b["p50_ms"], b["p99_ms"], nearestRank(w.times, 0.5), nearestRank(w.times, 0.99))
					}
				}
				tot := r.data()["total"].(map[string]any)
				if tot["attempts"] != float64(total) || tot["succeeded"] != float64(succeeded) ||
					tot["p50_ms"] != nearestRank(all, 0.5) || tot["p99_ms"] != nearestRank(all, 0.99) || r.data()["truncated"] != false {
					t.Errorf("total %v, want %d attempts, %d succeeded, p50 %v, p99 %v", tot, total, succeeded, nearestRank(all, 0.5), nearestRank(all, 0.99))
				}
			}
			// Unequal spans still cover the window exactly.
			r := a.do("GET", fmt.Sprintf("/v1/webhooks/deliveries/stats?from=%d&to=%d&buckets=7", from, to), a.admin, nil)
			n := 0
			for _, it := range r.data()["buckets"].([]any) {
				n += int(it.(map[string]any)["attempts"].(float64))
			}
			if n != len(at)-2 {
				t.Errorf("7 buckets hold %d attempts, want %d", n, len(at)-2)
			}
			for _, c := range []struct{ query, field string }{
				{"buckets=0", "buckets"}, {"buckets=1001", "buckets"}, {"from=soon", "from"}, {"from=2000&to=1000", "to"},
			} {
				r := a.do("GET", "/v1/webhooks/deliveries/stats?"+c.query, a.live, nil)
				if r.status != 400 || !strings.Contains(string(r.raw), `"field":"`+c.field+`"`) {
					t.Errorf("%s: %d %s, want a validation problem naming %s", c.query, r.status, r.raw, c.field)
				}
			}
			if r := a.do("GET", "/v1/webhooks/deliveries/stats", "", nil); r.status != 401 {
				t.Errorf("no key: %d", r.status)
			}
		})
	}
}
