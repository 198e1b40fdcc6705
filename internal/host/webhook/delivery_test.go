package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil/wait"
	"github.com/factline/factline/sdk/webhookverify"
)

func forEachBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, b := range teststore.Backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// Acceptance: a matched fact is delivered once over real HTTPS with every
// header, and the signature verifies with sdk/webhookverify and with an
// independent check written with crypto/hmac alone.
func TestDeliveredOnceSignedWithEveryHeader(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, nil)
		cfg := e.createConfig(platform.ConfigInput{Name: "won deals", Settings: e.settings(map[string]any{
			"headers": map[string]any{"X-Team": "sales"},
		})})
		e.start()
		e.deal("deal-1")
		f := e.emit("deal-1", "deal_won", map[string]any{"amount": json.Number("0.10"), "campaign_id": "camp-1"})

		rows := e.waitDeliveries(1)
		row := e.waitRow(rows[0].DeliveryID, "the delivery to be sent", func(r *store.OutboxRow) bool { return r.Status == store.OutboxSent })
		e.claimPass()
		hits := e.rc.all()
		if len(hits) != 1 {
			t.Fatalf("receiver got %d requests, want 1", len(hits))
		}
		h := hits[0]

		// The delivery id's shape and the triggered fact.
		ts := row.SigTimestamp
		if ts != clockStart.Unix() {
			t.Errorf("signature timestamp %d, want the creation time %d", ts, clockStart.Unix())
		}
		wantID := "del_" + row.TriggeredFactID + "_" + cfg.ID + "_" + strconv.FormatInt(ts, 10)
		if row.DeliveryID != wantID || !strings.HasPrefix(row.TriggeredFactID, "fct_") || len(row.TriggeredFactID) != 30 {
			t.Errorf("delivery id %s, want %s (fct_<ULID> triggered id)", row.DeliveryID, wantID)
		}

		// Every header of the contract.
		want := map[string]string{
			"Content-Type":         "application/json",
			"User-Agent":           "svc-webhooks/1.0",
			"X-Svc-Timestamp":      strconv.FormatInt(ts, 10),
			"X-Svc-Delivery-Id":    row.DeliveryID,
			"X-Svc-Config-Version": "1",
			"X-Svc-Attempt":        "1",
			"X-Team":               "sales",
		}
		for k, v := range want {
			if got := h.header.Get(k); got != v {
				t.Errorf("header %s = %q, want %q", k, got, v)
			}
		}
		if h.header.Get("webhook-signature") != "" {
			t.Error("Standard Webhooks headers sent without standard_webhooks")
		}

		// The signature, with the SDK...
		if _, err := webhookverify.Verify(h.header, h.body, e.clock.Now(), 0, []byte(e.secret)); err != nil {
			t.Errorf("webhookverify: %v", err)
		}
		// ...and independently: sha256= + hex HMAC-SHA256(secret, "<ts>.<body>").
		m := hmac.New(sha256.New, []byte(e.secret))
		m.Write([]byte(h.header.Get("X-Svc-Timestamp") + "." + string(h.body)))
		if got, want := h.header.Get("X-Svc-Signature"), "sha256="+hex.EncodeToString(m.Sum(nil)); !hmac.Equal([]byte(got), []byte(want)) {
			t.Errorf("X-Svc-Signature %s, independent HMAC %s", got, want)
		}
		if !bytes.Equal(h.body, row.Payload) {
			t.Errorf("sent body differs from the stored payload")
		}

		// The body.
		if !strings.Contains(string(h.body), `"amount":0.10`) {
			t.Errorf("amount not sent exactly as written: %s", h.body)
		}
		var b map[string]any
		if err := json.Unmarshal(h.body, &b); err != nil {
			t.Fatal(err)
		}
		fact, _ := b["fact"].(map[string]any)
		if b["delivery_id"] != row.DeliveryID || b["timestamp"] != "2026-11-21T12:00:00.000Z" || b["trigger"] != "outcome.deal_won" ||
			b["config_version"] != float64(1) || fact["id"] != f.ID || fact["type"] != "outcome" || fact["subtype"] != "deal_won" ||
			fact["timestamp"] != float64(f.Timestamp) || fact["data"] == nil || len(fact) != 5 {
			t.Errorf("body %s", h.body)
		}

		// Audit facts.
		facts := auditFacts(t, e.st, tenantA)
		if len(facts) != 2 || facts[0].Subtype != "triggered" || facts[1].Subtype != "sent" {
			t.Fatalf("audit facts %+v", facts)
		}
		tf := facts[0]
		if tf.ID != row.TriggeredFactID || tf.SourceID != f.ID || tf.Type != "webhook" || tf.EntityID != "" {
			t.Errorf("triggered fact %+v", tf)
		}
		var td map[string]any
		_ = json.Unmarshal(tf.Data, &td)
		if td["url"] != e.rc.url("/hook") || td["trigger"] != "outcome.deal_won" || td["delivery_id"] != row.DeliveryID ||
			td["queued_at"] != float64(clockStart.UnixMilli()) || td["config_id"] != cfg.ID || td["config_version"] != float64(1) ||
			td["campaign_id"] != "camp-1" {
			t.Errorf("triggered data %s", tf.Data)
		}
		sent := checkInvariants(t, e.st, tenantA, hitsByDelivery(hits))
		rec := sent[row.DeliveryID]
		if len(rec) != 1 {
			t.Fatalf("%d webhook.sent facts", len(rec))
		}
		if ok, _ := rec[0].flag("success"); !ok || rec[0].num("status_code") != 200 || rec[0].str("response_body") != "ok" ||
			rec[0].str("timestamp_header") != strconv.FormatInt(ts, 10) || rec[0].num("attempt") != 1 || rec[0].num("max_attempts") != 5 {
			t.Errorf("sent record %v", rec[0].data)
		}

		// The counters move just after the outcome commits, so a test that
		// has seen the stored outcome waits for them.
		mt := e.svc.metrics
		wait.Eventually(t, 30*time.Second, "the delivery's counters", func() bool {
			return testutil.ToFloat64(mt.sent) == 1 && testutil.ToFloat64(mt.succeeded) == 1
		})
		if testutil.ToFloat64(mt.triggered) != 1 || testutil.ToFloat64(mt.sent) != 1 || testutil.ToFloat64(mt.succeeded) != 1 ||
			testutil.ToFloat64(mt.failed) != 0 {
			t.Errorf("metrics: triggered %v sent %v succeeded %v failed %v", testutil.ToFloat64(mt.triggered), testutil.ToFloat64(mt.sent),
				testutil.ToFloat64(mt.succeeded), testutil.ToFloat64(mt.failed))
		}
	})
}

