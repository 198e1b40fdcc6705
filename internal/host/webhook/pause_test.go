package webhook

import (
	"net/http"
	"testing"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
)

// An admin pauses a config over HTTP: a matching fact's delivery waits,
// pending, and reaches the HTTPS receiver once the config is resumed.
func TestPauseAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, nil)
		a := newAPI(t, e)
		cfg := e.createConfig(platform.ConfigInput{Name: "won", Settings: e.settings(nil)})
		other := e.createConfig(platform.ConfigInput{Type: "pricing", Name: "not a webhook", Settings: map[string]any{"x": 1}})
		e.start()
		path := "/v1/admin/webhooks/configs/" + cfg.ID + "/pause"

		if r := a.do("POST", path, a.live, nil); r.status != http.StatusForbidden {
			t.Fatalf("pause with a live key: %d %s", r.status, r.raw)
		}
		if r := a.do("GET", "/v1/admin/webhooks/paused", a.live, nil); r.status != http.StatusForbidden {
			t.Fatalf("paused list with a live key: %d %s", r.status, r.raw)
		}
		for _, id := range []string{"cfg_nope", other.ID} {
			if r := a.do("POST", "/v1/admin/webhooks/configs/"+id+"/pause", a.admin, nil); r.status != http.StatusNotFound {
				t.Errorf("pause %s: %d %s", id, r.status, r.raw)
			}
		}
		r := a.do("POST", path, a.admin, nil)
		if r.status != http.StatusOK || r.data()["config_id"] != cfg.ID || r.data()["paused"] != true {
			t.Fatalf("pause: %d %s", r.status, r.raw)
		}
		if r := a.do("POST", path, a.admin, nil); r.status != http.StatusConflict {
			t.Errorf("pause twice: %d %s", r.status, r.raw)
		}
		r = a.do("GET", "/v1/admin/webhooks/paused", a.admin, nil)
		items, _ := r.data()["items"].([]any)
		if r.status != http.StatusOK || len(items) != 1 {
			t.Fatalf("paused list: %d %s", r.status, r.raw)
		}
		if it, _ := items[0].(map[string]any); it["config_id"] != cfg.ID || it["paused"] != true || it["reason"] != PauseReasonManual {
			t.Errorf("paused item %v", it)
		}

		e.deal("deal-1")
		e.emit("deal-1", "deal_won", nil)
		id := e.waitDeliveries(1)[0].DeliveryID
		e.claimPass()
		if e.rc.count() != 0 || e.delivery(id).Status != store.OutboxPending {
			t.Fatalf("a paused config delivered: %d requests, status %s", e.rc.count(), e.delivery(id).Status)
		}
		if r := a.do("GET", "/v1/admin/webhooks/deliveries/"+id, a.admin, nil); r.data()["paused"] != true || r.data()["status"] != "pending" {
			t.Errorf("delivery while paused: %s", r.raw)
		}

		r = a.do("POST", "/v1/admin/webhooks/configs/"+cfg.ID+"/resume", a.admin, nil)
		if r.status != http.StatusOK || r.data()["paused"] != false {
			t.Fatalf("resume: %d %s", r.status, r.raw)
		}
		e.waitRow(id, "sent after resume", func(r *store.OutboxRow) bool { return r.Status == store.OutboxSent })
		if hits := e.waitHits(1); len(hits) != 1 {
			t.Errorf("receiver got %d requests, want 1", len(hits))
		}
		r = a.do("GET", "/v1/admin/webhooks/paused", a.admin, nil)
		if items, _ := r.data()["items"].([]any); r.status != http.StatusOK || len(items) != 0 {
			t.Errorf("paused list after resume: %d %s", r.status, r.raw)
		}
		if r := a.do("POST", "/v1/admin/webhooks/configs/"+cfg.ID+"/resume", a.admin, nil); r.status != http.StatusConflict {
			t.Errorf("resume twice: %d %s", r.status, r.raw)
		}
	})
}
