//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/wasm"
	"github.com/factline/factline/internal/host/wasm/wasmtest"
	"github.com/factline/factline/sdk/abi"
)

// Targets of issue 4 for a pooled decide step with the deadline on.
const (
	wasmTargetP50      = 50 * time.Microsecond
	wasmTargetP99      = 250 * time.Microsecond
	wasmTargetPerCore  = 20_000 // calls/s
	wasmTargetWarmLoad = 100 * time.Millisecond
)

// wasmDecide is the measured call: a deposit on the test ledger.
func wasmDecide() abi.DecideInput {
	return abi.DecideInput{
		Command: "deposit",
		Entity:  abi.EntityRef{ID: "acct-0042", Type: "account", TenantID: "tenant-bench", Version: 17},
		State:   json.RawMessage(`{"balance":"1250.40","facts":16,"currency":"EUR","totals":{"deposit":"1300.40","charge":"50.00"}}`),
		Input:   json.RawMessage(`{"amount":"12.50","currency":"EUR","note":"invoice 2026-118"}`),
		Now:     1764000000000,
	}
}

// wasmNativeDeposit is the guest's decide step as a plain Go function: decode
// the input, check the amount and the currency, emit one fact.
func wasmNativeDeposit(in abi.DecideInput) (abi.DecideResult, error) {
	var input struct {
		Amount   json.Number `json:"amount"`
		Currency string      `json:"currency"`
	}
	if err := json.Unmarshal(in.Input, &input); err != nil {
		return abi.DecideResult{}, err
	}
	amount := string(input.Amount)
	positive, dot := false, false
	for i := 0; i < len(amount); i++ {
		switch c := amount[i]; {
		case c >= '1' && c <= '9':
			positive = true
		case c == '0':
		case c == '.' && !dot && i > 0 && i < len(amount)-1:
			dot = true
		default:
			return abi.DecideResult{}, &wasm.CallError{Status: abi.StatusBadInput, Code: "invalid_amount"}
		}
	}
	if !positive {
		return abi.DecideResult{}, &wasm.CallError{Status: abi.StatusBusinessError, Code: "non_positive_amount"}
	}
	if input.Currency == "" {
		input.Currency = "USD"
	}
	if len(input.Currency) != 3 {
		return abi.DecideResult{}, &wasm.CallError{Status: abi.StatusBadInput, Code: "invalid_currency"}
	}
	data := []byte(`{"amount":"` + amount + `","currency":"` + input.Currency + `"}`)
	return abi.DecideResult{
		Facts:  []abi.NewFact{{Type: "deposit", Subtype: "manual", Data: data}},
		Result: json.RawMessage(`{"plugin_version":"native"}`),
	}, nil
}

// wasmPath is one way of running the decide step.
type wasmPath struct {
	Name     string
	Deadline string // "on", "off" or "—"
	call     func(context.Context) error
	plugin   *wasm.Plugin
	lat      []time.Duration
	P50, P99 time.Duration
	// throughput
	Rate     float64 // calls/s with Workers goroutines
	Cores    float64 // CPU the bench process used meanwhile, in cores
	Workers  int
	Failures int64
}

// PerCPU is calls per CPU-second of the bench process: what one fully
// used core does, whatever else the machine was running.
func (p *wasmPath) PerCPU() float64 {
	if p.Cores <= 0 {
		return 0
	}
	return p.Rate / p.Cores
}

// wasmReport is what TestWasmPlugins measured.
type wasmReport struct {
	Date         time.Time
	Uname, CPU   string
	Mem          string
	Cores, Procs int
	GoVersion    string
	ModuleBytes  [2]int // scanner, encoding/json

	Paths      []*wasmPath
	Throughput []*wasmPath

	ColdLoads, WarmLoads []time.Duration

	InstHeap, InstRSS float64 // bytes per idle instance
	InstN             int

	Replacements uint64 // instances made during the measured calls
	OtherCores   []wasmNoiseSample
	Failures     []string
}