// advanceTo moves the clock to t and waits for the dispatcher to look.
func (e *env) advanceTo(t time.Time) {
	e.t.Helper()
	e.clock.Set(t)
	e.claimPass()
}

// Acceptance: 503, 503, then 200: three attempts, one delivery id, the
// same signature and timestamp on all three, delays following the
// schedule on a controllable clock, and webhook.sent facts that keep the
// contract's invariants.
func TestRetriesFollowTheSchedule(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, func(n int, _ *http.Request) (int, map[string]string, string) {
			if n <= 2 {
				return http.StatusServiceUnavailable, nil, "busy"
			}
			return http.StatusOK, nil, "ok"
		})
		e.createConfig(platform.ConfigInput{Settings: e.settings(map[string]any{
			"retry": map[string]any{"backoff_base_seconds": 60, "backoff_multiplier": 2, "max_attempts": 5},
		})})
		e.start()
		e.deal("deal-1")
		e.emit("deal-1", "deal_won", nil)

		id := e.waitDeliveries(1)[0].DeliveryID
		// Jitter is pinned at 0.5, so each delay is 1.25 x min(base*2^(n-1), max).
		schedule := []time.Duration{75 * time.Second, 150 * time.Second}
		attemptAt := clockStart
		for n, delay := range schedule {
			row := e.waitRow(id, "attempt "+strconv.Itoa(n+2)+" to be scheduled", func(r *store.OutboxRow) bool { return r.Attempt == n+2 })
			due := attemptAt.Add(delay)
			if row.NextAttemptAt != due.UnixMilli() || row.Status != store.OutboxPending {
				t.Fatalf("after attempt %d: next attempt at %v (%s), want %v", n+1, time.UnixMilli(row.NextAttemptAt).UTC(), row.Status, due)
			}
			e.advanceTo(due.Add(-time.Millisecond))
			if got := e.rc.count(); got != n+1 {
				t.Fatalf("a millisecond before the retry the receiver has %d requests, want %d", got, n+1)
			}
			e.clock.Set(due)
			hits := e.waitHits(n + 2)
			if !hits[n+1].at.Equal(due) {
				t.Fatalf("attempt %d arrived at %v, want %v", n+2, hits[n+1].at, due)
			}
			attemptAt = due
		}
		e.waitRow(id, "sent", func(r *store.OutboxRow) bool { return r.Status == store.OutboxSent })
		hits := e.rc.all()
		if len(hits) != 3 {
			t.Fatalf("%d requests, want 3", len(hits))
		}
		for i, h := range hits {
			if h.header.Get(HeaderDeliveryID) != id || h.header.Get(HeaderAttempt) != strconv.Itoa(i+1) ||
				h.header.Get(HeaderSignature) != hits[0].header.Get(HeaderSignature) ||
				h.header.Get(HeaderTimestamp) != hits[0].header.Get(HeaderTimestamp) || !bytes.Equal(h.body, hits[0].body) {
				t.Errorf("attempt %d: id %s attempt %s sig %s ts %s", i+1, h.header.Get(HeaderDeliveryID), h.header.Get(HeaderAttempt),
					h.header.Get(HeaderSignature), h.header.Get(HeaderTimestamp))
			}
		}
		recs := checkInvariants(t, e.st, tenantA, hitsByDelivery(hits))[id]
		if len(recs) != 3 {
			t.Fatalf("%d webhook.sent facts, want 3", len(recs))
		}
		for i, r := range recs[:2] {
			retry, _ := r.flag("will_retry")
			if ok, _ := r.flag("success"); ok || r.num("status_code") != 503 || r.str("error_type") != "transient" ||
				r.str("error_code") != "SERVICE_UNAVAILABLE" || !retry || r.num("backoff_seconds") != schedule[i].Seconds() ||
				r.has("sent_to_dlq") {
				t.Errorf("attempt %d record %v", i+1, r.data)
			}
		}
		if ok, _ := recs[2].flag("success"); !ok {
			t.Errorf("attempt 3 record %v", recs[2].data)
		}
		wait.Eventually(t, 30*time.Second, "webhooks_failed_total 2", func() bool { return testutil.ToFloat64(e.svc.metrics.failed) == 2 })
		if got := testutil.ToFloat64(e.svc.metrics.failed); got != 2 {
			t.Errorf("webhooks_failed_total %v, want 2", got)
		}
	})
}

