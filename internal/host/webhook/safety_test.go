package webhook

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
)

func TestAddressPolicy(t *testing.T) {
	t.Parallel()
	var p addressPolicy
	blocked := []string{"127.0.0.1", "127.1.2.3", "::1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254",
		"fe80::1", "fd00:ec2::254", "fc00::1", "100.100.100.200", "100.64.0.1", "0.0.0.0", "::", "224.0.0.1", "255.255.255.255",
		"::ffff:127.0.0.1", "::ffff:10.1.1.1", "64:ff9b::a00:1", "2002:7f00:1::", "198.18.0.1", "192.0.0.8"}
	for _, s := range blocked {
		var be *BlockedAddressError
		if err := p.check(netip.MustParseAddr(s)); !errors.As(err, &be) {
			t.Errorf("%s: got %v, want blocked", s, err)
		}
		if err := p.control("tcp", hostPort(s, 443), nil); err == nil {
			t.Errorf("control %s: allowed", s)
		}
	}
	for _, s := range []string{"93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "8.8.8.8"} {
		if err := p.check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: %v, want allowed", s, err)
		}
	}
	allow, err := ParseAllowList("127.0.0.1, 10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	p = addressPolicy{allow: allow}
	for _, s := range []string{"127.0.0.1", "10.9.8.7", "::ffff:10.9.8.7"} {
		if err := p.check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("allow-listed %s: %v", s, err)
		}
	}
	if err := p.check(netip.MustParseAddr("127.0.0.2")); err == nil {
		t.Error("127.0.0.2 is not in the allow-list")
	}
	if _, err := ParseAllowList("10.0.0.0/33"); err == nil {
		t.Error("bad prefix accepted")
	}
}

// hostPort joins an address and a port, bracketing IPv6.
func hostPort(a string, port int) string {
	if strings.Contains(a, ":") {
		return "[" + a + "]:" + strconv.Itoa(port)
	}
	return a + ":" + strconv.Itoa(port)
}

// SSRF: without the allow-list the receiver's loopback address is refused
// at connect time, terminally, and nothing reaches it. Creation refuses a
// literal address the policy blocks (TestConfigValidation); this config
// is made while loopback is allowed, and the client then delivers without
// the allow-list, as for a host name that resolves to loopback.
func TestLoopbackRefusedWithoutAllowList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite", nil)
	e.createConfig(platform.ConfigInput{Settings: e.settings(nil)})
	e.svc.client = newHTTPClient(addressPolicy{}, e.rc.tlsConfig(), e.svc.opts.EndpointConcurrency)
	e.start()
	e.deal("deal-1")
	e.emit("deal-1", "deal_won", nil)
	id := e.waitDeliveries(1)[0].DeliveryID
	e.waitRow(id, "dead", func(r *store.OutboxRow) bool { return r.Status == store.OutboxDead })
	if e.rc.count() != 0 {
		t.Fatalf("the receiver got %d requests", e.rc.count())
	}
	r := checkInvariants(t, e.st, tenantA, nil)[id][0]
	if r.str("error_code") != CodeDestinationBlocked || r.str("error_type") != ErrorTerminal ||
		!strings.Contains(r.str("error_message"), "127.0.0.1") {
		t.Errorf("record %v", r.data)
	}
}

// Redirects are not followed: a 3xx is terminal and the Location is never
// requested.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var e *env //nolint:staticcheck // S1021: the handler below refers to e
	e = newEnv(t, "sqlite", func(n int, r *http.Request) (int, map[string]string, string) {
		if r.URL.Path == "/hook" {
			return http.StatusFound, map[string]string{"Location": "/elsewhere"}, ""
		}
		return http.StatusOK, nil, "ok"
	})
	e.createConfig(platform.ConfigInput{Settings: e.settings(nil)})
	e.start()
	e.deal("deal-1")
	e.emit("deal-1", "deal_won", nil)
	id := e.waitDeliveries(1)[0].DeliveryID
	e.waitRow(id, "dead", func(r *store.OutboxRow) bool { return r.Status == store.OutboxDead })
	if hits := e.rc.all(); len(hits) != 1 {
		t.Fatalf("%d requests, want 1 (no redirect followed)", len(hits))
	}
	r := checkInvariants(t, e.st, tenantA, nil)[id][0]
	if r.str("error_code") != CodeRedirectNotFollowed || r.num("status_code") != 302 {
		t.Errorf("record %v", r.data)
	}
}

