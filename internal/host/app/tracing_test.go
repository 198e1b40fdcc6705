package app_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/tracing"
	"github.com/factline/factline/internal/testutil"
)

// callerManifest declares a type the built-in ledger serves (a gateway
// manifest's types are the built-in ledger's).
const callerManifest = `name: callers
version: "1"
entities:
  caller:
    fields:
      name: {type: string, indexed: true}
    facts: [call]
routes:
  - {path: /v1/reports/calls, method: POST, entity: caller, action: query}
`

// TestTraceFollowsRequestThroughAppendProjectionAndWebhook sends a fact
// with a traceparent and finds, in the exported spans, the request, its
// append commit, the projection update and the webhook delivery in that
// one trace; the receiver gets the trace in its traceparent and the fact
// records the trace id.
func TestTraceFollowsRequestThroughAppendProjectionAndWebhook(t *testing.T) {
	t.Parallel()
	const (
		traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
		traceparent = "00-" + traceID + "-00f067aa0ba902b7-01"
	)
	var (
		mu       sync.Mutex
		received []string
	)
	rc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	roots := x509.NewCertPool()
	roots.AddCert(rc.Certificate())

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	man := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(man, []byte(callerManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	// No plugins: the built-in ledger serves the manifest's caller type,
	// and nothing waits on compiling modules.
	l := startBare(t, app.Config{Manifest: man, TracerProvider: tp, WebhookAllowNetworks: "127.0.0.0/8",
		WebhookTLS: &tls.Config{RootCAs: roots}})
	admin := l.newKey("t1", "admin")
	if code, body := l.call("POST", "/v1/entities", l.key, map[string]any{"type": "caller", "id": "c1", "name": "Ada"}); code != 201 {
		t.Fatalf("create caller: %d %v", code, body)
	}
	if code, body := l.call("POST", "/v1/configs", l.key, map[string]any{"type": "projection", "name": "calls", "settings": map[string]any{
		"source": "caller", "factTypes": []string{"call"}, "timeWindow": "hour",
		"aggregations": []map[string]any{{"field": "count", "function": "count"}}, "materialize": true, "storageVersion": 2}}); code != 201 {
		t.Fatalf("create projection: %d %v", code, body)
	}
	code, sec := l.call("POST", "/v1/admin/webhooks/secrets", admin, nil)
	if code != 201 {
		t.Fatalf("create secret: %d %v", code, sec)
	}
	if code, body := l.call("POST", "/v1/configs", l.key, map[string]any{"type": "webhook", "name": "calls", "settings": map[string]any{
		"url": rc.URL + "/hook", "secret_ref": dataOf(sec)["secret_ref"], "triggers": []string{"call.done"},
		"retry": map[string]any{"enabled": false}}}); code != 201 {
		t.Fatalf("create webhook: %d %v", code, body)
	}
	enc, _ := json.Marshal(map[string]any{"entity_id": "c1", "type": "call", "subtype": "done", "timestamp": hour0, "data": map[string]any{"n": 1}})
	req, _ := http.NewRequest("POST", l.base+"/v1/facts", bytes.NewReader(enc))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", l.key)
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Data struct {
			TraceID string `json:"trace_id"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 201 || out.Data.TraceID != traceID {
		t.Fatalf("append: %d, fact trace_id %q, want %s", resp.StatusCode, out.Data.TraceID, traceID)
	}

	want := map[string]bool{"POST /v1/facts": false, "store.append_commit": false, "projection.update": false, "webhook.deliver": false}
	testutil.EventuallyNil(t, time.Minute, func() error {
		for _, s := range exp.GetSpans() {
			if _, ok := want[s.Name]; ok && s.SpanContext.TraceID().String() == traceID && s.Status.Code != codes.Error {
				want[s.Name] = true
			}
		}
		mu.Lock()
		got := append([]string(nil), received...)
		mu.Unlock()
		all := len(got) > 0
		for _, ok := range want {
			all = all && ok
		}
		if !all {
			return fmt.Errorf("spans of trace %s found: %v; receiver saw %q", traceID, want, got)
		}
		if tid := tracing.IncomingTraceID(got[0]); tid != traceID {
			t.Fatalf("receiver's traceparent %q, want trace %s", got[0], traceID)
		}
		return nil
	})
	for _, s := range exp.GetSpans() {
		if s.Name == "POST /v1/facts" && s.SpanContext.TraceID().String() == traceID {
			if s.Parent.SpanID().String() != "00f067aa0ba902b7" {
				t.Errorf("request span's parent %s, want the traceparent's span", s.Parent.SpanID())
			}
			attrs := map[string]string{}
			for _, a := range s.Attributes {
				attrs[string(a.Key)] = a.Value.Emit()
			}
			if attrs["http.route"] != "/v1/facts" || attrs["factline.tenant"] != "t1" || attrs["http.response.status_code"] != "201" {
				t.Errorf("request span attributes %v", attrs)
			}
		}
	}
}

// TestTracingOffByDefault starts a process with no OTEL_* variables: its
// provider is the no-op one and a traced request exports nothing, while
// the fact still records the traceparent's trace id.
func TestTracingOffByDefault(t *testing.T) {
	t.Parallel()
	tp, _, err := tracing.FromEnv(context.Background(), func(string) string { return "" }, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp.(noop.TracerProvider); !ok || tracing.Tracer(tp) != nil {
		t.Fatalf("default provider %T is not the no-op one", tp)
	}
}

// startBare runs an App on SQLite with no plugins.
func startBare(t *testing.T, cfg app.Config) *live {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.BuiltinPlugins = map[string][]byte{}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, func(x net.Addr) { addr <- x }) }()
	l := &live{t: t, a: a, base: "http://" + (<-addr).String()}
	l.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}
	t.Cleanup(l.stop)
	l.key = l.newKey("t1", "live")
	return l
}
