package conformance

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/factline/factline/internal/pluginrt"
	"github.com/factline/factline/sdk/abi"
)

// probe is one instance of the module, run outside the host's pool for
// the checks that need raw bytes or the instance's memory size. It is
// configured as internal/host/wasm configures its instances: a WASI reactor with
// real clocks, no filesystem or network, GOMEMLIMIT below the memory cap,
// close-on-context-done and the same call deadline.
type probe struct {
	rt      wazero.Runtime
	cm      wazero.CompiledModule
	cfg     wazero.ModuleConfig
	timeout time.Duration
	wallCap time.Duration
	mod     api.Module
	out     *capture
	// sleeper ends the guest's sleeps when a call's budget runs out.
	sleeper *pluginrt.Sleeper
	// lastMemory is the memory size of the last instance discarded.
	lastMemory uint32
}

// capture keeps the start of what the guest writes to stdout and stderr.
type capture struct{ buf []byte }

func (c *capture) Write(p []byte) (int, error) {
	if room := 2048 - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func newProbe(ctx context.Context, module []byte, opts Options, cache wazero.CompilationCache) (*probe, error) {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithMemoryLimitPages(uint32(opts.Host.MemoryLimitMiB)*16).
		WithCloseOnContextDone(true))
	p := &probe{rt: rt, timeout: opts.Host.CallTimeout, wallCap: opts.Host.WallCap, out: &capture{}, sleeper: &pluginrt.Sleeper{}}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	if _, err := rt.NewHostModuleBuilder(abi.HostModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}),
			[]api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).
		Export("log").Instantiate(ctx); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	cm, err := rt.CompileModule(ctx, module)
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	p.cm = cm
	limit := max(opts.Host.MemoryLimitMiB-8, opts.Host.MemoryLimitMiB*3/4)
	p.cfg = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInit).
		WithArgs("factline-plugin").
		WithEnv("GOMEMLIMIT", fmt.Sprintf("%dMiB", limit)).
		WithSysNanotime().WithSysWalltime().WithNanosleep(p.sleeper.Sleep).
		WithRandSource(rand.Reader).
		WithStdout(p.out).WithStderr(p.out)
	return p, nil
}

func (p *probe) close(ctx context.Context) { _ = p.rt.Close(ctx) }

// instance returns the live instance, instantiating one when there is none
// (at first, and after a trap).
func (p *probe) instance(ctx context.Context) (api.Module, error) {
	if p.mod != nil {
		return p.mod, nil
	}
	budget := max(20*p.timeout, 2*time.Second)
	ictx, end := pluginrt.CallBudget(ctx, budget, max(p.wallCap, 10*budget))
	p.out.buf = p.out.buf[:0]
	p.sleeper.Watch(ictx)
	mod, err := p.rt.InstantiateModule(ictx, p.cm, p.cfg)
	_ = end()
	if err != nil {
		return nil, p.trap("instantiate", err)
	}
	p.mod = mod
	return mod, nil
}

// discard drops the instance after a trap, remembering its memory size.
func (p *probe) discard(ctx context.Context) {
	if p.mod != nil {
		p.lastMemory = p.mod.Memory().Size()
		_ = p.mod.Close(ctx)
		p.mod = nil
	}
}

// callError is a call that did not end in a reply.
type callError struct {
	call    string
	timeout bool
	err     error
	output  string
}

func (e *callError) Error() string {
	what := "trapped"
	if e.timeout {
		what = "did not finish within the deadline"
	}
	s := fmt.Sprintf("%s %s: %s", e.call, what, firstLine(e.err.Error()))
	if e.output != "" {
		s += fmt.Sprintf(" (guest output: %q)", firstLine(e.output))
	}
	return s
}

func (p *probe) trap(call string, err error) *callError {
	ce := &callError{call: call, err: err, output: string(p.out.buf)}
	var exit *sys.ExitError
	if errors.As(err, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled) ||
		errors.Is(err, context.DeadlineExceeded) {
		ce.timeout = true
	}
	return ce
}

// callNoInput calls an export without arguments (factline_abi_version,
// factline_describe) and returns its raw results.
func (p *probe) callNoInput(ctx context.Context, export string) ([]uint64, error) {
	mod, err := p.instance(ctx)
	if err != nil {
		return nil, err
	}
	f := mod.ExportedFunction(export)
	if f == nil {
		return nil, fmt.Errorf("the module does not export %s", export)
	}
	cctx, end := pluginrt.CallBudget(ctx, p.timeout, p.wallCap)
	defer func() { _ = end() }() // a call stopped by the budget fails with its own error
	p.out.buf = p.out.buf[:0]
	p.sleeper.Watch(cctx)
	res, err := f.Call(cctx)
	if err != nil {
		ce := p.trap(export, err)
		p.discard(ctx)
		return nil, ce
	}
	return res, nil
}

// output reads a packed (ptr, len) output: the status byte and the JSON.
func (p *probe) output(export string, packed uint64) (abi.Status, []byte, error) {
	ptr, n := abi.Unpack(packed)
	if n == 0 {
		return 0, nil, fmt.Errorf("%s returned an empty output (no status byte)", export)
	}
	b, ok := p.mod.Memory().Read(ptr, n)
	if !ok {
		return 0, nil, fmt.Errorf("%s returned an output outside memory: [%d, +%d)", export, ptr, n)
	}
	return abi.Status(b[0]), append([]byte(nil), b[1:]...), nil
}

// call passes input to export through factline_alloc, as the host does,
// and returns the reply. An error is a trap, a deadline or a broken ABI
// rule; the instance is then discarded.
func (p *probe) call(ctx context.Context, export string, input []byte) (abi.Status, []byte, error) {
	mod, err := p.instance(ctx)
	if err != nil {
		return 0, nil, err
	}
	fail := func(err error) (abi.Status, []byte, error) {
		p.discard(ctx)
		return 0, nil, err
	}
	cctx, end := pluginrt.CallBudget(ctx, p.timeout, p.wallCap)
	defer func() { _ = end() }() // a call stopped by the budget fails with its own error
	p.out.buf = p.out.buf[:0]
	p.sleeper.Watch(cctx)
	res, err := mod.ExportedFunction(abi.ExportAlloc).Call(cctx, uint64(len(input)))
	if err != nil {
		return fail(p.trap(abi.ExportAlloc, err))
	}
	ptr := uint32(res[0])
	if ptr == 0 || !mod.Memory().Write(ptr, input) {
		return fail(fmt.Errorf("%s(%d) returned %d, not a block of memory", abi.ExportAlloc, len(input), ptr))
	}
	f := mod.ExportedFunction(export)
	if f == nil {
		return fail(fmt.Errorf("the module does not export %s", export))
	}
	if res, err = f.Call(cctx, uint64(ptr), uint64(len(input))); err != nil {
		return fail(p.trap(export, err))
	}
	status, body, err := p.output(export, res[0])
	if err != nil {
		return fail(err)
	}
	return status, body, nil
}

// memory is the instance's linear memory size in bytes.
func (p *probe) memory() uint32 {
	if p.mod == nil {
		return 0
	}
	return p.mod.Memory().Size()
}
