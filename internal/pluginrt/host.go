package pluginrt

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"golang.org/x/sync/errgroup"

	"github.com/factline/factline/sdk/abi"
)

// Host compiles and runs plugins. It is safe for concurrent use.
type Host struct {
	opts  Options
	cache wazero.CompilationCache

	mu      sync.Mutex
	plugins map[*Plugin]struct{}
	closed  bool
	loads   sync.WaitGroup // Loads under way; Close waits for them

	cacheOnce sync.Once

	fillMu    sync.Mutex
	fillHolds int
	fillOpen  chan struct{} // closed while no HoldFills is in force
	fillsHeld atomic.Int32  // fills waiting for fillOpen (tests)
}

// NewHost checks opts, applies the defaults and opens the compilation
// cache.
func NewHost(opts Options) (*Host, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &Host{opts: opts, plugins: map[*Plugin]struct{}{}, fillOpen: make(chan struct{})}
	close(h.fillOpen)
	if opts.CacheDir != "" {
		if h.cache, err = wazero.NewCompilationCacheWithDir(opts.CacheDir); err != nil {
			return nil, fmt.Errorf("wasm: compilation cache: %w", err)
		}
	} else {
		h.cache = wazero.NewCompilationCache()
	}
	return h, nil
}

// Close waits for Loads under way, closes every plugin the host loaded
// (each waits for its calls in flight; when ctx ends first, calls still
// waiting for an instance are refused) and then the compilation cache.
// Loads after Close fail with ErrClosed. Close is idempotent.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.loads.Wait() // a Load compiling now must not see the cache close
	h.mu.Lock()
	ps := make([]*Plugin, 0, len(h.plugins))
	for p := range h.plugins {
		ps = append(ps, p)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(ps))
	for i, p := range ps {
		wg.Go(func() { errs[i] = p.Close(ctx) })
	}
	wg.Wait()
	h.cacheOnce.Do(func() { errs = append(errs, h.cache.Close(context.WithoutCancel(ctx))) })
	return errors.Join(errs...)
}

// HoldFills keeps the background filling of loaded plugins' pools from
// starting until release is called (every hold, when several overlap):
// while a process starts, the instances beyond each plugin's first would
// only compete for the CPU with loading the other plugins, which readiness
// waits for. Calls are served meanwhile by the first instance. release is
// idempotent.
func (h *Host) HoldFills() (release func()) {
	h.fillMu.Lock()
	if h.fillHolds == 0 {
		h.fillOpen = make(chan struct{})
	}
	h.fillHolds++
	h.fillMu.Unlock()
	return sync.OnceFunc(func() {
		h.fillMu.Lock()
		if h.fillHolds--; h.fillHolds == 0 {
			close(h.fillOpen)
		}
		h.fillMu.Unlock()
	})
}

// FillsHeld reports whether a HoldFills is in force.
func (h *Host) FillsHeld() bool {
	select {
	case <-h.fillsOpen():
		return false
	default:
		return true
	}
}

// fillsOpen is closed once no HoldFills is in force.
func (h *Host) fillsOpen() <-chan struct{} {
	h.fillMu.Lock()
	defer h.fillMu.Unlock()
	return h.fillOpen
}

// waitFills waits until no HoldFills is in force; false if stop closes
// first.
func (h *Host) waitFills(stop <-chan struct{}) bool {
	open := h.fillsOpen()
	select {
	case <-open:
		return true
	default:
	}
	h.fillsHeld.Add(1)
	defer h.fillsHeld.Add(-1)
	select {
	case <-open:
		return true
	case <-stop:
		return false
	}
}

func (h *Host) forget(p *Plugin) {
	h.mu.Lock()
	delete(h.plugins, p)
	h.mu.Unlock()
}

// Load compiles wasm in a runtime of its own, checks it against the ABI
// (imports, exports, factline_abi_version, the describe document) and
// fills its instance pool. A module that fails any check is refused with a
// *LoadError listing every problem found.
//
// Each loaded version gets its own wazero runtime: closing a compiled
// module can break another one compiled from the same bytes in the same
// runtime (wazero issue 2336), and a runtime per version lets a hot swap
// close the old version without touching the new one. Compiled code is
// shared through the host's compilation cache.
func (h *Host) Load(ctx context.Context, wasm []byte) (*Plugin, error) {
	sum := sha256.Sum256(wasm)
	return h.load(ctx, wasm, hex.EncodeToString(sum[:]))
}

