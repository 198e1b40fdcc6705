// Package tracing builds Factline's OpenTelemetry tracer provider from the
// standard OTEL_* environment variables and carries a fact's trace across
// the asynchronous work it causes.
//
// Tracing is off unless OTEL_TRACES_EXPORTER=otlp. Off, the provider is the
// API's no-op one and Tracer returns nil, which every call site checks
// before starting a span: a request then pays one nil check per site.
package tracing

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/factline/factline/internal/host/store"
)

// Scope is the instrumentation scope of every Factline span.
const Scope = "github.com/factline/factline"

// Propagator reads and writes W3C traceparent headers.
var Propagator = propagation.TraceContext{}

// FromEnv builds the tracer provider the environment asks for: lookup is
// os.Getenv in production. Off (the default, or OTEL_SDK_DISABLED=true) it
// returns a no-op provider; OTEL_TRACES_EXPORTER=otlp exports over
// OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT (and the exporter's other
// standard variables). shutdown flushes the spans still queued. Export
// errors, which OpenTelemetry reports through its process-wide handler
// (by default a plain line from the log package), go to log as warnings.
func FromEnv(ctx context.Context, lookup func(string) string, log *slog.Logger) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	off := func(context.Context) error { return nil }
	if strings.EqualFold(strings.TrimSpace(lookup("OTEL_SDK_DISABLED")), "true") {
		return noop.NewTracerProvider(), off, nil
	}
	switch exp := strings.TrimSpace(lookup("OTEL_TRACES_EXPORTER")); exp {
	case "", "none":
		return noop.NewTracerProvider(), off, nil
	case "otlp":
	default:
		return nil, nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%s is not supported (use otlp or none)", exp)
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(lookup(k)); p != "" {
			if p != "http/protobuf" {
				return nil, nil, fmt.Errorf("tracing: %s=%s is not supported (use http/protobuf)", k, p)
			}
			break
		}
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", "factline")))
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the default
	// service name.
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("trace export", "err", err) }))
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return sdk, sdk.Shutdown, nil
}

// Tracer returns Factline's tracer of tp, or nil when tp is nil or the
// no-op provider: callers start spans only on a non-nil tracer.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return nil
	}
	return tp.Tracer(Scope)
}

// Start starts a span under ctx's span when tr is on; off it returns ctx
// and a no-op span without allocating.
func Start(ctx context.Context, tr trace.Tracer, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, nopSpan
	}
	return tr.Start(ctx, name, opts...)
}

var nopSpan = trace.SpanFromContext(context.Background())

// ParseTraceID reads a W3C trace id: 32 lowercase hex digits, not all zero.
func ParseTraceID(s string) (trace.TraceID, bool) {
	if len(s) != 32 || strings.ToLower(s) != s {
		return trace.TraceID{}, false
	}
	id, err := trace.TraceIDFromHex(s)
	return id, err == nil
}

// FactContext returns ctx with the remote parent of work a fact caused: a
// fact keeps only its trace_id, so the parent's span id is derived from
// the trace id (the same for every retry and every consumer; no span of
// that id is exported) and the parent is taken as sampled.
// A trace_id that is not a W3C trace id (the request id of a request that
// sent no traceparent) leaves ctx as it is: the work starts a trace of its
// own.
func FactContext(ctx context.Context, traceID string) context.Context {
	tid, ok := ParseTraceID(traceID)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: derivedSpanID(tid), TraceFlags: trace.FlagsSampled, Remote: true,
	}))
}

// Traceparent is the W3C traceparent header value of ctx's span, or of the
// fact's trace when ctx has no span; "" when neither is a W3C trace.
func Traceparent(ctx context.Context, traceID string) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		sc = trace.SpanContextFromContext(FactContext(context.Background(), traceID))
		if !sc.IsValid() {
			return ""
		}
	}
	var b [55]byte
	copy(b[:], "00-")
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// IncomingTraceID is the trace id of a W3C traceparent header value, ""
// when it is missing or malformed (which the standard says to ignore).
func IncomingTraceID(traceparent string) string {
	if traceparent == "" {
		return ""
	}
	sc := trace.SpanContextFromContext(Propagator.Extract(context.Background(), singleCarrier(traceparent)))
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Extract returns ctx with the remote parent a traceparent names, if valid.
func Extract(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return Propagator.Extract(ctx, singleCarrier(traceparent))
}

// singleCarrier carries one traceparent value.
type singleCarrier string

func (c singleCarrier) Get(key string) string {
	if key == "traceparent" {
		return string(c)
	}
	return ""
}
func (singleCarrier) Set(string, string) {}
func (singleCarrier) Keys() []string     { return []string{"traceparent"} }

func derivedSpanID(tid trace.TraceID) trace.SpanID {
	h := fnv.New64a()
	h.Write(tid[:])
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], h.Sum64()|1) // never the invalid zero id
	return sid
}

// Child starts a span under ctx's span when that one is recording, with
// the same provider; otherwise it returns ctx and a no-op span without
// allocating. Code on the request path uses it, so it needs no tracer of
// its own.
func Child(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nopSpan
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, opts...)
}

// End records err, if any, on span and ends it.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// FactSpans starts, when tr is on, one span per fact whose trace_id is a
// W3C trace id, each continuing its fact's trace; the returned func ends
// them with the outcome of the batch. Facts of a request that sent no
// traceparent get no span.
func FactSpans(ctx context.Context, tr trace.Tracer, name string, facts []store.Fact, attrs ...attribute.KeyValue) (end func(error)) {
	if tr == nil {
		return endNothing
	}
	var spans []trace.Span
	for i := range facts {
		f := &facts[i]
		if _, ok := ParseTraceID(f.TraceID); !ok {
			continue
		}
		_, span := tr.Start(FactContext(ctx, f.TraceID), name, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attrs...), trace.WithAttributes(attribute.String("factline.fact_id", f.ID),
				attribute.String("factline.tenant", f.TenantID), attribute.Int64("factline.position", f.Position)))
		spans = append(spans, span)
	}
	if len(spans) == 0 {
		return endNothing
	}
	return func(err error) {
		for _, s := range spans {
			End(s, err)
		}
	}
}

func endNothing(error) {}
