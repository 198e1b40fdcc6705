package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/factline/factline/internal/clock"
	"github.com/factline/factline/internal/clock/clocktest"
	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// waitLimit bounds every wait for a background goroutine.
const waitLimit = 30 * time.Second

// clockStart is where manual clocks start.
var clockStart = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

const tenantA = "tenant-a"

func quietLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// hit is one request a receiver got.
type hit struct {
	n      int // 1-based arrival number
	header http.Header
	body   []byte
	at     time.Time // the manual clock's time at arrival
}

// receiver is an HTTPS test server that answers by a script and records
// every request.
type receiver struct {
	t     testing.TB
	srv   *httptest.Server
	clock clock.Clock

	mu      sync.Mutex
	hits    []hit
	respond func(n int, r *http.Request) (int, map[string]string, string)
	arrived chan struct{}
}

// newReceiver starts a TLS server; respond may be nil (always 200).
func newReceiver(t testing.TB, clock clock.Clock, respond func(n int, r *http.Request) (int, map[string]string, string)) *receiver {
	rc := &receiver{t: t, clock: clock, respond: respond, arrived: make(chan struct{}, 1)}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	n := len(rc.hits) + 1
	var at time.Time
	if rc.clock != nil {
		at = rc.clock.Now()
	}
	rc.hits = append(rc.hits, hit{n: n, header: r.Header.Clone(), body: b, at: at})
	respond := rc.respond
	rc.mu.Unlock()
	status, headers, body := http.StatusOK, map[string]string(nil), "ok"
	if respond != nil {
		status, headers, body = respond(n, r)
	}
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
	select {
	case rc.arrived <- struct{}{}:
	default:
	}
}

func (rc *receiver) setRespond(f func(n int, r *http.Request) (int, map[string]string, string)) {
	rc.mu.Lock()
	rc.respond = f
	rc.mu.Unlock()
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.hits)
}

func (rc *receiver) all() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hit(nil), rc.hits...)
}

// url is the receiver's https URL at path.
func (rc *receiver) url(path string) string { return rc.srv.URL + path }

// tlsConfig trusts the receiver's certificate.
func (rc *receiver) tlsConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(rc.srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

// waitFor polls cond (a store read, typically) until it holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, waitLimit, what, cond)
}

// env is a webhook service on a real store with a platform, a manual
// clock and an HTTPS receiver.
type env struct {
	t       *testing.T
	backend string
	st      store.Store
	plat    *platform.Service
	svc     *Service
	clock   *clocktest.Manual
	rc      *receiver
	claims  chan int64
	secret  string
	ref     string
}

type envOption func(*Options)

func newEnv(t *testing.T, backend string, respond func(n int, r *http.Request) (int, map[string]string, string), opts ...envOption) *env {
	t.Helper()
	return newEnvOn(t, backend, teststore.Open(t, backend), respond, opts...)
}

// newEnvOn is newEnv on a store the caller opened.
func newEnvOn(t *testing.T, backend string, st store.Store, respond func(n int, r *http.Request) (int, map[string]string, string), opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, backend: backend, st: st, clock: clocktest.New(clockStart), claims: make(chan int64, 1024)}
	domain, err := manifest.LoadDomainFile("testdata/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e.plat, err = platform.New(platform.Options{Store: e.st, Domain: domain, Ledgers: ledger.Fallback{Static: ledger.Builtin()}, Logger: quietLogger(), Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.plat.Close)
	e.rc = newReceiver(t, e.clock, respond)
	o := Options{
		Store: e.st, Logger: quietLogger(), Clock: e.clock, DataDir: t.TempDir(),
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		TLSConfig:     e.rc.tlsConfig(),
		Jitter:        func() float64 { return 0.5 },
		PollInterval:  time.Second,
	}
	for _, f := range opts {
		f(&o)
	}
	e.svc, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.svc.RegisterConfigType(e.plat)
	e.svc.dl.onClaim = func(at int64, _ int) {
		select {
		case e.claims <- at:
		default:
		}
	}
	sec, err := e.svc.CreateSecret(t.Context(), tenantA)
	if err != nil {
		t.Fatal(err)
	}
	e.secret, e.ref = sec.Secret, sec.SecretRef
	return e
}

func (e *env) start() {
	e.t.Helper()
	if err := e.svc.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.svc.Stop(ctx); err != nil {
			e.t.Errorf("Stop: %v", err)
		}
	})
}