// A Retry-After on a 429 or 503 longer than the backoff is honoured, up to
// backoff_max_seconds; a shorter one changes nothing.
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	answers := []struct {
		status int
		after  string
	}{{503, "600"}, {429, "100000"}, {503, "1"}}
	e := newEnv(t, "sqlite", func(n int, _ *http.Request) (int, map[string]string, string) {
		if n <= len(answers) {
			a := answers[n-1]
			return a.status, map[string]string{"Retry-After": a.after}, ""
		}
		return http.StatusOK, nil, "ok"
	})
	e.createConfig(platform.ConfigInput{Settings: e.settings(map[string]any{
		"retry": map[string]any{"backoff_base_seconds": 60, "backoff_max_seconds": 1000},
	})})
	e.start()
	e.deal("deal-1")
	e.emit("deal-1", "deal_won", nil)
	id := e.waitDeliveries(1)[0].DeliveryID
	// Backoff with jitter 0.5: 75 s, 150 s, 300 s.
	want := []time.Duration{600 * time.Second, 1000 * time.Second, 150 * 2 * time.Second}
	at := clockStart
	for i, d := range want {
		row := e.waitRow(id, "attempt "+strconv.Itoa(i+2), func(r *store.OutboxRow) bool { return r.Attempt == i+2 })
		if got := time.UnixMilli(row.NextAttemptAt).Sub(at); got != d {
			t.Errorf("after answer %d (%d, Retry-After %s): delay %v, want %v", i+1, answers[i].status, answers[i].after, got, d)
		}
		at = time.UnixMilli(row.NextAttemptAt)
		e.clock.Set(at)
	}
	e.waitRow(id, "sent", func(r *store.OutboxRow) bool { return r.Status == store.OutboxSent })
}

// A 410 is terminal and pauses the config: later deliveries wait, pending,
// until an operator resumes it.
func TestGonePausesUntilResumed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, func(n int, _ *http.Request) (int, map[string]string, string) {
			if n == 1 {
				return http.StatusGone, nil, "gone"
			}
			return http.StatusOK, nil, "ok"
		})
		cfg := e.createConfig(platform.ConfigInput{Settings: e.settings(nil)})
		e.start()
		e.deal("deal-1")
		e.emit("deal-1", "deal_won", nil)
		first := e.waitDeliveries(1)[0].DeliveryID
		e.waitRow(first, "dead", func(r *store.OutboxRow) bool { return r.Status == store.OutboxDead })
		r := checkInvariants(t, e.st, tenantA, nil)[first][0]
		if r.str("error_code") != CodeGone || r.str("error_type") != ErrorTerminal {
			t.Errorf("record %v", r.data)
		}
		p, err := e.st.GetWebhookPause(t.Context(), tenantA, cfg.ID)
		if err != nil || p.DeliveryID != first {
			t.Fatalf("pause %+v, %v", p, err)
		}
		e.emit("deal-1", "deal_won", nil)
		rows := e.waitDeliveries(2)
		second := rows[0].DeliveryID
		if second == first {
			second = rows[1].DeliveryID
		}
		e.clock.Advance(time.Hour)
		e.claimPass()
		if e.rc.count() != 1 || e.delivery(second).Status != store.OutboxPending {
			t.Fatalf("a paused config delivered: %d requests", e.rc.count())
		}
		v, err := e.svc.Delivery(t.Context(), tenantA, second)
		if err != nil || !v.Paused {
			t.Fatalf("delivery view %+v, %v", v, err)
		}
		if err := e.svc.Resume(t.Context(), tenantA, cfg.ID); err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Resume(t.Context(), tenantA, cfg.ID); err == nil {
			t.Error("resuming a config that is not paused: nil error")
		}
		e.waitRow(second, "sent after resume", func(r *store.OutboxRow) bool { return r.Status == store.OutboxSent })
	})
}

// Response bodies are read up to a cap and recorded shorter still.
func TestResponseBodyCapped(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1<<20)
	e := newEnv(t, "sqlite", func(int, *http.Request) (int, map[string]string, string) {
		return http.StatusOK, map[string]string{"X-Long": strings.Repeat("h", 2000)}, big
	})
	e.createConfig(platform.ConfigInput{Settings: e.settings(nil)})
	e.start()
	e.deal("deal-1")
	e.emit("deal-1", "deal_won", nil)
	id := e.waitDeliveries(1)[0].DeliveryID
	e.waitRow(id, "sent", func(r *store.OutboxRow) bool { return r.Status == store.OutboxSent })
	r := checkInvariants(t, e.st, tenantA, nil)[id][0]
	if n := len(r.str("response_body")); n != maxRecordedBody {
		t.Errorf("recorded body %d bytes, want %d", n, maxRecordedBody)
	}
	h, _ := r.data["response_headers"].(map[string]any)
	if v, _ := h["X-Long"].(string); len(v) != maxHeaderValue {
		t.Errorf("recorded header %d bytes", len(v))
	}
}