type wasmNoiseSample struct {
	Phase  string
	Before float64 // busy cores just before the phase (after waiting for quiet)
	Cores  float64 // busy cores outside this process during the phase
}

// wasmQuietCores and wasmQuietWait: before each phase the bench waits up
// to wasmQuietWait (BENCH_QUIET_WAIT) for the machine's busy cores to drop
// below wasmQuietCores.
const wasmQuietCores = 0.2

func wasmQuietWait() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("BENCH_QUIET_WAIT")); err == nil && d >= 0 {
		return d
	}
	return 20 * time.Second
}

// wasmWaitQuiet samples the machine's load over 1 s windows until it drops
// below wasmQuietCores or the wait is over, and returns the last sample.
func wasmWaitQuiet(ctx context.Context) float64 {
	deadline := time.Now().Add(wasmQuietWait())
	for {
		b0, _, err0 := hostCPU()
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(time.Second):
		}
		b1, _, err1 := hostCPU()
		if err0 != nil || err1 != nil {
			return -1
		}
		busy := float64(b1-b0) / float64(time.Since(t0))
		if busy < wasmQuietCores || time.Now().After(deadline) {
			return busy
		}
	}
}

// noise waits for a quiet machine, then measures how many cores the rest
// of the machine kept busy while fn ran.
func (r *wasmReport) noise(ctx context.Context, phase string, fn func()) {
	before := wasmWaitQuiet(ctx)
	b0, a0, err0 := hostCPU()
	s0 := wasmSelfCPU()
	t0 := time.Now()
	fn()
	wall := time.Since(t0)
	b1, a1, err1 := hostCPU()
	s1 := wasmSelfCPU()
	if err0 != nil || err1 != nil || a1 <= a0 || wall <= 0 {
		return
	}
	other := float64((b1-b0)-(s1-s0)) / float64(wall)
	r.OtherCores = append(r.OtherCores, wasmNoiseSample{phase, before, max(other, 0)})
}

func wasmSelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestWasmPlugins measures the WebAssembly plugin host (internal/host/wasm) and
// writes the wasm section of RESULTS.md: warm decide latency with the
// per-call deadline on and off, against the same logic compiled natively;
// calls/s on every core; cold and cached load times; memory per idle
// instance.
func TestWasmPlugins(t *testing.T) {
	ctx := t.Context()
	r := &wasmReport{
		Date: time.Now().UTC(), CPU: procField("/proc/cpuinfo", "model name"), Mem: procField("/proc/meminfo", "MemTotal"),
		Cores: runtime.NumCPU(), Procs: runtime.GOMAXPROCS(0), GoVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		r.Uname = utsString(u.Sysname[:]) + " " + utsString(u.Release[:]) + " " + utsString(u.Machine[:])
	}

	paths, err := wasmtest.Build(ctx, wasmtest.Guest{Name: "ledger"}, wasmtest.Guest{Name: "ledger", Tags: "jsondecode"})
	if err != nil {
		t.Fatal(err)
	}
	bins, err := wasmtest.Read(paths)
	if err != nil {
		t.Fatal(err)
	}
	scanWasm, jsonWasm := bins[0], bins[1]
	r.ModuleBytes = [2]int{len(scanWasm), len(jsonWasm)}

	r.measureLoads(t, scanWasm)

	// Hosts for the call measurements share a cache directory kept between
	// runs, so only the first run compiles.
	cacheDir := filepath.Join(os.TempDir(), "factline-wasm-bench-cache")
	newHost := func(disable bool) *wasm.Host {
		h, err := wasm.NewHost(wasm.Options{CacheDir: cacheDir, DisableDeadline: disable})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close(context.Background()) })
		return h
	}
	load := func(h *wasm.Host, b []byte) *wasm.Plugin {
		p, err := h.Load(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	on, off := newHost(false), newHost(true)
	in := wasmDecide()
	pluginCall := func(p *wasm.Plugin) func(context.Context) error {
		return func(ctx context.Context) error {
			res, err := p.Decide(ctx, in)
			if err == nil && len(res.Facts) != 1 {
				err = fmt.Errorf("%d facts", len(res.Facts))
			}
			return err
		}
	}
	path := func(name, deadline string, p *wasm.Plugin) *wasmPath {
		return &wasmPath{Name: name, Deadline: deadline, plugin: p, call: pluginCall(p)}
	}
	scanOn, scanOff := path("wasm, scanner decode", "on", load(on, scanWasm)), path("wasm, scanner decode", "off", load(off, scanWasm))
	jsonOn, jsonOff := path("wasm, encoding/json decode", "on", load(on, jsonWasm)), path("wasm, encoding/json decode", "off", load(off, jsonWasm))
	native := &wasmPath{Name: "native Go function", Deadline: "—", call: func(context.Context) error {
		_, err := wasmNativeDeposit(in)
		return err
	}}
	r.Paths = []*wasmPath{scanOn, scanOff, jsonOn, jsonOff, native}

	// The two guests must agree before their speed is compared.
	a, err := scanOn.plugin.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jsonOn.plugin.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Facts[0].Data) != string(b.Facts[0].Data) || a.Facts[0].Type != b.Facts[0].Type {
		t.Fatalf("the guests disagree: %s vs %s", a.Facts[0].Data, b.Facts[0].Data)
	}

	before := map[*wasm.Plugin]uint64{}
	for _, p := range r.Paths {
		if p.plugin != nil {
			before[p.plugin] = p.plugin.Stats().Replacements
		}
	}
	r.noise(ctx, "latency", func() { r.measureLatency(t, ctx) })
	// One goroutine per core is "both cores"; the pool size (two per core)
	// adds Go-level time slicing between guest calls, shown for comparison.
	procs := runtime.GOMAXPROCS(0)
	r.Throughput = []*wasmPath{
		{Name: scanOn.Name, Deadline: "on", call: scanOn.call, plugin: scanOn.plugin, Workers: procs},
		{Name: scanOn.Name, Deadline: "on", call: scanOn.call, plugin: scanOn.plugin, Workers: 2 * procs},
		{Name: scanOff.Name, Deadline: "off", call: scanOff.call, plugin: scanOff.plugin, Workers: procs},
		{Name: native.Name, Deadline: "—", call: native.call, Workers: procs},
	}
	for _, p := range r.Throughput {
		r.noise(ctx, fmt.Sprintf("throughput (%s, deadline %s, %d goroutines)", p.Name, p.Deadline, p.Workers), func() {
			p.measureRate(ctx, p.Workers, wasmDuration())
		})
		if p.Failures > 0 {
			t.Logf("%s (deadline %s, %d goroutines): %d calls failed", p.Name, p.Deadline, p.Workers, p.Failures)
		}
	}
	for _, p := range r.Paths {
		if p.plugin != nil {
			r.Replacements += p.plugin.Stats().Replacements - before[p.plugin]
		}
	}
	r.measureInstanceMemory(t, scanWasm, cacheDir)

	r.evaluate()
	for _, f := range r.Failures {
		t.Errorf("target missed: %s", f)
	}
	md := r.markdown()
	t.Log("\n" + md)
	if err := updateSection("RESULTS.md", "wasm", md); err != nil {
		t.Errorf("write RESULTS.md: %v", err)
	}
}

// wasmDuration is the throughput window (BENCH_DURATION overrides 3s).
func wasmDuration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("BENCH_DURATION")); err == nil && d > 0 {
		return d
	}
	return 3 * time.Second
}

