package webhook

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"
)

// The contract's metric names, each registered once.
func TestMetricNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite", nil)
	reg := prometheus.NewRegistry()
	if err := e.svc.Register(reg); err != nil {
		t.Fatal(err)
	}
	e.svc.metrics.duration.Observe(1)
	e.svc.metrics.attempts.Observe(1)
	e.svc.metrics.payloadSize.Observe(1)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range families {
		got[f.GetName()] = f.GetType().String()
	}
	want := map[string]string{
		"webhooks_triggered_total": "COUNTER", "webhooks_sent_total": "COUNTER", "webhooks_succeeded_total": "COUNTER",
		"webhooks_failed_total": "COUNTER", "webhooks_dlq_total": "COUNTER",
		"webhook_delivery_duration_ms": "HISTOGRAM", "webhook_retry_attempts": "HISTOGRAM", "webhook_payload_size_bytes": "HISTOGRAM",
		"webhook_queue_depth": "GAUGE", "webhook_dlq_depth": "GAUGE",
	}
	for name, typ := range want {
		if got[name] != typ {
			t.Errorf("%s: %q, want %s", name, got[name], typ)
		}
	}
	if len(got) != len(want) {
		t.Errorf("exported %v", got)
	}
}

// ruleFile is the Prometheus rule file format.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// promQL words that are not metric names.
var promQLWords = map[string]bool{
	"sum": true, "rate": true, "increase": true, "max": true, "min": true, "by": true, "le": true, "offset": true,
	"histogram_quantile": true, "delta": true, "deriv": true, "avg": true, "without": true, "and": true, "or": true,
	"unless": true, "on": true, "ignoring": true, "bool": true,
}

// The contract's alerts as Prometheus rules: the file parses, has the four
// alerts with their severities, and every expression names only metrics
// the service exports (histogram series by their _bucket, _sum or _count
// names).
func TestAlertRules(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../../deploy/prometheus/webhook-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("rule file: %v", err)
	}
	exported := map[string]bool{}
	histograms := map[string]bool{MetricDuration: true, MetricRetryAttempts: true, MetricPayloadSize: true}
	for _, n := range []string{MetricTriggered, MetricSent, MetricSucceeded, MetricFailed, MetricDLQ, MetricQueueDepth, MetricDLQDepth} {
		exported[n] = true
	}
	for h := range histograms {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			exported[h+suffix] = true
		}
	}
	want := map[string]string{"WebhookFailureRatioHigh": "warning", "WebhookDeadLetterQueueGrowing": "warning",
		"WebhookDeliveryLatencyHigh": "info", "WebhookDeadLettered": "warning"}
	ident := regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	seen := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			seen[r.Alert] = true
			if sev, ok := want[r.Alert]; !ok || r.Labels["severity"] != sev {
				t.Errorf("alert %q: severity %q", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("alert %s has no summary", r.Alert)
			}
			expr := regexp.MustCompile(`\[[0-9a-z]+\]|\b[0-9]+[smhd]\b|"[^"]*"`).ReplaceAllString(r.Expr, " ")
			if strings.Count(expr, "(") != strings.Count(expr, ")") {
				t.Errorf("alert %s: unbalanced parentheses in %q", r.Alert, r.Expr)
			}
			metrics := 0
			for _, w := range ident.FindAllString(expr, -1) {
				if promQLWords[w] {
					continue
				}
				if !exported[w] {
					t.Errorf("alert %s: %q is not an exported metric", r.Alert, w)
				}
				metrics++
			}
			if metrics == 0 {
				t.Errorf("alert %s names no metric", r.Alert)
			}
		}
	}
	for a := range want {
		if !seen[a] {
			t.Errorf("alert %s is missing", a)
		}
	}
}