// settings returns webhook settings for the receiver with the env's
// secret; extra entries are merged in.
func (e *env) settings(extra map[string]any) map[string]any {
	m := map[string]any{
		"url":        e.rc.url("/hook"),
		"secret_ref": e.ref,
		"triggers":   []any{"outcome.deal_won"},
		"retry":      map[string]any{"backoff_base_seconds": 60},
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func (e *env) createConfig(in platform.ConfigInput) *store.Config {
	e.t.Helper()
	if in.Type == "" {
		in.Type = ConfigType
	}
	c, err := e.plat.CreateConfig(e.t.Context(), tenantA, in)
	if err != nil {
		e.t.Fatalf("CreateConfig: %v", err)
	}
	return c
}

// deal creates a deal entity.
func (e *env) deal(id string) {
	e.t.Helper()
	_, err := e.plat.CreateEntity(e.t.Context(), tenantA, platform.CreateEntityInput{Type: "deal", ID: id,
		Fields: map[string]any{"status": "open", "name": "Deal " + id, "stage": "new", "campaign_id": "camp-1"}})
	if err != nil {
		e.t.Fatalf("CreateEntity: %v", err)
	}
}

// emit appends an outcome fact to a deal.
func (e *env) emit(dealID, subtype string, data map[string]any) *store.Fact {
	e.t.Helper()
	f, err := e.plat.AppendFact(e.t.Context(), tenantA, platform.AppendFactInput{EntityID: dealID, Type: "outcome", Subtype: subtype, Data: data})
	if err != nil {
		e.t.Fatalf("AppendFact: %v", err)
	}
	return f
}

// deliveries returns the tenant's outbox rows.
func (e *env) deliveries() []store.OutboxRow {
	e.t.Helper()
	rows, err := e.st.ListOutbox(e.t.Context(), store.OutboxFilter{TenantID: tenantA, Limit: 100000})
	if err != nil {
		e.t.Fatal(err)
	}
	return rows
}

func (e *env) delivery(id string) *store.OutboxRow {
	e.t.Helper()
	r, err := e.st.GetOutbox(e.t.Context(), tenantA, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// waitDelivery waits until the tenant has n deliveries and returns them.
func (e *env) waitDeliveries(n int) []store.OutboxRow {
	e.t.Helper()
	var rows []store.OutboxRow
	waitFor(e.t, fmt.Sprintf("%d deliveries", n), func() bool { rows = e.deliveries(); return len(rows) >= n })
	return rows
}

// waitRow waits until the delivery satisfies cond.
func (e *env) waitRow(id, what string, cond func(r *store.OutboxRow) bool) *store.OutboxRow {
	e.t.Helper()
	var r *store.OutboxRow
	waitFor(e.t, what, func() bool { r = e.delivery(id); return cond(r) })
	return r
}

// waitHits waits for the receiver to have n requests.
func (e *env) waitHits(n int) []hit {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("%d requests at the receiver", n), func() bool { return e.rc.count() >= n })
	return e.rc.all()
}

// claimPass waits for the dispatcher to finish a claim pass made at the
// clock's current time or later.
func (e *env) claimPass() {
	e.t.Helper()
	now := e.clock.Now().UnixMilli()
	for drained := false; !drained; {
		select {
		case <-e.claims:
		default:
			drained = true
		}
	}
	notify(e.svc.dl.kick)
	deadline := time.After(waitLimit)
	for {
		select {
		case at := <-e.claims:
			if at >= now {
				return
			}
		case <-deadline:
			e.t.Fatal("timed out waiting for a claim pass")
		}
	}
}

// auditFacts returns the tenant's facts of type webhook or lifecycle, in
// position order.
func auditFacts(t testing.TB, st store.Store, tenant string) []store.Fact {
	t.Helper()
	all, err := st.ReadFacts(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Fact
	for _, f := range all {
		if f.TenantID == tenant && (f.Type == ConfigType || f.Type == "lifecycle") {
			out = append(out, f)
		}
	}
	return out
}

// sentRecord is a decoded webhook.sent fact.
type sentRecord struct {
	fact store.Fact
	data map[string]any
}

func (r sentRecord) str(k string) string { s, _ := r.data[k].(string); return s }
func (r sentRecord) num(k string) float64 {
	switch v := r.data[k].(type) {
	case float64:
		return v
	case json.Number:
		f, _ := v.Float64()
		return f
	}
	return -1
}
func (r sentRecord) flag(k string) (bool, bool) { b, ok := r.data[k].(bool); return b, ok }
func (r sentRecord) has(k string) bool          { _, ok := r.data[k]; return ok }

// checkInvariants checks the contract's invariants 1-6 over every
// webhook.sent fact of the tenant and returns the sent records by delivery
// id, in attempt order. sigs maps delivery id to the signatures the
// receiver saw per attempt (nil to skip invariant 6's signature part).
func checkInvariants(t testing.TB, st store.Store, tenant string, sigs map[string][]hit) map[string][]sentRecord {
	t.Helper()
	facts := auditFacts(t, st, tenant)
	triggered := map[string]store.Fact{}
	sent := map[string][]sentRecord{}
	for _, f := range facts {
		var data map[string]any
		if err := json.Unmarshal(f.Data, &data); err != nil {
			t.Fatalf("fact %s data: %v", f.ID, err)
		}
		switch f.Type + "." + f.Subtype {
		case "webhook.triggered":
			triggered[f.ID] = f
		case "webhook.sent":
			// Invariant 1: the source is a webhook.triggered fact.
			tf, ok := triggered[f.SourceID]
			if !ok {
				t.Errorf("invariant 1: webhook.sent %s has source_id %s, which is no earlier webhook.triggered fact", f.ID, f.SourceID)
				continue
			}
			var td map[string]any
			_ = json.Unmarshal(tf.Data, &td)
			r := sentRecord{fact: f, data: data}
			if r.str("delivery_id") != td["delivery_id"] {
				t.Errorf("webhook.sent %s names delivery %s; its triggered fact %s", f.ID, r.str("delivery_id"), td["delivery_id"])
			}
			sent[r.str("delivery_id")] = append(sent[r.str("delivery_id")], r)
		}
	}
	for id, recs := range sent {
		first := recs[0]
		for i, r := range recs {
			// Invariant 2 and 3: one delivery id, config id and version.
			if r.str("delivery_id") != id || r.fact.SourceID != first.fact.SourceID {
				t.Errorf("invariant 2: delivery %s record %d names %s / source %s", id, i, r.str("delivery_id"), r.fact.SourceID)
			}
			if r.str("config_id") != first.str("config_id") || r.num("config_version") != first.num("config_version") {
				t.Errorf("invariant 3: delivery %s record %d has config %s v%v, first %s v%v", id, i, r.str("config_id"),
					r.num("config_version"), first.str("config_id"), first.num("config_version"))
			}
			// Invariant 4: attempt runs 1..max_attempts (a replay starts
			// again at 1).
			att, maxAtt := int(r.num("attempt")), int(r.num("max_attempts"))
			if att < 1 || att > maxAtt {
				t.Errorf("invariant 4: delivery %s record %d: attempt %d of %d", id, i, att, maxAtt)
			}
			if i > 0 {
				prev := int(recs[i-1].num("attempt"))
				if att != prev+1 && att != 1 {
					t.Errorf("invariant 4: delivery %s: attempt %d follows attempt %d", id, att, prev)
				}
			}
			// Invariant 5: sent_to_dlq only on the last attempt.
			if dlq, ok := r.flag("sent_to_dlq"); ok && dlq && att != maxAtt {
				t.Errorf("invariant 5: delivery %s: sent_to_dlq at attempt %d of %d", id, att, maxAtt)
			}
			// Invariant 6 (recorded side): the signature timestamp of a
			// run of attempts is one value.
			if i > 0 && int(r.num("attempt")) != 1 && r.str("timestamp_header") != recs[i-1].str("timestamp_header") {
				t.Errorf("invariant 6: delivery %s: timestamp_header %s after %s", id, r.str("timestamp_header"), recs[i-1].str("timestamp_header"))
			}
			if r.str("signature_algorithm") != "sha256" {
				t.Errorf("delivery %s: signature_algorithm %q", id, r.str("signature_algorithm"))
			}
			checkSentFields(t, r)
		}
		// Invariant 6 (wire side): every attempt of a run carried the same
		// signature and timestamp.
		if hits := sigs[id]; len(hits) > 1 {
			for _, h := range hits[1:] {
				if h.header.Get(HeaderAttempt) == "1" {
					continue
				}
				if h.header.Get(HeaderSignature) != hits[0].header.Get(HeaderSignature) ||
					h.header.Get(HeaderTimestamp) != hits[0].header.Get(HeaderTimestamp) {
					t.Errorf("invariant 6: delivery %s: attempt %s signed %s at %s, attempt 1 %s at %s", id,
						h.header.Get(HeaderAttempt), h.header.Get(HeaderSignature), h.header.Get(HeaderTimestamp),
						hits[0].header.Get(HeaderSignature), hits[0].header.Get(HeaderTimestamp))
				}
			}
		}
	}
	return sent
}

// checkSentFields checks that a webhook.sent record has the fields of its
// case in the contract's table.
func checkSentFields(t testing.TB, r sentRecord) {
	t.Helper()
	need := []string{"delivery_id", "url", "success", "status_code", "attempt", "max_attempts", "signature_algorithm", "timestamp_header",
		"config_id", "config_version"}
	ok, _ := r.flag("success")
	if ok {
		need = append(need, "response_time_ms", "response_headers", "response_body")
	} else {
		need = append(need, "error_type", "error_code", "error_message", "will_retry")
		if retry, _ := r.flag("will_retry"); retry {
			need = append(need, "next_retry_at", "backoff_seconds")
		} else {
			need = append(need, "sent_to_dlq", "dlq_message_id", "dlq_timestamp", "first_attempt_at", "total_duration_ms")
		}
	}
	for _, k := range need {
		if !r.has(k) {
			t.Errorf("webhook.sent %s (success %v): missing %s in %v", r.fact.ID, ok, k, r.data)
		}
	}
}

// hitsByDelivery groups receiver hits by delivery id, in arrival order.
func hitsByDelivery(hits []hit) map[string][]hit {
	out := map[string][]hit{}
	for _, h := range hits {
		id := h.header.Get(HeaderDeliveryID)
		out[id] = append(out[id], h)
	}
	return out
}
