package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// promQLWords are the PromQL functions, aggregations and keywords the
// rules use; every other identifier left in an expression is a metric.
var promQLWords = map[string]bool{
	"sum": true, "max": true, "min": true, "avg": true, "count": true, "rate": true, "increase": true,
	"delta": true, "histogram_quantile": true, "by": true, "without": true, "and": true, "or": true,
	"unless": true, "offset": true, "on": true, "ignoring": true, "abs": true, "bool": true,
}

// ruleMetrics returns the metric names the alert expressions of a rules
// file use.
func ruleMetrics(t *testing.T, file string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	// Label matchers, grouping labels, ranges, strings and numbers go.
	strip := regexp.MustCompile(`\{[^}]*\}|\b(by|without|on|ignoring)\s*\([^)]*\)|\[[^\]]*\]|"[^"]*"|\b[0-9][0-9.]*[smhd]?\b`)
	ident := regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	out := map[string][]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			for _, w := range ident.FindAllString(strip.ReplaceAllString(r.Expr, " "), -1) {
				if !promQLWords[w] {
					out[r.Alert] = append(out[r.Alert], w)
				}
			}
			if len(out[r.Alert]) == 0 {
				t.Errorf("%s: alert %s names no metric", file, r.Alert)
			}
		}
	}
	return out
}

// TestAlertRulesLoadAndNameExportedMetrics: promtool accepts every rules
// file and the Prometheus configuration of deploy/compose.yaml, and every
// metric an alert reads is one a running gateway (plugins loaded, a
// request served) exports on its metrics listener.
func TestAlertRulesLoadAndNameExportedMetrics(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found: install Debian's prometheus package (make deps does): %v", err)
	}
	files, _ := filepath.Glob("../../deploy/prometheus/*-alerts.yaml")
	if len(files) < 2 {
		t.Fatalf("rules files: %v", files)
	}
	for _, args := range append([][]string{{"check", "config", "../../deploy/prometheus/prometheus.yml"}}, func() [][]string {
		var a [][]string
		for _, f := range files {
			a = append(a, []string{"check", "rules", f})
		}
		return a
	}()...) {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	metricsAddr := freeAddr(t)
	s := startServer(t, "--data-dir", t.TempDir(), "--metrics-addr", metricsAddr)
	defer s.stop(t)
	s.waitReady(t)
	code, _, body := get(t, "http://"+metricsAddr+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	exported := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		exported[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
	}
	for _, f := range files {
		for alert, names := range ruleMetrics(t, f) {
			for _, n := range names {
				if !exported[n] {
					t.Errorf("%s: alert %s reads %s, which the gateway does not export", filepath.Base(f), alert, n)
				}
			}
		}
	}
}

func TestProbe(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--data-dir", t.TempDir())
	defer s.stop(t)
	s.waitReady(t)
	tests := []struct {
		url  string
		code int
	}{
		{s.base + "/ready", 0},
		{s.base + "/no-such-page", 1},
		{"http://" + freeAddr(t) + "/ready", 1},
	}
	for _, tt := range tests {
		if out, errOut, code := cli(t, nil, "probe", "--url", tt.url); code != tt.code {
			t.Errorf("probe %s: exit %d, want %d\n%s%s", tt.url, code, tt.code, out, errOut)
		}
	}
}
