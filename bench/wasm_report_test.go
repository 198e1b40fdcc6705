//go:build bench

package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// wasmNoisyCores: above this many busy cores outside the bench process,
// the report warns that the machine was not quiet.
const wasmNoisyCores = 0.15

func (r *wasmReport) path(name, deadline string) *wasmPath {
	for _, p := range r.Paths {
		if p.Name == name && p.Deadline == deadline {
			return p
		}
	}
	return nil
}

func wasmMedian(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func (r *wasmReport) evaluate() {
	on := r.path("wasm, scanner decode", "on")
	if on.P50 >= wasmTargetP50 {
		r.Failures = append(r.Failures, fmt.Sprintf("decide p50 %s with the deadline on, target < %s", wasmMicros(on.P50), wasmMicros(wasmTargetP50)))
	}
	if on.P99 >= wasmTargetP99 {
		r.Failures = append(r.Failures, fmt.Sprintf("decide p99 %s with the deadline on, target < %s", wasmMicros(on.P99), wasmMicros(wasmTargetP99)))
	}
	if perCore := r.Throughput[0].PerCPU(); perCore < wasmTargetPerCore {
		r.Failures = append(r.Failures, fmt.Sprintf("%.0f calls per CPU-second with the deadline on, target >= %d", perCore, wasmTargetPerCore))
	}
	if p := r.Throughput[0]; p.Failures > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d calls failed in the throughput run (%s, deadline %s, %d goroutines)",
			p.Failures, p.Name, p.Deadline, p.Workers))
	}
	if m := wasmMedian(r.WarmLoads); m >= wasmTargetWarmLoad {
		r.Failures = append(r.Failures, fmt.Sprintf("cached load %s (median), target < %s", wasmMillis(m), wasmMillis(wasmTargetWarmLoad)))
	}
}

func wasmMicros(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	if us < 10 {
		return fmt.Sprintf("%.2f µs", us)
	}
	return fmt.Sprintf("%.1f µs", us)
}

