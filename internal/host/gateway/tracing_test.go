package gateway_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/factline/factline/internal/host/gateway"
)

const (
	testTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	testTraceparent = "00-" + testTraceID + "-00f067aa0ba902b7-01"
)

// TestTraceparentSetsFactTraceID: a fact records the W3C trace id of the
// request's traceparent, tracing on or off; without a valid one it keeps
// the request id, and a trace_id in the body wins.
func TestTraceparentSetsFactTraceID(t *testing.T) {
	h := setup(t, "sqlite")
	h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "contact", "id": "c1", "name": "Ada", "status": "active"}).wantStatus(t, 201)
	tests := []struct {
		name    string
		body    map[string]any
		headers []string
		want    string // "" for the request id
	}{
		{"traceparent", nil, []string{"traceparent", testTraceparent}, testTraceID},
		{"malformed traceparent", nil, []string{"traceparent", "00-xyz-00f067aa0ba902b7-01"}, ""},
		{"all-zero trace id", nil, []string{"traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, ""},
		{"none", nil, nil, ""},
		{"body trace_id wins", map[string]any{"trace_id": "mine"}, []string{"traceparent", testTraceparent}, "mine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"entity_id": "c1", "type": "note", "data": map[string]any{}}
			for k, v := range tc.body {
				body[k] = v
			}
			r := h.req("POST", "/v1/facts", h.keyA, body, tc.headers...).wantStatus(t, 201)
			want := tc.want
			if want == "" {
				want = r.header.Get(gateway.HeaderRequestID)
			}
			if got := str(r.data()["trace_id"]); got != want {
				t.Errorf("trace_id %q, want %q", got, want)
			}
		})
	}
}

// TestRequestSpanNamedByRouteWithStoreChildren: with a tracer provider a
// request's span continues the traceparent, is named by the route pattern
// with tenant and status, and the store calls are its children.
func TestRequestSpanNamedByRouteWithStoreChildren(t *testing.T) {
	h := setup(t, "sqlite")
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	deps := h.deps
	deps.TracerProvider = tp
	srv, err := gateway.New(gateway.Config{DocsURL: docsURL, BodyLimit: 64 << 10}, deps)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	h.req("POST", "/v1/entities", h.keyA, map[string]any{"type": "contact", "id": "c1", "name": "Ada", "status": "active"}).wantStatus(t, 201)
	r := h.req("GET", "/v1/entities/c1?entity_type=contact", h.keyA, nil, "traceparent", testTraceparent).wantStatus(t, 200)
	_ = r

	var reqSpan *tracetest.SpanStub
	spans := exp.GetSpans()
	for i, s := range spans {
		if s.SpanContext.TraceID().String() == testTraceID && s.Parent.SpanID().String() == "00f067aa0ba902b7" {
			reqSpan = &spans[i]
		}
	}
	if reqSpan == nil {
		t.Fatalf("no span continues the traceparent among %d spans", len(spans))
	}
	if reqSpan.Name != "GET /v1/entities/:id" {
		t.Errorf("request span named %q, want the route pattern", reqSpan.Name)
	}
	attrs := map[string]string{}
	for _, a := range reqSpan.Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["factline.tenant"] != "tenant-a" || attrs["http.response.status_code"] != "200" || attrs["http.route"] != "/v1/entities/:id" {
		t.Errorf("request span attributes %v", attrs)
	}
	var child bool
	for _, s := range spans {
		if s.Name == "store.get_entity" && s.Parent.SpanID() == reqSpan.SpanContext.SpanID() {
			child = true
		}
	}
	if !child {
		t.Errorf("no store.get_entity span under the request span")
	}
}