// measureLoads times Load in a fresh host: without a compilation cache (a
// full compile), then with a disk cache filled by an earlier host.
func (r *wasmReport) measureLoads(t *testing.T, module []byte) {
	ctx := t.Context()
	dir := t.TempDir()
	one := func(cacheDir string) time.Duration {
		h, err := wasm.NewHost(wasm.Options{CacheDir: cacheDir})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = h.Close(context.Background()) }()
		start := time.Now()
		if _, err := h.Load(ctx, module); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	r.noise(ctx, "loads without cache", func() {
		for range 3 {
			r.ColdLoads = append(r.ColdLoads, one(""))
		}
	})
	one(dir) // fills the disk cache
	r.noise(ctx, "cached loads", func() {
		for range 7 {
			r.WarmLoads = append(r.WarmLoads, one(dir))
		}
	})
}

// measureLatency runs the paths in interleaved rounds (so a noisy moment
// hurts every path alike) after a warm-up, one call at a time.
func (r *wasmReport) measureLatency(t *testing.T, ctx context.Context) {
	const rounds = 20
	perRound := func(p *wasmPath) int {
		if p.Name == "wasm, encoding/json decode" {
			return 100
		}
		return 2000
	}
	for _, p := range r.Paths {
		for range perRound(p) / 4 {
			if err := p.call(ctx); err != nil {
				t.Fatalf("%s warm-up: %v", p.Name, err)
			}
		}
	}
	for range rounds {
		for _, p := range r.Paths {
			n := perRound(p)
			for range n {
				start := time.Now()
				err := p.call(ctx)
				p.lat = append(p.lat, time.Since(start))
				if err != nil {
					t.Fatalf("%s: %v", p.Name, err)
				}
			}
		}
	}
	for _, p := range r.Paths {
		slices.Sort(p.lat)
		p.P50 = p.lat[len(p.lat)/2]
		p.P99 = p.lat[len(p.lat)*99/100]
	}
}

// measureRate runs workers goroutines calling without pause for d.
func (p *wasmPath) measureRate(ctx context.Context, workers int, d time.Duration) {
	p.Workers = workers
	var calls, failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := p.call(ctx); err != nil {
					failures.Add(1)
				}
				calls.Add(1)
			}
		})
	}
	time.Sleep(d / 5) // warm-up
	c0, t0, cpu0 := calls.Load(), time.Now(), wasmSelfCPU()
	time.Sleep(d) // the measured window, not ordering
	c1, t1, cpu1 := calls.Load(), time.Now(), wasmSelfCPU()
	close(stop)
	wg.Wait()
	p.Rate = float64(c1-c0) / t1.Sub(t0).Seconds()
	p.Cores = float64(cpu1-cpu0) / float64(t1.Sub(t0))
	p.Failures = failures.Load()
}

// measureInstanceMemory loads the module twice, with 1 and with 17
// instances, and attributes the difference to the 16 extra idle
// instances.
func (r *wasmReport) measureInstanceMemory(t *testing.T, module []byte, cacheDir string) {
	const extra = 16
	measure := func(pool int) (heap, rss float64) {
		h, err := wasm.NewHost(wasm.Options{CacheDir: cacheDir, PoolSize: pool})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = h.Close(context.Background()) }()
		h0, r0 := wasmMemNow()
		if _, err := h.Load(t.Context(), module); err != nil {
			t.Fatal(err)
		}
		h1, r1 := wasmMemNow()
		return h1 - h0, r1 - r0
	}
	h1, r1 := measure(1)
	h17, r17 := measure(1 + extra)
	r.InstN = extra
	r.InstHeap = (h17 - h1) / extra
	r.InstRSS = (r17 - r1) / extra
}

// wasmMemNow returns the live Go heap after a collection and the resident set
// size, in bytes.
func wasmMemNow() (heap, rss float64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	v := procField("/proc/self/status", "VmRSS")
	kb, _ := strconv.ParseFloat(strings.TrimSuffix(v, " kB"), 64)
	return float64(ms.HeapAlloc), kb * 1024
}
