// Package wasm is the gateway's plugin runtime: the module runner of
// internal/pluginrt (loading, the sandbox and its limits, calls on pools of
// instances, traps, hot swap; see its package documentation) with the
// gateway's Prometheus metrics on top.
//
//	h, err := wasm.NewHost(wasm.Options{CacheDir: dir, Registerer: reg, Logger: log})
//	reg := wasm.NewRegistry(h)
//	p, err := reg.Install(ctx, wasmBytes, smokeTest) // *LoadError lists every reason
//	p, ok := reg.Get("account")                       // lock-free
//	res, err := p.Decide(ctx, abi.DecideInput{...})   // *CallError, *TrapError
//
// The runner lives outside host/ so that the SDK's conformance kit runs a
// module exactly as the gateway does without importing the gateway, its
// metrics or their dependencies (docs/decisions.md).
//
// # Metrics
//
// With Options.Registerer, factline_plugin_{calls,errors,traps,timeouts,
// canceled}_total and factline_plugin_call_duration_seconds, labelled
// plugin, version and call, registered once per host; the series of a
// version are deleted when its last loaded copy closes. Plugin.Stats gives
// the same counts and p50/p99 without Prometheus.
package wasm