// One slow endpoint cannot take every worker: deliveries to another
// endpoint go out while it hangs, and it never has more than
// EndpointConcurrency attempts at once.
func TestEndpointConcurrencyLimit(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	active, peak := 0, 0
	e := newEnv(t, "sqlite", func(_ int, r *http.Request) (int, map[string]string, string) {
		mu.Lock()
		active++
		peak = max(peak, active)
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		mu.Lock()
		active--
		mu.Unlock()
		return http.StatusOK, nil, "ok"
	}, func(o *Options) { o.Workers = 4; o.EndpointConcurrency = 2 })
	fast := newReceiver(t, e.clock, nil)
	// The second receiver's certificate must be trusted too.
	e.svc.client = newHTTPClient(addressPolicy{allow: e.svc.opts.AllowNetworks}, mergeRoots(e.rc, fast), 2)
	e.createConfig(platform.ConfigInput{Settings: e.settings(map[string]any{"triggers": []any{"outcome.deal_won"}})})
	e.createConfig(platform.ConfigInput{Settings: e.settings(map[string]any{"url": fast.url("/fast"), "triggers": []any{"outcome.deal_lost"}})})
	e.start()
	e.deal("deal-1")
	for range 6 {
		e.emit("deal-1", "deal_won", nil)
	}
	waitFor(t, "the slow endpoint to hold 2 attempts", func() bool { mu.Lock(); defer mu.Unlock(); return active == 2 })
	for range 5 {
		e.emit("deal-1", "deal_lost", nil)
	}
	waitFor(t, "the fast endpoint's deliveries", func() bool { return fast.count() == 5 })
	mu.Lock()
	p := peak
	mu.Unlock()
	close(release)
	e.waitDeliveries(11)
	waitFor(t, "every slow delivery", func() bool { return e.rc.count() == 6 })
	if p > 2 {
		t.Errorf("the slow endpoint had %d attempts at once, limit 2", p)
	}
}

func mergeRoots(rcs ...*receiver) *tls.Config {
	cfg := rcs[0].tlsConfig()
	for _, rc := range rcs[1:] {
		cfg.RootCAs.AddCert(rc.srv.Certificate())
	}
	return cfg
}

// The Standard Webhooks signature reproduces the specification's published
// test vector.
func TestStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	got := SignStandard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("SignStandard = %s, want %s", got, want)
	}
}

// With standard_webhooks, deliveries also carry webhook-id,
// webhook-timestamp and webhook-signature, keyed by the secret's base64
// part.
func TestStandardWebhooksHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite", nil)
	e.createConfig(platform.ConfigInput{Settings: e.settings(map[string]any{"standard_webhooks": true})})
	e.start()
	e.deal("deal-1")
	e.emit("deal-1", "deal_won", nil)
	h := e.waitHits(1)[0]
	id, ts := h.header.Get("webhook-id"), h.header.Get("webhook-timestamp")
	if id != h.header.Get(HeaderDeliveryID) || ts != h.header.Get(HeaderTimestamp) {
		t.Errorf("webhook-id %s, webhook-timestamp %s", id, ts)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(e.secret, "whsec_"))
	if err != nil || len(key) != 32 {
		t.Fatalf("secret %q is not whsec_<base64 of 32 bytes>", e.secret)
	}
	n, _ := strconv.ParseInt(ts, 10, 64)
	if got := h.header.Get("webhook-signature"); got != SignStandard(e.secret, id, n, h.body) {
		t.Errorf("webhook-signature %s", got)
	}
}

