package webhook

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/platform"
)

// TestRetriedDeliveryAuditTrailOverHTTP: a delivery that fails once (503)
// and then succeeds is read back only through the HTTP API, as a user
// would: the webhook.triggered fact by its source (GET /v1/facts), the
// delivery with its attempts (GET /v1/admin/webhooks/deliveries/:id), and
// every webhook.sent fact by source_id, page by page. The contract's
// invariants 1-6 hold on what was read.
func TestRetriedDeliveryAuditTrailOverHTTP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, func(n int, _ *http.Request) (int, map[string]string, string) {
			if n == 1 {
				return http.StatusServiceUnavailable, nil, "busy"
			}
			return http.StatusOK, nil, "ok"
		})
		a := newAPI(t, e)
		e.createConfig(platform.ConfigInput{Settings: e.settings(map[string]any{"retry": map[string]any{"max_attempts": 3}})})
		e.start()
		e.deal("deal-1")
		trigger := e.emit("deal-1", "deal_won", nil)

		get := func(path, key string) map[string]any {
			t.Helper()
			r := a.do("GET", path, key, nil)
			if r.status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, r.status, r.raw)
			}
			return r.data()
		}
		// listFacts reads every page of a GET /v1/facts query.
		listFacts := func(query string) []map[string]any {
			t.Helper()
			var out []map[string]any
			cursor := ""
			for {
				d := get("/v1/facts?limit=1&"+query+cursor, a.live)
				for _, it := range d["items"].([]any) {
					out = append(out, it.(map[string]any))
				}
				if d["hasMore"] != true {
					return out
				}
				cursor = "&cursor=" + url.QueryEscape(d["cursor"].(string))
			}
		}

		// The webhook.triggered fact names the delivery.
		var triggered []map[string]any
		waitFor(t, "the webhook.triggered fact", func() bool {
			triggered = listFacts("type=webhook&subtype=triggered&source_id=" + trigger.ID)
			return len(triggered) == 1
		})
		trig := triggered[0]
		trigData := trig["data"].(map[string]any)
		deliveryID := trigData["delivery_id"].(string)

		// Attempt 1 fails and schedules attempt 2, which succeeds.
		var d map[string]any
		waitFor(t, "attempt 2 to be scheduled", func() bool {
			d = get("/v1/admin/webhooks/deliveries/"+deliveryID, a.admin)
			return d["attempt"] == float64(2) && d["next_retry_at"] != nil
		})
		e.clock.Set(time.UnixMilli(int64(d["next_retry_at"].(float64))))
		waitFor(t, "the delivery to be sent", func() bool {
			d = get("/v1/admin/webhooks/deliveries/"+deliveryID, a.admin)
			return d["status"] == "sent"
		})

		sent := listFacts("type=webhook&subtype=sent&source_id=" + trig["id"].(string))
		if len(sent) != 2 {
			t.Fatalf("%d webhook.sent facts, want 2: %v", len(sent), sent)
		}
		// The delivery names each attempt's fact, status and error code.
		attempts, ok := d["attempts"].([]any)
		if !ok {
			t.Fatalf("the delivery lists no attempts: %v", d)
		}
		if len(attempts) != len(sent) {
			t.Fatalf("the delivery lists %d attempts, the facts %d", len(attempts), len(sent))
		}
		wantAttempts := []struct {
			status int
			code   string
		}{{503, "SERVICE_UNAVAILABLE"}, {200, ""}}
		for i, raw := range attempts {
			at := raw.(map[string]any)
			code, _ := at["error_code"].(string)
			if at["fact_id"] != sent[i]["id"] || at["attempt"] != float64(i+1) || at["status_code"] != float64(wantAttempts[i].status) ||
				code != wantAttempts[i].code || at["success"] != (i == 1) {
				t.Errorf("attempt %d: %v, fact %v", i+1, at, sent[i])
			}
			if one := get("/v1/facts/"+at["fact_id"].(string), a.live); fmt.Sprint(one) != fmt.Sprint(sent[i]) {
				t.Errorf("GET /v1/facts/%s: %v, listed %v", at["fact_id"], one, sent[i])
			}
		}

		for i, f := range sent {
			data := f["data"].(map[string]any)
			// 1. Its source_id is a webhook.triggered fact.
			src := get("/v1/facts/"+f["source_id"].(string), a.live)
			if src["type"] != "webhook" || src["subtype"] != "triggered" {
				t.Errorf("invariant 1: attempt %d's source %v", i+1, src)
			}
			// 2. One delivery id across attempts.
			if data["delivery_id"] != deliveryID {
				t.Errorf("invariant 2: attempt %d delivery_id %v, want %s", i+1, data["delivery_id"], deliveryID)
			}
			// 3. One config id and version across attempts.
			if data["config_id"] != trigData["config_id"] || data["config_version"] != trigData["config_version"] ||
				data["config_id"] != d["webhook_config_id"] || data["config_version"] != d["webhook_config_version"] {
				t.Errorf("invariant 3: attempt %d config %v v%v, triggered %v v%v", i+1, data["config_id"], data["config_version"],
					trigData["config_id"], trigData["config_version"])
			}
			// Both audit facts carry config_id and config_version, as the
			// webhook document lists them, besides holding them in data.
			for _, af := range []map[string]any{f, trig} {
				afData := af["data"].(map[string]any)
				if af["config_id"] == nil || af["config_id"] != afData["config_id"] || af["config_version"] != afData["config_version"] {
					t.Errorf("audit fact %v does not carry its config_id and config_version", af)
				}
			}
			// 4. attempt runs from 1 up, never past max_attempts.
			if data["attempt"] != float64(i+1) || data["max_attempts"] != float64(3) {
				t.Errorf("invariant 4: record %d has attempt %v of %v", i+1, data["attempt"], data["max_attempts"])
			}
			// 5. sent_to_dlq only on attempt max_attempts.
			if dlq, _ := data["sent_to_dlq"].(bool); dlq && data["attempt"] != data["max_attempts"] {
				t.Errorf("invariant 5: sent_to_dlq on attempt %v of %v", data["attempt"], data["max_attempts"])
			}
			// 6. One signature timestamp for every retry: the delivery's.
			if data["timestamp_header"] != fmt.Sprint(int64(d["timestamp"].(float64))) || data["signature_algorithm"] != "sha256" {
				t.Errorf("invariant 6: attempt %d timestamp_header %v, delivery timestamp %v", i+1, data["timestamp_header"], d["timestamp"])
			}
		}
		// 6, as received: the same signature on both attempts.
		hits := e.rc.all()
		if len(hits) != 2 || hits[0].header.Get(HeaderSignature) != hits[1].header.Get(HeaderSignature) ||
			hits[1].header.Get(HeaderTimestamp) != sent[1]["data"].(map[string]any)["timestamp_header"] {
			t.Errorf("invariant 6 at the receiver: %d requests", len(hits))
		}
	})
}
