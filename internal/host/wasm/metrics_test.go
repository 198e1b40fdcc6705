package wasm

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// series returns the value of a counter, or a histogram's sample count,
// for the labels plugin, version and call; ok is false when absent.
func series(t *testing.T, reg *prometheus.Registry, name, plugin, version, call string) (v float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "plugin") == plugin && label(m, "version") == version && label(m, "call") == call {
				if h := m.GetHistogram(); h != nil {
					return float64(h.GetSampleCount()), true
				}
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := newHost(t, Options{PoolSize: 1, Registerer: reg})
	// A second host on the same registry shares the collectors.
	newHost(t, Options{PoolSize: 1, Registerer: reg})
	ledger := load(t, h, "ledger")
	trap := load(t, h, "trap")
	ctx := t.Context()
	for range 2 {
		if _, err := ledger.Decide(ctx, decideInput("deposit", `{"amount":"1"}`)); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = ledger.Decide(ctx, decideInput("refund", `{}`))
	_, _ = ledger.Handle(ctx, handleInput())
	_, _ = trap.Decide(ctx, decideInput("panic", `{}`))

	for _, c := range []struct {
		name, plugin, version, call string
		want                        float64
	}{
		{"factline_plugin_calls_total", "ledger", "1.0.0", "decide", 3},
		{"factline_plugin_errors_total", "ledger", "1.0.0", "decide", 1},
		{"factline_plugin_calls_total", "ledger", "1.0.0", "handle", 1},
		{"factline_plugin_errors_total", "ledger", "1.0.0", "handle", 1},
		{"factline_plugin_traps_total", "ledger", "1.0.0", "decide", 0},
		{"factline_plugin_call_duration_seconds", "ledger", "1.0.0", "decide", 3},
		{"factline_plugin_traps_total", "trap", "0.1.0", "decide", 1},
		{"factline_plugin_timeouts_total", "trap", "0.1.0", "decide", 0},
	} {
		if v, ok := series(t, reg, c.name, c.plugin, c.version, c.call); !ok || v != c.want {
			t.Errorf("%s{%s,%s,%s} = %v (present %v), want %v", c.name, c.plugin, c.version, c.call, v, ok, c.want)
		}
	}
	// Closing the last copy of a version deletes its series.
	if err := ledger.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := series(t, reg, "factline_plugin_calls_total", "ledger", "1.0.0", "decide"); ok {
		t.Error("the series of a closed plugin remain")
	}
	if _, ok := series(t, reg, "factline_plugin_traps_total", "trap", "0.1.0", "decide"); !ok {
		t.Error("the series of an open plugin went away")
	}
}
