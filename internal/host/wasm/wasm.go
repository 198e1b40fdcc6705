package wasm

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factline/factline/internal/pluginrt"
	"github.com/factline/factline/sdk/abi"
)

// The runtime's types, under the names the gateway has always used.
type (
	Host      = pluginrt.Host
	Plugin    = pluginrt.Plugin
	Registry  = pluginrt.Registry
	Info      = pluginrt.Info
	Stats     = pluginrt.Stats
	LoadError = pluginrt.LoadError
	CallError = pluginrt.CallError
	TrapError = pluginrt.TrapError
)

// Errors of the runtime.
var (
	ErrClosed       = pluginrt.ErrClosed
	ErrInvalidInput = pluginrt.ErrInvalidInput
	ErrNoPrevious   = pluginrt.ErrNoPrevious
)

// Unrecorded returns a context whose plugin calls are not counted in the
// plugins' statistics and metrics (the host's own checks).
func Unrecorded(ctx context.Context) context.Context { return pluginrt.Unrecorded(ctx) }

// ValidPluginName reports whether name can name a plugin: a lowercase
// letter, then up to 63 lowercase letters, digits, _ or -.
func ValidPluginName(name string) bool { return pluginrt.ValidPluginName(name) }

// MaxOutputBytes is the largest output a call may return (sdk/ABI.md).
const MaxOutputBytes = pluginrt.MaxOutputBytes

// Options configure a Host: those of pluginrt.Options, and the registry of
// the metrics. The zero value is usable: every field has a default.
type Options struct {
	// CacheDir is the directory of wazero's compilation cache on disk
	// (empty: in memory only).
	CacheDir string
	// MemoryLimitMiB caps the linear memory of each instance (default 64,
	// at least 8, at most 4096).
	MemoryLimitMiB int
	// CallTimeout is the CPU-time budget of one call (default 100ms), with
	// a wall-clock cap of 10 budgets.
	CallTimeout time.Duration
	// PoolSize is the number of instances kept per loaded plugin version
	// (default 2*GOMAXPROCS, at most 1024).
	PoolSize int
	// DisableDeadline runs calls without a deadline. Benchmarks only.
	DisableDeadline bool
	// Logger receives the host's own messages and the guests' log lines
	// (default: discard).
	Logger *slog.Logger
	// Registerer receives the per-plugin metrics (nil: none).
	Registerer prometheus.Registerer
}

// NewHost checks opts, applies the defaults, registers the metrics (once
// per registry) and opens the compilation cache.
func NewHost(opts Options) (*Host, error) {
	ro := pluginrt.Options{
		CacheDir:        opts.CacheDir,
		MemoryLimitMiB:  opts.MemoryLimitMiB,
		CallTimeout:     opts.CallTimeout,
		PoolSize:        opts.PoolSize,
		DisableDeadline: opts.DisableDeadline,
		Logger:          opts.Logger,
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("wasm: register metrics: %w", err)
	}
	if m != nil {
		ro.Observer = m
	}
	return pluginrt.NewHost(ro)
}

// NewRegistry returns an empty registry loading through h.
func NewRegistry(h *Host) *Registry { return pluginrt.NewRegistry(h) }

// StatusName names an ABI status: "business_error", "bad_input",
// "unknown_command", "unsupported", "panic" (and "ok").
func StatusName(s abi.Status) string { return pluginrt.StatusName(s) }
