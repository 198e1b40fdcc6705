package pluginrt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sync/errgroup"

	"github.com/factline/factline/sdk/abi"
)

// Plugin is one loaded version of a plugin: a compiled module in a runtime
// of its own and a pool of ready instances. Its methods are safe for
// concurrent use; each call runs on one instance taken from the pool.
type Plugin struct {
	host        *Host
	rt          wazero.Runtime
	compiled    wazero.CompiledModule
	modCfg      wazero.ModuleConfig
	desc        abi.Description
	label       string // name@version
	sha         string
	loadedAt    time.Time
	compileTime time.Duration

	pool    chan *instance
	stats   stats
	rec     Recorder // nil: no Observer
	logger  atomic.Pointer[slog.Logger]
	limiter *logLimiter

	// Draining: calls hold a reference (inflight) from before they take an
	// instance until they give it back. Close sets closing, after which a
	// call is forwarded to successor (set by the Registry on a swap) or
	// refused; the last call out signals drained.
	inflight  atomic.Int64
	closing   atomic.Bool
	drained   chan struct{}
	successor atomic.Pointer[Plugin]

	mu        sync.Mutex // guards stopped and bg.Add
	stopped   bool
	stop      chan struct{}  // closed when replacements must stop
	bg        sync.WaitGroup // replacements under way
	force     chan struct{}  // closed when Close's context ends before the drain: waiters leave
	forceOnce sync.Once
	closeOnce sync.Once
	closedCh  chan struct{}
	closeErr  error
}

// Description is the plugin's describe document (a copy).
func (p *Plugin) Description() abi.Description {
	d := p.desc
	d.EntityTypes = slices.Clone(d.EntityTypes)
	d.Handlers = slices.Clone(d.Handlers)
	d.Emits = slices.Clone(d.Emits)
	d.Commands = slices.Clone(d.Commands)
	for i := range d.Commands {
		d.Commands[i].Emits = slices.Clone(d.Commands[i].Emits)
		d.Commands[i].InputSchema = slices.Clone(d.Commands[i].InputSchema)
		d.Commands[i].ResultSchema = slices.Clone(d.Commands[i].ResultSchema)
	}
	return d
}

// Kind is the plugin's kind (abi.KindLedger or abi.KindSubscription),
// without the copy Description makes: it is asked on every request.
func (p *Plugin) Kind() string { return p.desc.Kind }

// SHA256 is the hex SHA-256 of the module's bytes.
func (p *Plugin) SHA256() string { return p.sha }

// LoadedAt is when Load finished.
func (p *Plugin) LoadedAt() time.Time { return p.loadedAt }

// Stats returns the call figures since the plugin was loaded.
func (p *Plugin) Stats() Stats {
	s := p.stats.snapshot()
	s.Instances = cap(p.pool)
	s.Idle = len(p.pool)
	return s
}

// String is name@version.
func (p *Plugin) String() string { return p.label }

// Decide runs factline_decide: the facts a command produces.
//
// Errors: a guest's error reply is a *CallError (the instance stays in
// service); a trap, an ABI violation or the deadline is a *TrapError (the
// instance is replaced in the background); an input that is not valid
// JSON wraps ErrInvalidInput; a caller's context that ends while every
// instance is busy returns the context's error; a plugin closed and not
// replaced returns ErrClosed. Evolve and Handle behave the same.
func (p *Plugin) Decide(ctx context.Context, in abi.DecideInput) (abi.DecideResult, error) {
	var res abi.DecideResult
	err := p.invoke(ctx, callDecide, func(b *bytes.Buffer) error { return appendDecideInput(b, &in) }, func(b []byte) error {
		res = abi.DecideResult{}
		return json.Unmarshal(b, &res)
	})
	return res, err
}

// Evolve runs factline_evolve and returns the new state (a copy of the
// guest's JSON).
func (p *Plugin) Evolve(ctx context.Context, in abi.EvolveInput) (json.RawMessage, error) {
	var state json.RawMessage
	err := p.invoke(ctx, callEvolve, func(b *bytes.Buffer) error { return appendEvolveInput(b, &in) }, func(b []byte) error {
		if !json.Valid(b) {
			return errors.New("invalid JSON")
		}
		state = bytes.Clone(b)
		return nil
	})
	return state, err
}

// Handle runs factline_handle: the actions a subscription handler asks
// for.
func (p *Plugin) Handle(ctx context.Context, in abi.HandleInput) (abi.HandleResult, error) {
	var res abi.HandleResult
	err := p.invoke(ctx, callHandle, func(b *bytes.Buffer) error { return appendHandleInput(b, &in) }, func(b []byte) error {
		res = abi.HandleResult{}
		return json.Unmarshal(b, &res)
	})
	return res, err
}

// acquire takes a reference for one call; false once the plugin closes.
func (p *Plugin) acquire() bool {
	p.inflight.Add(1)
	if p.closing.Load() {
		p.release()
		return false
	}
	return true
}