// load is Load of a module whose hex SHA-256 the caller has computed.
func (h *Host) load(ctx context.Context, wasm []byte, sha string) (*Plugin, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	h.loads.Add(1)
	h.mu.Unlock()
	defer h.loads.Done()
	if len(wasm) == 0 {
		return nil, &LoadError{Reasons: []string{"the module is empty"}}
	}
	p := &Plugin{
		host:     h,
		sha:      sha,
		pool:     make(chan *instance, h.opts.PoolSize),
		drained:  make(chan struct{}, 1),
		stop:     make(chan struct{}),
		force:    make(chan struct{}),
		closedCh: make(chan struct{}),
	}
	p.logger.Store(h.opts.Logger.With("plugin_sha256", p.sha[:12]))
	p.limiter = newLogLimiter(time.Now)

	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(h.cache).
		WithMemoryLimitPages(h.opts.memoryLimitPages()).
		WithCloseOnContextDone(!h.opts.DisableDeadline)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	p.rt = rt
	fail := func(reasons ...string) (*Plugin, error) {
		_ = rt.Close(context.WithoutCancel(ctx))
		return nil, &LoadError{Reasons: reasons}
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return fail("instantiate WASI: " + err.Error())
	}
	if _, err := rt.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(p.hostLog), []api.ValueType{i32, i32, i32}, nil).
		WithParameterNames("level", "ptr", "len").
		Export("log").
		Instantiate(ctx); err != nil {
		return fail("instantiate host module: " + err.Error())
	}
	start := time.Now()
	cm, err := rt.CompileModule(experimental.WithCompilationWorkers(ctx, runtime.GOMAXPROCS(0)), wasm)
	if err != nil {
		return fail("compile: " + err.Error())
	}
	p.compiled = cm
	p.compileTime = time.Since(start)
	reasons, fatal := checkModule(cm)
	if fatal {
		return fail(reasons...)
	}

	// One instance is made here: it answers factline_abi_version and
	// describe, and serves calls at once. The rest of the pool is made in
	// the background (fill), so a load, and a restart that loads every
	// plugin, waits for one instantiation rather than PoolSize of them.
	p.modCfg = h.moduleConfig()
	insts, err := p.instantiate(ctx, 1)
	if err != nil {
		return fail(append(reasons, "instantiate: "+err.Error())...)
	}
	probe := insts[0]
	ver, err := p.abiVersion(ctx, probe)
	switch {
	case err != nil:
		return fail(append(reasons, abi.ExportVersion+": "+err.Error())...)
	case ver != abi.Version:
		return fail(append(reasons, fmt.Sprintf("%s returned %d; this host supports ABI version %d", abi.ExportVersion, ver, abi.Version))...)
	}
	desc, err := p.describe(ctx, probe)
	if err != nil {
		return fail(append(reasons, "describe: "+err.Error())...)
	}
	reasons = append(reasons, checkDescription(desc)...)
	if len(reasons) > 0 {
		return fail(reasons...)
	}
	p.desc = desc
	p.label = desc.Name + "@" + desc.Version
	p.logger.Store(h.opts.Logger.With("plugin", desc.Name, "plugin_version", desc.Version, "plugin_sha256", p.sha[:12]))
	p.pool <- probe
	p.loadedAt = time.Now()
	if h.opts.Observer != nil {
		p.rec = h.opts.Observer.Loaded(desc.Name, desc.Version)
	}

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		p.recClosed()
		_ = rt.Close(context.WithoutCancel(ctx))
		return nil, ErrClosed
	}
	h.plugins[p] = struct{}{}
	h.mu.Unlock()
	p.fill(h.opts.PoolSize - 1)
	p.log().Info("plugin loaded", "kind", desc.Kind, "compile_ms", millis(p.compileTime), "load_ms", millis(time.Since(start)), "instances", h.opts.PoolSize)
	return p, nil
}

// programName is every instance's argv[0] (and its only argument). It is
// not the plugin's name: instances are made before the module describes
// itself.
const programName = "factline-plugin"

// moduleConfig is the sandbox of every instance: no filesystem, network or
// environment beyond GOMEMLIMIT, argv just a program name, real clocks (a
// Go guest's scheduler and collector need them; plugins take time from
// their input), crypto-grade random numbers, and _initialize as the start
// function of a WASI reactor. Each instance sleeps through a Sleeper of
// its own (newInstance), so that a call's deadline ends a sleep.
func (h *Host) moduleConfig() wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInit).
		WithArgs(programName).
		WithEnv("GOMEMLIMIT", h.opts.gomemlimit()).
		WithSysNanotime().
		WithSysWalltime().
		WithRandSource(rand.Reader)
}

// instantiate makes n instances, up to GOMAXPROCS at a time.
func (p *Plugin) instantiate(ctx context.Context, n int) ([]*instance, error) {
	insts := make([]*instance, n)
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range n {
		g.Go(func() error {
			var err error
			insts[i], err = p.newInstance(ctx)
			return err
		})
	}
	return insts, g.Wait()
}

// newInstance instantiates the compiled module, runs _initialize and looks
// the exports up once.
func (p *Plugin) newInstance(ctx context.Context) (*instance, error) {
	out := &capWriter{max: 2048}
	sleeper := &Sleeper{}
	cfg := p.modCfg.WithStdout(out).WithStderr(out).WithNanosleep(sleeper.Sleep)
	ictx, end := CallBudget(ctx, p.host.opts.initTimeout(), hardCapFactor*p.host.opts.initTimeout())
	sleeper.Watch(ictx)
	ictx = experimental.WithMemoryAllocator(ictx, linearMemory)
	mod, err := p.rt.InstantiateModule(ictx, p.compiled, cfg)
	_ = end()
	if err != nil {
		if s := out.String(); s != "" {
			err = fmt.Errorf("%w (guest output: %q)", err, s)
		}
		return nil, err
	}
	in := &instance{mod: mod, mem: mod.ExportedMemory("memory"), out: out, sleeper: sleeper, alloc: mod.ExportedFunction(abi.ExportAlloc)}
	for c := range numCalls {
		in.fns[c] = mod.ExportedFunction(callExports[c])
	}
	if in.mem == nil || in.alloc == nil {
		_ = mod.Close(ctx)
		return nil, errors.New("instance lacks memory or " + abi.ExportAlloc)
	}
	return in, nil
}

// logger returns the plugin's logger.
func (p *Plugin) log() *slog.Logger { return p.logger.Load() }