// An attempt whose worker died is recorded, as interrupted, by the claim
// that takes the delivery after its lease, and the delivery goes on.
func TestInterruptedAttemptRecorded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, nil)
		e.createConfig(platform.ConfigInput{Settings: e.settings(nil)})
		e.deal("deal-1")
		e.emit("deal-1", "deal_won", nil)
		// Match by hand, with nothing running.
		facts, err := e.st.ReadFacts(t.Context(), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.svc.matcher.handle(t.Context(), facts); err != nil {
			t.Fatal(err)
		}
		id := e.waitDeliveries(1)[0].DeliveryID
		// A worker claims it and dies.
		c, err := e.st.ClaimOutbox(t.Context(), store.ClaimRequest{Now: clockStart.UnixMilli(), Token: "dead-worker", Limit: 1, LeaseMarginMS: 90_000})
		if err != nil || len(c) != 1 {
			t.Fatalf("claim %v %v", c, err)
		}
		// A live worker takes over after the lease (its stream consumer
		// matches the fact again, which creates nothing new).
		e.clock.Set(clockStart.Add(90 * time.Second))
		e.start()
		row := e.waitRow(id, "attempt 2 scheduled", func(r *store.OutboxRow) bool { return r.Attempt == 2 })
		if e.rc.count() != 0 {
			t.Error("the interrupted attempt was sent again instead of recorded")
		}
		rec := checkInvariants(t, e.st, tenantA, nil)[id][0]
		if rec.str("error_code") != CodeAttemptInterrupted || rec.str("error_type") != ErrorTransient || rec.num("attempt") != 1 {
			t.Errorf("record %v", rec.data)
		}
		e.clock.Set(time.UnixMilli(row.NextAttemptAt))
		e.waitRow(id, "sent", func(r *store.OutboxRow) bool { return r.Status == store.OutboxSent })
		if hs := e.rc.all(); len(hs) != 1 || hs[0].header.Get(HeaderAttempt) != "2" {
			t.Errorf("requests %d", len(hs))
		}
	})
}

// A receiver's 2xx body and headers with NUL characters and invalid
// UTF-8, which no stored string may hold, are recorded with U+FFFD in
// their place: the outcome had been unrecordable, so the delivery was
// sent again and again although the receiver took it.
func TestResponseWithNULsIsRecorded(t *testing.T) {
	t.Parallel()
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, backend, func(int, *http.Request) (int, map[string]string, string) {
				return http.StatusOK, nil, "ok\x00\xff\xfe"
			})
			e.createConfig(platform.ConfigInput{Settings: e.settings(nil)})
			e.start()
			e.deal("deal-1")
			e.emit("deal-1", "deal_won", nil)
			id := e.waitDeliveries(1)[0].DeliveryID
			e.waitRow(id, "sent", func(r *store.OutboxRow) bool { return r.Status == store.OutboxSent })
			r := checkInvariants(t, e.st, tenantA, nil)[id][0]
			if got := r.str("response_body"); got != "ok\uFFFD\uFFFD" { // the NUL, then the run of invalid bytes
				t.Errorf("recorded body %q", got)
			}
		})
	}
}

func TestRecordableText(t *testing.T) {
	for in, want := range map[string]string{"ok": "ok", "a\x00b": "a\uFFFDb", "\xff": "\uFFFD", "é\x00": "é\uFFFD"} {
		if got := recordable(in); got != want {
			t.Errorf("recordable(%q) = %q, want %q", in, got, want)
		}
	}
}

// A change the store refuses for its content fails alone and at once:
// committed in a batch it had failed the batch's other changes with it,
// at every retry, holding up every tenant's outcomes.
func TestRefusedChangeFailsAlone(t *testing.T) {
	t.Parallel()
	st := teststore.Open(t, "sqlite")
	d := &deliverer{s: &Service{st: st, log: quietLogger()}, hardCtx: t.Context()}
	fact := func(id, data string) store.Fact {
		return store.Fact{ID: id, TenantID: tenantA, Type: "webhook", Subtype: "sent", Data: json.RawMessage(data), Timestamp: 1}
	}
	results := make([]chan error, 2)
	var batch []*pendingChange
	for i, data := range []string{`{"response_body":"a\u0000b"}`, `{"response_body":"ok"}`} {
		results[i] = make(chan error, 1)
		batch = append(batch, &pendingChange{
			change: store.OutboxChange{Row: store.OutboxRow{DeliveryID: fmt.Sprintf("del_%d", i), TenantID: tenantA}, ClaimToken: "tok", Facts: []store.Fact{fact(fmt.Sprintf("fct_%d", i), data)}},
			after:  func(err error) { results[i] <- err },
		})
	}
	start := time.Now()
	d.commit(batch)
	if err := <-results[0]; !errors.Is(err, store.ErrInvalidInput) {
		t.Errorf("the refused change: %v, want invalid input", err)
	}
	if err := <-results[1]; errors.Is(err, store.ErrInvalidInput) {
		t.Errorf("the other change failed with the refused one: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the commit took %v: retried what cannot pass", took)
	}
}