// Acceptance: a 400 is terminal at attempt 1 and dead-lettered.
func TestClientErrorIsTerminal(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, func(int, *http.Request) (int, map[string]string, string) {
			return http.StatusBadRequest, map[string]string{"X-Reason": "schema"}, `{"error":"bad"}`
		})
		cfg := e.createConfig(platform.ConfigInput{Settings: e.settings(nil)})
		e.start()
		e.deal("deal-1")
		e.emit("deal-1", "deal_won", map[string]any{"contact_id": "c-9"})
		id := e.waitDeliveries(1)[0].DeliveryID
		row := e.waitRow(id, "dead", func(r *store.OutboxRow) bool { return r.Status == store.OutboxDead })
		if row.Attempt != 1 || e.rc.count() != 1 {
			t.Fatalf("dead at attempt %d after %d requests", row.Attempt, e.rc.count())
		}
		recs := checkInvariants(t, e.st, tenantA, nil)[id]
		if len(recs) != 1 {
			t.Fatalf("%d records", len(recs))
		}
		r := recs[0]
		retry, _ := r.flag("will_retry")
		dlq, hasDLQ := r.flag("sent_to_dlq")
		if r.str("error_type") != "terminal" || r.str("error_code") != "BAD_REQUEST" || retry || !hasDLQ || dlq ||
			r.str("dlq_message_id") != row.DLQMessageID || r.num("status_code") != 400 {
			t.Errorf("record %v", r.data)
		}
		page, err := e.svc.DeadLetters(t.Context(), tenantA, "", "", 0)
		if err != nil || len(page.Items) != 1 {
			t.Fatalf("dead letters %+v, %v", page, err)
		}
		dl := page.Items[0]
		if dl.DLQMessageID != row.DLQMessageID || dl.DeliveryID != id || dl.TriggeredFactID != row.TriggeredFactID ||
			dl.WebhookConfigID != cfg.ID || dl.WebhookConfigVersion != 1 || dl.URL != e.rc.url("/hook") ||
			!sameJSON(dl.Payload, row.Payload) || dl.Error.Code != "BAD_REQUEST" || dl.Error.LastStatusCode != 400 ||
			dl.Attempts != 1 || dl.FirstAttemptAt != clockStart.UnixMilli() || dl.LastAttemptAt != clockStart.UnixMilli() ||
			dl.SentToDLQAt != clockStart.UnixMilli() || dl.Metadata.TenantID != tenantA || dl.Metadata.ContactID != "c-9" ||
			dl.Metadata.DealID != "deal-1" {
			t.Errorf("dead letter %+v", dl)
		}
		wait.Eventually(t, 30*time.Second, "webhooks_dlq_total 1", func() bool { return testutil.ToFloat64(e.svc.metrics.dlq) == 1 })
		if got := testutil.ToFloat64(e.svc.metrics.dlq); got != 1 {
			t.Errorf("webhooks_dlq_total %v", got)
		}
	})
}

