package tracing_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/factline/factline/internal/host/tracing"
	"github.com/factline/factline/internal/testutil"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestFromEnv: off unless OTEL_TRACES_EXPORTER=otlp, OTEL_SDK_DISABLED
// wins, and an exporter or protocol Factline lacks is refused.
func TestFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr string
	}{
		{"default off", nil, false, ""},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false, ""},
		{"otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, ""},
		{"disabled wins", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, false, ""},
		{"unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, "OTEL_TRACES_EXPORTER=zipkin"},
		{"grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"},
	}
	var logs testutil.Logs
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp, shutdown, err := tracing.FromEnv(context.Background(), env(tc.env), logs.Logger())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer shutdown(context.Background())
			_, isNoop := tp.(noop.TracerProvider)
			if on := tracing.Tracer(tp) != nil; on != tc.on || isNoop == tc.on {
				t.Fatalf("provider %T on=%v, want on=%v", tp, on, tc.on)
			}
			if tc.on {
				// Export errors are logged records, not plain lines.
				otel.Handle(errors.New("collector unreachable"))
				if got := logs.Take(); !strings.Contains(got, `level=WARN msg="trace export" err="collector unreachable"`) {
					t.Errorf("an export error logged %q", got)
				}
			}
		})
	}
}

// TestTraceparentOfFact: work a fact caused carries its trace id in the
// traceparent it sends; a request id is no W3C trace.
func TestTraceparentOfFact(t *testing.T) {
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	tp := tracing.Traceparent(context.Background(), tid)
	if tracing.IncomingTraceID(tp) != tid || !strings.HasSuffix(tp, "-01") {
		t.Fatalf("traceparent %q does not carry trace %s", tp, tid)
	}
	if tp := tracing.Traceparent(context.Background(), "req_01HZX"); tp != "" {
		t.Fatalf("traceparent %q for a request id", tp)
	}
}

// BenchmarkOff is what an instrumented call site costs with tracing off.
func BenchmarkOff(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, span := tracing.Child(ctx, "store.get_entity")
		span.End()
		_, span = tracing.Start(c, nil, "webhook.deliver")
		span.End()
	}
}
