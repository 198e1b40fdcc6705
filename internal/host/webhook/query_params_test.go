package webhook

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestWebhookReadsRefuseUnknownAndRepeatedQuery: every webhook read
// refuses a query parameter it does not know (unknown_field) and one
// given twice (format): a misspelt filter (stauts=dead) listed dead and
// pending deliveries alike, and of limit=1&limit=2 only one could count.
func TestWebhookReadsRefuseUnknownAndRepeatedQuery(t *testing.T) {
	e := newEnv(t, "sqlite", nil)
	a := newAPI(t, e)
	ids := addDeliveries(t, e.st, tenantA, 5)
	for _, c := range []struct{ path, field, code string }{
		{"/v1/admin/webhooks/deliveries?stauts=dead", "stauts", "unknown_field"},
		{"/v1/admin/webhooks/deliveries?status=dead&status=pending", "status", "format"},
		{"/v1/webhooks/deliveries?limit=1&limit=2", "limit", "format"},
		{"/v1/webhooks/deliveries?x=1", "x", "unknown_field"},
		{"/v1/admin/webhooks/deliveries/" + ids[0] + "?x=1", "x", "unknown_field"},
		{"/v1/webhooks/deliveries/" + ids[0] + "?x=1", "x", "unknown_field"},
		{"/v1/admin/webhooks/dead-letters?configid=cfg_0", "configid", "unknown_field"},
		{"/v1/admin/webhooks/dead-letters?limit=1&limit=2", "limit", "format"},
		{"/v1/admin/webhooks/paused?x=1", "x", "unknown_field"},
		{"/v1/webhooks/deliveries/stats?bucket=3", "bucket", "unknown_field"},
		{"/v1/webhooks/deliveries/stats?buckets=3&buckets=4", "buckets", "format"},
		// An empty filter would list everything (?config_id=: a value lost
		// in a client's template), and 0 is no time, as on GET /v1/facts:
		// both were read as no filter, or refused as no "time in
		// milliseconds since the epoch", which 0 is.
		{"/v1/admin/webhooks/deliveries?config_id=", "config_id", "format"},
		{"/v1/webhooks/deliveries?cursor=", "cursor", "format"},
		{"/v1/admin/webhooks/dead-letters?config_id=", "config_id", "format"},
		{"/v1/admin/webhooks/deliveries?from=0", "from", "format"},
		{"/v1/webhooks/deliveries/stats?from=0&to=1", "from", "format"},
		{"/v1/webhooks/deliveries/stats?to=", "to", "format"},
	} {
		t.Run(c.path, func(t *testing.T) {
			key := a.admin
			if strings.HasPrefix(c.path, "/v1/webhooks/") {
				key = a.live
			}
			r := a.do("GET", c.path, key, nil)
			if r.status != 400 || !strings.Contains(string(r.raw), "validation-failed") {
				t.Fatalf("%d %s, want a validation problem", r.status, r.raw)
			}
			var p struct {
				Errors []struct{ Field, Code string }
			}
			if err := json.Unmarshal(r.raw, &p); err != nil || len(p.Errors) != 1 || p.Errors[0].Field != c.field || p.Errors[0].Code != c.code {
				t.Fatalf("errors %s, want %s %s", r.raw, c.field, c.code)
			}
			if c.path == "/v1/admin/webhooks/deliveries?from=0" && !strings.Contains(string(r.raw), "from must be a positive number of milliseconds since the epoch") {
				t.Errorf("from=0 is refused with %s", r.raw)
			}
		})
	}
	// What each knows, once, answers.
	for _, path := range []string{
		"/v1/admin/webhooks/deliveries?status=dead&config_id=cfg_0&limit=2",
		"/v1/webhooks/deliveries?limit=1",
		"/v1/admin/webhooks/deliveries/" + ids[0],
		"/v1/admin/webhooks/dead-letters?config_id=cfg_9&limit=1",
		"/v1/admin/webhooks/paused",
		"/v1/webhooks/deliveries/stats?buckets=3",
	} {
		key := a.admin
		if strings.HasPrefix(path, "/v1/webhooks/") {
			key = a.live
		}
		if r := a.do("GET", path, key, nil); r.status != 200 {
			t.Errorf("%s: %d %s", path, r.status, r.raw)
		}
	}
}