// Acceptance: a timeout is retried.
func TestTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	e := newEnv(t, "sqlite", func(n int, r *http.Request) (int, map[string]string, string) {
		if n == 1 {
			// Hold the first request past the 5 s timeout, until the test
			// ends. Not on r.Context(): the server may cancel it before
			// the client gives up, and the attempt would then succeed.
			<-release
		}
		return http.StatusOK, nil, "ok"
	})
	defer close(release)
	e.createConfig(platform.ConfigInput{Settings: e.settings(map[string]any{"retry": map[string]any{"timeout_seconds": 5}})})
	e.start()
	e.deal("deal-1")
	e.emit("deal-1", "deal_won", nil)
	id := e.waitDeliveries(1)[0].DeliveryID
	row := e.waitRow(id, "attempt 2 scheduled", func(r *store.OutboxRow) bool { return r.Attempt == 2 })
	r := checkInvariants(t, e.st, tenantA, nil)[id][0]
	if r.str("error_code") != "TIMEOUT" || r.str("error_type") != "transient" || r.num("status_code") != 0 {
		t.Errorf("timeout record %v", r.data)
	}
	e.clock.Set(time.UnixMilli(row.NextAttemptAt))
	e.waitRow(id, "sent", func(r *store.OutboxRow) bool { return r.Status == store.OutboxSent })
}

