package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const docsURL = "https://docs.example.test"

// harness is a server on a real store with keys for two tenants.
type harness struct {
	t      *testing.T
	srv    *gateway.Server
	store  store.Store
	deps   gateway.Deps
	keyA   string // tenant-a, live
	keyB   string // tenant-b, live
	adminA string // tenant-a, admin

	listenOnce sync.Once
	baseURL    string
}

func setup(t *testing.T, backend string) *harness {
	t.Helper()
	return setupLedgers(t, backend, ledger.Builtin())
}

// setupLedgers is setup with ledgers by manifest name; names it lacks are
// served by the built-in ledger.
func setupLedgers(t *testing.T, backend string, ledgers ledger.Static) *harness {
	t.Helper()
	return setupOnWith(t, teststore.Open(t, backend), ledgers)
}

// setupOn is setup on a store the test opened.
func setupOn(t *testing.T, st store.Store) *harness {
	t.Helper()
	return setupOnWith(t, st, ledger.Builtin())
}

func setupOnWith(t *testing.T, st store.Store, ledgers ledger.Static) *harness {
	t.Helper()
	domain, err := manifest.LoadDomainFile("../../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := platform.New(platform.Options{Store: st, Domain: domain, Ledgers: ledger.Fallback{Static: ledgers}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	deps := gateway.Deps{Platform: p, Auth: auth.NewAuthenticator(st), Logger: logger}
	srv, err := gateway.New(gateway.Config{DocsURL: docsURL, BodyLimit: 64 << 10}, deps)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, store: st, deps: deps}
	h.keyA = h.newKey("tenant-a", auth.ModeLive)
	h.keyB = h.newKey("tenant-b", auth.ModeLive)
	h.adminA = h.newKey("tenant-a", auth.ModeAdmin)
	return h
}

func (h *harness) newKey(tenant, mode string) string {
	h.t.Helper()
	key, _, err := auth.CreateKey(h.t.Context(), h.store, tenant, mode, "", time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return key
}

// response is a decoded HTTP response.
type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (r *response) data() map[string]any {
	d, _ := r.body["data"].(map[string]any)
	return d
}

// req sends a request through the fiber app; body may be nil, a string
// (sent verbatim) or a value encoded as JSON. headers alternate name,
// value.
func (h *harness) req(method, path, key string, body any, headers ...string) *response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(enc)
	}
	r := httptest.NewRequest(method, path, rd)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		r.Header.Set("X-API-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			r.Header.Del(headers[i])
		} else {
			r.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := h.srv.App().Test(r, 10_000)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return decode(h.t, method, path, resp)
}

// listen serves the harness on a loopback listener (once) and returns its
// base URL.
func (h *harness) listen() string {
	h.t.Helper()
	h.listenOnce.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			h.t.Fatal(err)
		}
		go h.srv.Serve(ln)
		h.t.Cleanup(func() { h.srv.Shutdown(5 * time.Second) })
		h.baseURL = "http://" + ln.Addr().String()
	})
	return h.baseURL
}

// overHTTP sends a request over a real loopback connection.
func (h *harness) overHTTP(method, path, key, body string) *response {
	h.t.Helper()
	h.listen()
	r, err := http.NewRequest(method, h.baseURL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return decode(h.t, method, path, resp)
}

func decode(t *testing.T, method, path string, resp *http.Response) *response {
	t.Helper()
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := &response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&out.body); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v\n%s", method, path, err, raw)
		}
	}
	return out
}

// wantStatus fails unless the response has the status.
func (r *response) wantStatus(t *testing.T, status int) *response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body: %s", r.status, status, r.raw)
	}
	return r
}

// wantProblem checks a problem response byte-exactly on status, slug,
// title and detail, and the shape of instance and trace_id.
func (r *response) wantProblem(t *testing.T, status int, slug, title, detail string) {
	t.Helper()
	r.wantStatus(t, status)
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	rid := r.header.Get("X-Request-Id")
	if rid == "" {
		t.Errorf("X-Request-Id missing")
	}
	want := map[string]any{
		"type":     docsURL + "/errors/" + slug,
		"title":    title,
		"status":   json.Number(itoa(status)),
		"instance": "/errors/" + rid,
		"trace_id": rid,
	}
	if detail != "" {
		want["detail"] = detail
	}
	for k, v := range want {
		if r.body[k] != v {
			t.Errorf("problem %s = %#v, want %#v (body %s)", k, r.body[k], v, r.raw)
		}
	}
	if d, _ := r.body["detail"].(string); d == "" {
		t.Errorf("problem detail is empty")
	}
}

// fieldErrors returns the problem's errors as field -> code.
func (r *response) fieldErrors() map[string]string {
	out := map[string]string{}
	list, _ := r.body["errors"].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		f, _ := m["field"].(string)
		c, _ := m["code"].(string)
		out[f] = c
	}
	return out
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func str(v any) string { s, _ := v.(string); return s }

func forEachBackend(t *testing.T, fn func(t *testing.T, h *harness)) {
	for _, b := range teststore.Backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t, b))
		})
	}
}

var validAccount = map[string]any{"type": "account", "name": "Acme", "status": "active", "subtype": "customer"}

// wantReplayOf checks that r replays first: the same status and data byte
// for byte, in an envelope of its own request (a new request id, the
// first one's in Original-Request-Id), marked Idempotent-Replayed.
func (r *response) wantReplayOf(t *testing.T, first *response) {
	t.Helper()
	var a, b struct {
		Data json.RawMessage `json:"data"`
		Meta struct {
			RequestID string `json:"request_id"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(first.raw, &a); err != nil {
		t.Fatalf("first answer: %v: %s", err, first.raw)
	}
	if err := json.Unmarshal(r.raw, &b); err != nil {
		t.Fatalf("replay: %v: %s", err, r.raw)
	}
	switch {
	case r.status != first.status || string(a.Data) != string(b.Data):
		t.Fatalf("replay differs:\n%d %s\n%d %s", first.status, first.raw, r.status, r.raw)
	case r.header.Get("Idempotent-Replayed") != "true" || first.header.Get("Idempotent-Replayed") != "":
		t.Fatalf("Idempotent-Replayed: first %q, replay %q", first.header.Get("Idempotent-Replayed"), r.header.Get("Idempotent-Replayed"))
	case b.Meta.RequestID == a.Meta.RequestID || b.Meta.RequestID != r.header.Get("X-Request-Id") ||
		r.header.Get("Original-Request-Id") != a.Meta.RequestID:
		t.Fatalf("replay meta %s (Original-Request-Id %q), first %s", r.raw, r.header.Get("Original-Request-Id"), first.raw)
	}
}