func wasmMillis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms < 100 {
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

func wasmVerdict(ok bool) string {
	if ok {
		return "**PASS**"
	}
	return "**FAIL**"
}

func (r *wasmReport) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	on := r.path("wasm, scanner decode", "on")
	off := r.path("wasm, scanner decode", "off")
	jsonOn := r.path("wasm, encoding/json decode", "on")
	jsonOff := r.path("wasm, encoding/json decode", "off")
	native := r.path("native Go function", "—")

	w("## WebAssembly plugins (internal/host/wasm)\n\n")
	w("Written by `TestWasmPlugins` (`bash bench/run.sh -run TestWasmPlugins`) on %s.\n\n", r.Date.Format("2006-01-02 15:04 MST"))
	w("| Machine | |\n|---|---|\n")
	w("| Kernel | `%s` |\n| CPU | %s, %d cores (GOMAXPROCS %d) |\n| Memory | %s |\n| Go | %s, wazero v1.12 (compiler) |\n\n",
		r.Uname, r.CPU, r.Cores, r.Procs, r.Mem, r.GoVersion)
	w("The guest is `internal/host/wasm/testdata/guests/ledger` (Go, `GOOS=wasip1 -buildmode=c-shared`, %.1f MB), "+
		"the measured call `Plugin.Decide` of its `deposit` command on an entity with a small state: the host encodes the "+
		"input, takes an instance from the pool, calls `factline_alloc` and `factline_decide`, decodes the result, gives "+
		"the instance back. The guest reads `input.amount` and `input.currency`, checks them and emits one fact. "+
		"\"scanner decode\" reads the input with the test kit's small JSON scanner; \"encoding/json decode\" is the same "+
		"guest built with `-tags jsondecode` (%.1f MB): the whole input decoded into the ABI's types and the result "+
		"encoded with encoding/json. The native row is the same step as a plain Go function on the decoded input. "+
		"\"deadline on\" is the product's setting (per-call `context.WithTimeout` and wazero's close-on-context-done); "+
		"\"off\" is `Options.DisableDeadline`, for comparison only.\n\n",
		float64(r.ModuleBytes[0])/1e6, float64(r.ModuleBytes[1])/1e6)

	w("### Warm call latency, one call at a time\n\n")
	w("%d rounds, each path in turn, after a warm-up; %s calls per path for the scanner and native rows, %s for encoding/json.\n\n",
		20, formatInt(int64(len(on.lat))), formatInt(int64(len(jsonOn.lat))))
	w("| Path | Deadline | p50 | p99 | vs native (p50) | Target | Result |\n|---|---|---:|---:|---:|---|---|\n")
	for _, p := range r.Paths {
		target, result := "—", "—"
		if p == on {
			target = fmt.Sprintf("p50 < %s, p99 < %s", wasmMicros(wasmTargetP50), wasmMicros(wasmTargetP99))
			result = wasmVerdict(p.P50 < wasmTargetP50 && p.P99 < wasmTargetP99)
		}
		w("| %s | %s | %s | %s | %.1f× | %s | %s |\n", p.Name, p.Deadline, wasmMicros(p.P50), wasmMicros(p.P99),
			float64(p.P50)/float64(native.P50), target, result)
	}
	w("\nThe deadline costs %s per call at p50 for the scanner guest (%s on, %s off) and %s for the encoding/json "+
		"guest (%s on, %s off): decoding with encoding/json makes the step %.0f× slower with the deadline on.\n\n",
		wasmMicros(on.P50-off.P50), wasmMicros(on.P50), wasmMicros(off.P50), wasmMicros(jsonOn.P50-jsonOff.P50),
		wasmMicros(jsonOn.P50), wasmMicros(jsonOff.P50), float64(jsonOn.P50)/float64(on.P50))

	w("### Throughput on every core\n\n")
	w("Goroutines calling without pause for %s after a warm-up: one per core, and for comparison as many as the "+
		"default pool (two per core), where Go time-slices guest calls against each other. \"cores used\" is the bench "+
		"process's CPU time over the window; \"per core\" divides the calls by it, so it reads the same whether or not "+
		"other processes took a share of the two cores.\n\n", wasmDuration())
	w("| Path | Deadline | goroutines | calls/s | cores used | per core | failed calls | Target | Result |\n" +
		"|---|---|---:|---:|---:|---:|---:|---|---|\n")
	for i, p := range r.Throughput {
		target, result := "—", "—"
		if i == 0 {
			target = fmt.Sprintf("≥ %s per core, none failed", formatInt(wasmTargetPerCore))
			result = wasmVerdict(p.PerCPU() >= wasmTargetPerCore && p.Failures == 0)
		}
		w("| %s | %s | %d | %s | %.2f | %s | %d | %s | %s |\n", p.Name, p.Deadline, p.Workers, formatInt(int64(p.Rate)), p.Cores,
			formatInt(int64(p.PerCPU())), p.Failures, target, result)
	}
	for _, p := range r.Throughput {
		if p.Failures > 0 {
			w("\nFailed calls are calls stopped at their 100 ms deadline: the deadline is wall-clock time, and a call whose " +
				"thread waits that long for a CPU (other processes, or other guest calls time-sliced against it) is " +
				"stopped like a runaway guest and its instance replaced.\n")
			break
		}
	}
	w("\nInstances made while calls were measured: %d. Instances are made at load and, to replace one discarded "+
		"after a trap or a timeout, in the background: a call never instantiates; at worst it waits for a free "+
		"instance.\n\n", r.Replacements)

	w("### Load and memory\n\n")
	w("`Host.Load` of the scanner guest in a new host: compile, check exports and ABI version, instantiate the pool "+
		"(%d instances, GOMAXPROCS at a time), describe.\n\n", 2*r.Procs)
	w("| Load | median | min | max | runs | Target | Result |\n|---|---:|---:|---:|---:|---|---|\n")
	mm := func(ds []time.Duration) (time.Duration, time.Duration, time.Duration) {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2], s[0], s[len(s)-1]
	}
	m, lo, hi := mm(r.ColdLoads)
	w("| no compilation cache (full compile) | %s | %s | %s | %d | — | — |\n", wasmMillis(m), wasmMillis(lo), wasmMillis(hi), len(r.ColdLoads))
	m, lo, hi = mm(r.WarmLoads)
	w("| disk cache filled by an earlier host | %s | %s | %s | %d | < %s | %s |\n\n", wasmMillis(m), wasmMillis(lo), wasmMillis(hi),
		len(r.WarmLoads), wasmMillis(wasmTargetWarmLoad), wasmVerdict(m < wasmTargetWarmLoad))
	w("Host memory per idle instance (a pool of %d against a pool of 1, after garbage collection): %.1f MiB of Go heap, "+
		"%.1f MiB resident. The guest's linear memory is a Go byte slice (wazero's default allocator), so it counts in the "+
		"host's heap; a 64 MiB cap bounds each instance.\n\n", r.InstN+1, r.InstHeap/(1<<20), r.InstRSS/(1<<20))

	w("Machine load outside the bench process, in busy cores (from /proc/stat, minus this process's CPU during the "+
		"phase). Before each phase the run waits up to %s for the machine to drop below %.1f busy cores.\n\n", wasmQuietWait(), wasmQuietCores)
	w("| Phase | busy just before | other processes during |\n|---|---:|---:|\n")
	var noisy []string
	for _, n := range r.OtherCores {
		w("| %s | %.2f | %.2f |\n", n.Phase, n.Before, n.Cores)
		if n.Cores > wasmNoisyCores {
			noisy = append(noisy, n.Phase)
		}
	}
	w("\n")
	if len(noisy) > 0 {
		w("**Caution:** other processes used more than %.2f cores during %s; the machine was not quiet and those "+
			"figures understate what it can do (tails most of all).\n\n", wasmNoisyCores, strings.Join(noisy, ", "))
	}
	if len(r.Failures) > 0 {
		w("Targets missed:\n\n")
		for _, f := range r.Failures {
			w("- %s\n", f)
		}
		w("\n")
	}
	w("Reproduce with `bash bench/run.sh -run TestWasmPlugins` (`BENCH_DURATION` sets the throughput window).\n")
	return b.String()
}
