package wasm

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factline/factline/internal/pluginrt"
)

// numCalls is the number of call kinds (decide, evolve, handle).
const numCalls = pluginrt.NumCalls

// metrics are the per-plugin Prometheus series of one Host, labelled
// plugin, version and call. Series are reference-counted per (plugin,
// version): two loaded copies of one version share them, and they are
// deleted when the last copy closes, so hot swaps do not grow the series
// count without bound.
type metrics struct {
	calls, errors, traps, timeouts, canceled *prometheus.CounterVec
	latency                                  *prometheus.HistogramVec

	mu   sync.Mutex
	refs map[[2]string]int
}

// callMetrics are the resolved series of one plugin version and call, so a
// call does no label lookups.
type callMetrics struct {
	calls, errors, traps, timeouts, canceled prometheus.Counter
	latency                                  prometheus.Observer
}

var labels = []string{"plugin", "version", "call"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "factline", Subsystem: "plugin", Name: name, Help: help,
		}, labels)
	}
	m := &metrics{
		calls:    counter("calls_total", "Calls into a plugin, whatever their outcome."),
		errors:   counter("errors_total", "Calls a plugin answered with an error reply (statuses 1-5)."),
		traps:    counter("traps_total", "Calls that trapped or broke the ABI; the instance was replaced."),
		timeouts: counter("timeouts_total", "Calls stopped at their deadline; the instance was replaced."),
		canceled: counter("canceled_total", "Calls stopped because the caller's context was canceled."),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "factline", Subsystem: "plugin", Name: "call_duration_seconds",
			Help:    "Duration of calls into a plugin, waiting for a free instance included.",
			Buckets: []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 1},
		}, labels),
		refs: map[[2]string]int{},
	}
	var err error
	m.calls, err = register(reg, m.calls)
	if err == nil {
		m.errors, err = register(reg, m.errors)
	}
	if err == nil {
		m.traps, err = register(reg, m.traps)
	}
	if err == nil {
		m.timeouts, err = register(reg, m.timeouts)
	}
	if err == nil {
		m.canceled, err = register(reg, m.canceled)
	}
	if err == nil {
		m.latency, err = register(reg, m.latency)
	}
	return m, err
}

// register registers c, or returns the collector already registered under
// its name (a second Host on the same registry shares the series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

var _ pluginrt.Observer = (*metrics)(nil)

// Loaded is the runtime's hook for a loaded version: it acquires the
// version's series.
func (m *metrics) Loaded(plugin, version string) pluginrt.Recorder {
	return &versionMetrics{m: m, plugin: plugin, version: version, series: m.acquire(plugin, version)}
}

// versionMetrics records the calls of one loaded version.
type versionMetrics struct {
	m               *metrics
	plugin, version string
	series          *[numCalls]callMetrics
	once            sync.Once
}

func (v *versionMetrics) Record(c pluginrt.Call, o pluginrt.Outcome, d time.Duration) {
	m := &v.series[c]
	m.calls.Inc()
	switch o {
	case pluginrt.OutcomeError:
		m.errors.Inc()
	case pluginrt.OutcomeTrap:
		m.traps.Inc()
	case pluginrt.OutcomeTimeout:
		m.timeouts.Inc()
	case pluginrt.OutcomeCanceled:
		m.canceled.Inc()
	}
	m.latency.Observe(d.Seconds())
}

func (v *versionMetrics) Closed() { v.once.Do(func() { v.m.release(v.plugin, v.version) }) }

// acquire returns the series of a plugin version, one per call kind.
func (m *metrics) acquire(plugin, version string) *[numCalls]callMetrics {
	m.mu.Lock()
	m.refs[[2]string{plugin, version}]++
	m.mu.Unlock()
	var cm [numCalls]callMetrics
	for c := range numCalls {
		lv := []string{plugin, version, c.String()}
		cm[c] = callMetrics{
			calls:    m.calls.WithLabelValues(lv...),
			errors:   m.errors.WithLabelValues(lv...),
			traps:    m.traps.WithLabelValues(lv...),
			timeouts: m.timeouts.WithLabelValues(lv...),
			canceled: m.canceled.WithLabelValues(lv...),
			latency:  m.latency.WithLabelValues(lv...),
		}
	}
	return &cm
}

// release drops a reference taken by acquire and deletes the series with
// the last one.
func (m *metrics) release(plugin, version string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{plugin, version}
	if m.refs[k]--; m.refs[k] > 0 {
		return
	}
	delete(m.refs, k)
	for c := range numCalls {
		lv := []string{plugin, version, c.String()}
		m.calls.DeleteLabelValues(lv...)
		m.errors.DeleteLabelValues(lv...)
		m.traps.DeleteLabelValues(lv...)
		m.timeouts.DeleteLabelValues(lv...)
		m.canceled.DeleteLabelValues(lv...)
		m.latency.DeleteLabelValues(lv...)
	}
}