// Acceptance: exhausted attempts go to dead with MAX_RETRIES_EXCEEDED,
// sent_to_dlq only on the last attempt; a replay delivers and records the
// replay fact.
func TestMaxAttemptsThenReplay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, func(int, *http.Request) (int, map[string]string, string) {
			return http.StatusInternalServerError, nil, "boom"
		})
		e.createConfig(platform.ConfigInput{Settings: e.settings(map[string]any{
			"retry": map[string]any{"max_attempts": 3, "backoff_base_seconds": 10},
		})})
		e.start()
		e.deal("deal-1")
		e.emit("deal-1", "deal_won", nil)
		id := e.waitDeliveries(1)[0].DeliveryID
		for n := 2; n <= 3; n++ {
			row := e.waitRow(id, "attempt "+strconv.Itoa(n), func(r *store.OutboxRow) bool { return r.Attempt == n })
			e.clock.Set(time.UnixMilli(row.NextAttemptAt))
		}
		row := e.waitRow(id, "dead", func(r *store.OutboxRow) bool { return r.Status == store.OutboxDead })
		recs := checkInvariants(t, e.st, tenantA, hitsByDelivery(e.rc.all()))[id]
		if len(recs) != 3 || e.rc.count() != 3 {
			t.Fatalf("%d records, %d requests; want 3", len(recs), e.rc.count())
		}
		for i, r := range recs {
			dlq, has := r.flag("sent_to_dlq")
			if i < 2 && has {
				t.Errorf("attempt %d has sent_to_dlq", i+1)
			}
			if i == 2 && (!dlq || r.str("error_code") != "MAX_RETRIES_EXCEEDED" || r.str("dlq_message_id") != row.DLQMessageID ||
				r.num("total_duration_ms") != float64(row.DeadAt-row.FirstAttemptAt) || r.num("first_attempt_at") != float64(clockStart.UnixMilli())) {
				t.Errorf("last attempt record %v", r.data)
			}
		}
		var dl DeadLetter
		_ = json.Unmarshal(row.DeadLetter, &dl)
		if dl.Error.Code != "MAX_RETRIES_EXCEEDED" || dl.Attempts != 3 || dl.Error.LastStatusCode != 500 {
			t.Errorf("dead letter %+v", dl)
		}

		// Replay, a minute later, to a receiver that now answers 200.
		e.rc.setRespond(nil)
		e.clock.Advance(time.Minute)
		v, err := e.svc.Replay(t.Context(), tenantA, id)
		if err != nil {
			t.Fatal(err)
		}
		if v.Attempt != 1 || v.Timestamp != e.clock.Now().Unix() || v.DLQMessageID != row.DLQMessageID || v.Status != "pending" {
			t.Errorf("replay %+v", v)
		}
		if _, err := e.svc.Replay(t.Context(), tenantA, id); err == nil || !strings.Contains(err.Error(), "only dead deliveries") {
			t.Errorf("second replay: %v", err)
		}
		e.waitRow(id, "sent after replay", func(r *store.OutboxRow) bool { return r.Status == store.OutboxSent })
		hits := e.rc.all()
		last := hits[len(hits)-1]
		if last.header.Get(HeaderAttempt) != "1" || last.header.Get(HeaderTimestamp) != strconv.FormatInt(v.Timestamp, 10) ||
			last.header.Get(HeaderTimestamp) == hits[0].header.Get(HeaderTimestamp) || last.header.Get(HeaderDeliveryID) != id {
			t.Errorf("replayed request: attempt %s ts %s (first %s)", last.header.Get(HeaderAttempt), last.header.Get(HeaderTimestamp),
				hits[0].header.Get(HeaderTimestamp))
		}
		if _, err := webhookverify.Verify(last.header, last.body, e.clock.Now(), 0, []byte(e.secret)); err != nil {
			t.Errorf("replayed signature: %v", err)
		}
		facts := auditFacts(t, e.st, tenantA)
		var replayFact *store.Fact
		for i := range facts {
			if facts[i].Type == "lifecycle" {
				replayFact = &facts[i]
			}
		}
		if replayFact == nil || replayFact.ID != v.ReplayFactID || replayFact.Subtype != "webhook_replayed" {
			t.Fatalf("replay fact %+v", replayFact)
		}
		var rd map[string]any
		_ = json.Unmarshal(replayFact.Data, &rd)
		if len(rd) != 3 || rd["delivery_id"] != id || rd["dlq_message_id"] != row.DLQMessageID || rd["reason"] != "manual_replay" {
			t.Errorf("replay data %s", replayFact.Data)
		}
		recs = checkInvariants(t, e.st, tenantA, hitsByDelivery(hits))[id]
		if len(recs) != 4 || recs[3].num("attempt") != 1 {
			t.Errorf("records after replay: %d", len(recs))
		}
	})
}

// sameJSON compares JSON values, key order aside (Postgres stores the dead
// letter as jsonb).
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