func (p *Plugin) release() {
	if p.inflight.Add(-1) == 0 && p.closing.Load() {
		select {
		case p.drained <- struct{}{}:
		default:
		}
	}
}

// invoke runs one call on p or, when p has closed after a swap, on the
// version that replaced it: a caller holding an old *Plugin is never
// refused during a hot swap.
func (p *Plugin) invoke(ctx context.Context, c call, encode func(*bytes.Buffer) error, decode func([]byte) error) error {
	q := p
	for !q.acquire() {
		next := q.successor.Load()
		if next == nil {
			return fmt.Errorf("%w: plugin %s", ErrClosed, q.label)
		}
		q = next
	}
	defer q.release()
	return q.run(ctx, c, encode, decode)
}

// inputs are reused input buffers.
var inputs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledInput: larger buffers are left to the collector.
const maxPooledInput = 64 << 10

func (p *Plugin) run(ctx context.Context, c call, encode func(*bytes.Buffer) error, decode func([]byte) error) error {
	start := time.Now()
	buf := inputs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledInput {
			buf.Reset()
			inputs.Put(buf)
		}
	}()
	if err := encode(buf); err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrInvalidInput, p.label, c, err)
	}
	inst, err := p.take(ctx)
	if err != nil {
		p.record(ctx, c, outcomeCanceled, start)
		return err
	}
	inst.out.reset()
	var cerr *CallError
	var overrun error
	if p.host.opts.DisableDeadline {
		cerr, err = inst.exec(ctx, inst.fns[c], buf.Bytes(), decode)
	} else {
		cctx, b := startBudget(ctx, p.host.opts.CallTimeout, p.host.opts.WallCap)
		cerr, err = inst.exec(cctx, inst.fns[c], buf.Bytes(), decode)
		overrun = b.end()
	}
	if err == nil {
		p.pool <- inst
		if cerr != nil {
			p.record(ctx, c, outcomeError, start)
			return cerr
		}
		p.record(ctx, c, outcomeOK, start)
		return nil
	}
	trap := p.classify(ctx, c, err, overrun)
	trap.Output = inst.out.String()
	if inst.mem != nil {
		trap.Memory, trap.MemoryCap = uint64(inst.mem.Size()), uint64(p.host.opts.MemoryLimitMiB)<<20
	}
	p.replace(inst)
	switch {
	case trap.Timeout:
		p.record(ctx, c, outcomeTimeout, start)
	case errors.Is(trap.Cause, context.Canceled):
		p.record(ctx, c, outcomeCanceled, start)
	default:
		p.record(ctx, c, outcomeTrap, start)
	}
	p.log().Warn("plugin call failed; instance replaced", "call", c.String(), "timeout", trap.Timeout,
		"err", trap.Cause, "guest_output", trap.Output)
	return trap
}

// classify turns the error of a call into a TrapError: the caller's
// context ending, the call's own budget (overrun says why it was stopped),
// or a trap.
func (p *Plugin) classify(ctx context.Context, c call, err, overrun error) *TrapError {
	t := &TrapError{Plugin: p.label, Call: c.String(), Cause: err}
	var exit *sys.ExitError
	stopped := errors.As(err, &exit) &&
		(exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled)
	switch {
	case ctx.Err() != nil && (stopped || errors.Is(err, ctx.Err())):
		t.Cause = ctx.Err()
		t.Timeout = errors.Is(t.Cause, context.DeadlineExceeded)
	case stopped && overrun != nil:
		t.Timeout = true
		t.Cause = overrun
	case stopped:
		t.Timeout = true
		t.Cause = fmt.Errorf("%w: still running after %v", context.DeadlineExceeded, p.host.opts.CallTimeout)
	}
	return t
}

// take waits for a free instance, bounded by ctx and by a forced Close.
func (p *Plugin) take(ctx context.Context) (*instance, error) {
	select {
	case in := <-p.pool:
		return p.ready(ctx, in)
	default:
	}
	select {
	case in := <-p.pool:
		return p.ready(ctx, in)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.force:
		return nil, fmt.Errorf("%w: plugin %s", ErrClosed, p.label)
	}
}

// ready gives in back when ctx has already ended: with close-on-context-
// done the guest would be stopped at its first instruction and the
// instance lost for nothing.
func (p *Plugin) ready(ctx context.Context, in *instance) (*instance, error) {
	if err := ctx.Err(); err != nil {
		p.pool <- in
		return nil, err
	}
	return in, nil
}

// unrecordedKey marks a context whose calls are not counted.
type unrecordedKey struct{}

// Unrecorded returns a context whose calls leave the plugin's statistics
// and metrics alone: the host's own checks of a version before it serves
// (a smoke call answering "unknown command" is not an error of the
// plugin's).
func Unrecorded(ctx context.Context) context.Context {
	return context.WithValue(ctx, unrecordedKey{}, true)
}

func (p *Plugin) record(ctx context.Context, c call, o outcome, start time.Time) {
	if ctx.Value(unrecordedKey{}) != nil {
		return
	}
	d := time.Since(start)
	p.stats.record(o, d)
	if p.rec != nil {
		p.rec.Record(c, o, d)
	}
}

