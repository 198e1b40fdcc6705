// Package pluginrt is the host side of the Factline plugin ABI (sdk/ABI.md):
// it compiles WebAssembly plugins with wazero, checks them, runs their
// calls on pools of instances under the gateway's limits, and swaps
// versions under load. The gateway uses it through internal/host/wasm, which adds
// Prometheus metrics (through Options.Observer); the SDK's conformance kit
// uses it directly, so a module that passes conformance is one the gateway
// accepts. It imports no metrics library and no gateway code.
//
//	h, err := pluginrt.NewHost(pluginrt.Options{CacheDir: dir, Logger: log})
//	reg := pluginrt.NewRegistry(h)
//	p, err := reg.Install(ctx, wasmBytes, smokeTest) // *LoadError lists every reason
//	p, ok := reg.Get("account")                       // lock-free
//	res, err := p.Decide(ctx, abi.DecideInput{...})   // *CallError, *TrapError
//
// # Loading
//
// Host.Load compiles a module in a wazero runtime of its own (closing a
// compiled module can break another compiled from the same bytes in the
// same runtime, wazero issue 2336), sharing compiled code through the
// host's compilation cache, in memory or on disk (Options.CacheDir). It
// refuses, with every reason at once, a module that imports anything but
// WASI and factline.log, lacks an export of the ABI or has the wrong
// signature, answers factline_abi_version with another version, or whose
// describe document breaks a rule (name, semantic version, kind, entity
// types or handlers, well-formed commands with unique routes that do not
// shadow /facts, read-only GETs). A load makes one instance, which
// answers describe and serves calls at once; the rest of the pool is made
// in the background, so a load costs one instantiation.
//
// # The sandbox
//
// Each instance gets: its linear memory capped (Options.MemoryLimitMiB);
// no filesystem, no network, no environment but GOMEMLIMIT (the cap minus
// 8 MiB, so a Go guest collects before it hits the cap); one argument,
// the program name "factline-plugin"; real clocks (Go's scheduler and
// collector need them, determinism comes from the input's now);
// crypto/rand; stdout and stderr captured per call (2 KiB, reported with
// a trap); the host function factline.log(level, ptr, len), cut at 1 KiB
// per line and limited to 100 lines per second per plugin version (burst
// 200). Go guests are reactors: _initialize is the start function.
//
// # Calls and the pool
//
// A call encodes its input by hand (compact JSON, small fields first and
// the state last), takes an instance from the plugin's pool (a buffered
// channel; it waits, bounded by the caller's context, when all are busy),
// calls factline_alloc then the export with cached function handles and a
// reused parameter stack, reads the framed output straight from guest
// memory while it still holds the instance, and gives the instance back.
// Instances are made at load and, after a trap, in the background: never
// on the request path.
//
// Every call runs under a budget (Options.CallTimeout, default 100ms) of
// CPU time: the calling goroutine is locked to its thread for the call and
// a timer reads the thread's CPU clock, so a call waiting for a core on a
// loaded machine is not stopped; a wall-clock cap of 10 budgets stops a
// call that never gets there. The stop is a cancel of the call's context,
// enforced by wazero's close-on-context-done, which stops a guest in any
// loop. It is costly for
// Go guests (each iteration of a wasm loop leaves native code to check
// for it, about 36 ns against 2 ns, and wazero starts a goroutine per
// exported call) and it is what keeps a plugin from hanging the host;
// Options.DisableDeadline exists for benchmarks only.
//
// # Errors and traps
//
// A guest's error reply (statuses 1-5) is a *CallError and the instance
// stays in service. Anything else that goes wrong inside a call is a
// *TrapError: a trap (an unrecovered Go panic, a runtime fatal error such
// as running out of memory at the cap, an out-of-bounds access), an ABI
// violation (a pointer out of bounds, an empty, oversized (> 4 MiB) or
// unparsable output, an unknown status), the deadline (Timeout) or the
// caller's context. The instance is discarded, because the guest's runtime
// may be corrupt, and replaced in the background (with backoff if that
// fails); only that call fails. Other plugins are not affected: each has
// its own runtime, pool and memory.
//
// # Hot swap
//
// Registry keeps the current version of each plugin in an atomic pointer.
// Install loads and checks the new version off to the side, then swaps it
// in: new calls go to it at once. Every call holds a reference on its
// version from before it takes an instance until it gives it back;
// closing the old version waits for those references to drain (bounded by
// 30 s) and then closes its runtime, in the background. A caller that
// still holds the old *Plugin after the swap is forwarded to its successor
// instead of being refused, so no call fails because of a swap. The
// previous version's bytes are kept for Rollback, which reloads them
// (through the compilation cache when CacheDir is set). A caller that
// records versions elsewhere first (the host's store) splits Install in
// two: Prepare loads and checks, Commit swaps in with the previous version
// the caller names, and Discard drops a version that was not recorded.
//
// # Observing calls
//
// Options.Observer hears of every loaded version and of each of its calls
// (call, outcome, duration); internal/host/wasm turns that into Prometheus series.
// Plugin.Stats gives the counts and p50/p99 without an Observer.
package pluginrt