// recClosed tells the Recorder, if any, that the version has closed.
func (p *Plugin) recClosed() {
	if p.rec != nil {
		p.rec.Closed()
	}
}

// replace closes a failed instance and makes a fresh one for the pool, in
// the background, retrying with backoff while instantiation fails.
func (p *Plugin) replace(old *instance) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		_ = old.mod.Close(context.Background())
		return
	}
	p.bg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.bg.Done()
		_ = old.mod.Close(context.Background())
		backoff := 50 * time.Millisecond
		for {
			in, err := p.newInstance(context.Background())
			if err == nil {
				p.stats.replacements.Add(1)
				p.pool <- in // never blocks: the pool has room for every instance
				return
			}
			p.log().Error("plugin instance could not be replaced; retrying", "err", err, "retry_in", backoff)
			select {
			case <-p.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}()
}

// fill makes n more instances for the pool in the background, retrying
// with backoff while instantiation fails, until the plugin closes.
func (p *Plugin) fill(n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.bg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.bg.Done()
		if hook := p.host.opts.beforeFill; hook != nil {
			hook()
		}
		if !p.host.waitFills(p.stop) {
			return
		}
		var g errgroup.Group
		g.SetLimit(runtime.GOMAXPROCS(0))
		for range n {
			g.Go(func() error {
				backoff := 50 * time.Millisecond
				for {
					in, err := p.newInstance(context.Background())
					if err == nil {
						p.pool <- in // never blocks: the pool has room for every instance
						return nil
					}
					p.log().Error("plugin instance could not be made; retrying", "err", err, "retry_in", backoff)
					select {
					case <-p.stop:
						return nil
					case <-time.After(backoff):
					}
					backoff = min(2*backoff, 5*time.Second)
				}
			})
		}
		_ = g.Wait()
	}()
}

// Close stops new calls (a caller still holding p is forwarded to the
// version that replaced it, if any), waits for the calls in flight, then
// closes the runtime and every instance. When ctx ends first, calls still
// waiting for an instance fail with ErrClosed and Close returns ctx's
// error once the calls already running have ended (each within its
// deadline): a runtime is never closed under a running call. Close is
// idempotent; every caller waits for the same outcome.
func (p *Plugin) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.closing.Store(true)
		go p.shutdown()
	})
	select {
	case <-p.closedCh:
		return p.closeErr
	case <-ctx.Done():
		p.forceOnce.Do(func() { close(p.force) })
		<-p.closedCh
		return ctx.Err()
	}
}

func (p *Plugin) shutdown() {
	start := time.Now()
	forced := false
	for p.inflight.Load() > 0 {
		select {
		case <-p.drained:
		case <-p.force:
			if !forced {
				forced = true
				p.log().Warn("plugin closing with calls in flight; callers still waiting for an instance are refused",
					"calls", p.inflight.Load())
			}
			// Waiters leave at once; running calls end within their
			// deadline. Poll: drained may have been signalled already.
			select {
			case <-p.drained:
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	// Replacements stop and are waited for before the runtime closes:
	// wazero must not close a runtime while it instantiates in it.
	p.mu.Lock()
	p.stopped = true
	close(p.stop)
	p.mu.Unlock()
	p.bg.Wait()
	p.closeErr = p.rt.Close(context.Background())
	p.host.forget(p)
	p.recClosed()
	p.log().Info("plugin closed", "drain_ms", millis(time.Since(start)))
	close(p.closedCh)
}

// abiVersion calls factline_abi_version on a probe instance.
func (p *Plugin) abiVersion(ctx context.Context, in *instance) (int32, error) {
	ctx, end := CallBudget(ctx, p.host.opts.initTimeout(), hardCapFactor*p.host.opts.initTimeout())
	defer func() { _ = end() }() // a call stopped by the budget fails with its own error
	in.sleeper.Watch(ctx)
	f := in.mod.ExportedFunction(abi.ExportVersion)
	res, err := f.Call(ctx)
	if err != nil {
		return 0, err
	}
	return int32(uint32(res[0])), nil
}

// describe calls factline_describe on a probe instance.
func (p *Plugin) describe(ctx context.Context, in *instance) (abi.Description, error) {
	ctx, end := CallBudget(ctx, p.host.opts.initTimeout(), hardCapFactor*p.host.opts.initTimeout())
	defer func() { _ = end() }() // a call stopped by the budget fails with its own error
	var d abi.Description
	in.sleeper.Watch(ctx)
	res, err := in.mod.ExportedFunction(abi.ExportDescribe).Call(ctx)
	if err != nil {
		return d, err
	}
	cerr, err := in.output(res[0], func(b []byte) error { return json.Unmarshal(b, &d) })
	if err != nil {
		return d, err
	}
	if cerr != nil {
		return d, cerr
	}
	return d, nil
}

// millis renders a duration for log lines the way request logs do: fractional
// milliseconds, not slog's integer nanoseconds.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
