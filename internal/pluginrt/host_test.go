package pluginrt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil/wait"
	"github.com/factline/factline/sdk/abi"
)

func TestLoadDescribes(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 3})
	before := time.Now()
	p := load(t, h, "ledger")

	d := p.Description()
	if d.Name != "ledger" || d.Version != "1.0.0" || d.Kind != abi.KindLedger || d.ABI != abi.Version {
		t.Errorf("description = %+v", d)
	}
	if len(d.EntityTypes) != 1 || d.EntityTypes[0] != "account" {
		t.Errorf("entity types = %v", d.EntityTypes)
	}
	if len(d.Commands) != 3 || d.Commands[0].Name != "deposit" || d.Commands[0].Path != "/deposit" ||
		d.Commands[2].Name != "balance" || !d.Commands[2].ReadOnly {
		t.Errorf("commands = %+v", d.Commands)
	}
	sum := sha256.Sum256(guests["ledger"])
	if p.SHA256() != hex.EncodeToString(sum[:]) {
		t.Errorf("sha256 = %s", p.SHA256())
	}
	if p.LoadedAt().Before(before) || p.LoadedAt().After(time.Now()) {
		t.Errorf("loaded at %v", p.LoadedAt())
	}
	waitIdle(t, p, 3)
	if s := p.Stats(); s.Instances != 3 || s.Idle != 3 || s.Calls != 0 {
		t.Errorf("stats = %+v", s)
	}
	if p.String() != "ledger@1.0.0" {
		t.Errorf("String() = %q", p.String())
	}
}

func TestDecideEvolveHandle(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newHost(t, Options{PoolSize: 2, Logger: logger})
	ledger := load(t, h, "ledger")
	notify := load(t, h, "notify")
	ctx := t.Context()

	// decide: a deposit emits one fact.
	res, err := ledger.Decide(ctx, decideInput("deposit", `{"amount":"12.50","currency":"EUR"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Facts) != 1 || res.Facts[0].Type != "deposit" || res.Facts[0].Subtype != "manual" ||
		string(res.Facts[0].Data) != `{"amount":"12.50","currency":"EUR"}` {
		t.Fatalf("facts = %+v", res.Facts)
	}
	if v := pluginVersion(t, res); v != "1.0.0" {
		t.Errorf("plugin version %q", v)
	}

	// evolve: fold a deposit and a charge from null.
	state, err := ledger.Evolve(ctx, abi.EvolveInput{Fact: abi.Fact{ID: "f1", Type: "deposit", Seq: 1, Timestamp: 1, Data: json.RawMessage(`{"amount":"0.1"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	state, err = ledger.Evolve(ctx, abi.EvolveInput{State: state, Fact: abi.Fact{ID: "f2", Type: "charge", Seq: 2, Timestamp: 2, Data: json.RawMessage(`{"amount":"0.03"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if string(state) != `{"balance":"0.07","facts":2}` {
		t.Errorf("state = %s", state)
	}

	// decide with state: a read-only command answers a result and no facts.
	in := decideInput("balance", `{}`)
	in.State = state
	res, err = ledger.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Facts) != 0 || string(res.Result) != `{"balance":"0.07","facts":2}` {
		t.Errorf("balance = %+v", res)
	}

	// handle: a subscription asks for an append.
	hr, err := notify.Handle(ctx, abi.HandleInput{Handler: "followup", Fact: abi.Fact{
		ID: "fct_1", Type: "outcome", Subtype: "no_answer", TenantID: "t1", EntityID: "line-1", EntityType: "asset",
		Seq: 3, Position: 912, Timestamp: 1764000000000, Data: json.RawMessage(`{"related":"acct-9"}`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(hr.Actions) != 1 || hr.Actions[0].Kind != abi.ActionAppend || hr.Actions[0].EntityID != "acct-9" ||
		hr.Actions[0].Type != "followup" || hr.Actions[0].Subtype != "no_answer" || string(hr.Actions[0].Data) != `{"source":"fct_1"}` {
		t.Errorf("actions = %+v", hr.Actions)
	}

	// a guest's log line reaches the host's logger, attributed.
	hr, err = notify.Handle(ctx, abi.HandleInput{Handler: "followup", Fact: abi.Fact{ID: "fct_2", Type: "outcome"}})
	if err != nil || len(hr.Actions) != 0 {
		t.Fatalf("handle without related = %+v, %v", hr, err)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, `"msg":"fact fct_2 names no related entity; nothing to do"`) || !strings.Contains(out, `"plugin":"notify"`) {
		t.Errorf("guest log line missing:\n%s", out)
	}
	if s := ledger.Stats(); s.Calls != 4 || s.Errors != 0 || s.Traps != 0 || s.P50 <= 0 || s.Mean <= 0 {
		t.Errorf("ledger stats = %+v", s)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestErrorRepliesKeepTheInstance(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 1})
	p := load(t, h, "ledger")
	ctx := t.Context()
	first := peek(t, p)

	charge := decideInput("charge", `{"amount":"99"}`)
	tests := []struct {
		name   string
		call   func() error
		status abi.Status
		code   string
		field  string
	}{
		{"business error", func() error { _, err := p.Decide(ctx, charge); return err }, abi.StatusBusinessError, "insufficient_funds", "amount"},
		{"bad input", func() error {
			_, err := p.Decide(ctx, decideInput("deposit", `{"amount":"ten"}`))
			return err
		}, abi.StatusBadInput, "invalid_amount", "amount"},
		{"unknown command", func() error { _, err := p.Decide(ctx, decideInput("refund", `{}`)); return err }, abi.StatusUnknownCommand, "unknown_command", ""},
		{"unsupported", func() error { _, err := p.Handle(ctx, abi.HandleInput{Handler: "x"}); return err }, abi.StatusUnsupported, "unsupported", ""},
		{"recovered panic", func() error { _, err := p.Decide(ctx, decideInput("panic", `{}`)); return err }, abi.StatusPanic, "panic", ""},
	}
	for _, tt := range tests {
		err := tt.call()
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: err = %v, want a *CallError", tt.name, err)
		}
		var te *TrapError
		if errors.As(err, &te) {
			t.Errorf("%s: a *TrapError too", tt.name)
		}
		if ce.Status != tt.status || ce.Code != tt.code || ce.Field != tt.field || ce.Message == "" {
			t.Errorf("%s: %+v, want status %d code %s field %q", tt.name, ce, tt.status, tt.code, tt.field)
		}
		if got := peek(t, p); got != first {
			t.Errorf("%s: the instance was replaced", tt.name)
		}
	}
	if _, err := p.Decide(ctx, decideInput("deposit", `{"amount":"1"}`)); err != nil {
		t.Errorf("after the errors: %v", err)
	}
	if s := p.Stats(); s.Calls != 6 || s.Errors != 5 || s.Traps != 0 {
		t.Errorf("stats = %+v", s)
	}
}

func TestTrapFailsOnlyThatCall(t *testing.T) {
	t.Parallel()
	// A generous deadline: the traps, not the deadline, must end the calls
	// (making a 5 MiB output is slow under the race detector).
	h := newHost(t, Options{PoolSize: 1, CallTimeout: 5 * time.Second})
	p := load(t, h, "trap")
	ctx := t.Context()

	tests := []struct {
		command string
		want    string // in the cause or the guest's output
	}{
		{"panic", "deliberate unrecovered panic"},
		{"oob", "outside the"},
		{"empty", "empty output"},
		{"badstatus", "unknown status 9"},
		{"badjson", "not the expected JSON"},
		{"huge", "exceeds the 4194304-byte limit"},
	}
	for i, tt := range tests {
		before := peek(t, p)
		_, err := p.Decide(ctx, decideInput(tt.command, `{}`))
		var te *TrapError
		if !errors.As(err, &te) {
			t.Fatalf("%s: err = %v, want a *TrapError", tt.command, err)
		}
		if te.Timeout || te.Plugin != "trap@0.1.0" || te.Call != "decide" {
			t.Errorf("%s: %+v", tt.command, te)
		}
		if !strings.Contains(te.Error()+te.Output, tt.want) {
			t.Errorf("%s: error %q, output %q: want %q", tt.command, te.Error(), te.Output, tt.want)
		}
		// The next call succeeds, on a fresh instance made in the background.
		res, err := p.Decide(ctx, decideInput("ok", `{}`))
		if err != nil {
			t.Fatalf("%s: the next call failed: %v", tt.command, err)
		}
		if string(res.Result) != `{"guest":"trap"}` {
			t.Errorf("result %s", res.Result)
		}
		if peek(t, p) == before {
			t.Errorf("%s: the instance was not replaced", tt.command)
		}
		if s := p.Stats(); s.Traps != uint64(i+1) || s.Replacements != uint64(i+1) {
			t.Errorf("%s: traps = %d, replacements %d", tt.command, s.Traps, s.Replacements)
		}
	}
}

// TestTrapHammer mixes good calls, error replies and traps from many
// goroutines on a small pool: every call gets its own outcome, and the
// pool ends full.
func TestTrapHammer(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 2, CallTimeout: 5 * time.Second})
	trap := load(t, h, "trap")
	ctx := t.Context()
	var wg sync.WaitGroup
	var bad atomic.Int64
	const workers, calls = 6, 25
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				cmd := "ok"
				if (w+i)%5 == 0 {
					cmd = "panic"
				}
				_, err := trap.Decide(ctx, decideInput(cmd, `{}`))
				var te *TrapError
				if (cmd == "ok") != (err == nil) || (cmd == "panic") != errors.As(err, &te) {
					bad.Add(1)
					t.Errorf("%s: %v", cmd, err)
				}
			}
		})
	}
	wg.Wait()
	if bad.Load() > 0 {
		return
	}
	s := trap.Stats()
	if s.Calls != workers*calls || s.Traps+s.Timeouts != workers*calls/5 {
		t.Errorf("stats = %+v", s)
	}
	waitFor(t, func() bool { return len(trap.pool) == 2 }, "the pool to refill")
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	wait.Eventually(t, 30*time.Second, what, cond)
}

// TestInfiniteLoopStoppedAtDeadline: a guest that never returns is
// stopped at its budget, and other plugins serve calls meanwhile. (Not
// parallel: it asserts on timing.)
func TestInfiniteLoopStoppedAtDeadline(t *testing.T) {
	h := newHost(t, Options{PoolSize: 2, CallTimeout: 200 * time.Millisecond})
	loop := load(t, h, "loop")
	ledger := load(t, h, "ledger")
	ctx := t.Context()

	type result struct {
		err     error
		elapsed time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		_, err := loop.Decide(ctx, decideInput("loop", `{}`))
		done <- result{err, time.Since(start)}
	}()
	waitFor(t, func() bool { return loop.inflight.Load() == 1 }, "the loop to start")
	// Other plugins keep serving while the guest spins.
	var served int
	var r result
wait:
	for {
		select {
		case r = <-done:
			break wait
		default:
		}
		if _, err := ledger.Decide(ctx, decideInput("deposit", `{"amount":"1"}`)); err != nil {
			t.Fatalf("a concurrent call failed: %v", err)
		}
		served++
	}
	var te *TrapError
	if !errors.As(r.err, &te) || !te.Timeout {
		t.Fatalf("err = %v, want a *TrapError with Timeout", r.err)
	}
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(err, context.DeadlineExceeded) is false: %v", r.err)
	}
	// 200ms of CPU time, or the wall-clock hard cap when the machine is
	// so loaded that the loop's thread gets less.
	if limit := hardCapFactor*200*time.Millisecond + time.Second; r.elapsed < 200*time.Millisecond || r.elapsed > limit {
		t.Errorf("the loop was stopped after %v, want 200ms..%v", r.elapsed, limit)
	}
	if served == 0 {
		t.Error("no call to another plugin completed while the guest spun")
	}
	t.Logf("stopped after %v; %d calls to another plugin meanwhile", r.elapsed, served)
	if _, err := loop.Decide(ctx, decideInput("ok", `{}`)); err != nil {
		t.Errorf("the next call: %v", err)
	}
	if s := loop.Stats(); s.Timeouts != 1 || s.Traps != 0 || s.Calls != 2 {
		t.Errorf("stats = %+v", s)
	}
}

// TestSleepingGuestStoppedAtDeadline: a guest asleep (time.Sleep waits in
// WASI's poll_oneoff, a host function, where close-on-context-done does
// not reach) is stopped once the call's wall-time cap passes, not when
// it wakes an hour later.
func TestSleepingGuestStoppedAtDeadline(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 1, CallTimeout: 100 * time.Millisecond})
	loop := load(t, h, "loop")
	ctx := t.Context()
	done := make(chan error, 1)
	go func() {
		_, err := loop.Decide(ctx, decideInput("sleep", `{}`))
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		// The host closes the plugin (and the sleeping guest with it)
		// when the test ends.
		t.Fatal("the sleeping guest still holds its call after a minute")
	}
	var te *TrapError
	if !errors.As(err, &te) || !te.Timeout {
		t.Fatalf("err = %v, want a *TrapError with Timeout", err)
	}
	if _, err := loop.Decide(ctx, decideInput("ok", `{}`)); err != nil {
		t.Errorf("the next call: %v", err)
	}
}

func TestCallerCancelStopsTheGuest(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 1, CallTimeout: 10 * time.Second})
	loop := load(t, h, "loop")
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := loop.Decide(ctx, decideInput("loop", `{}`))
	var te *TrapError
	if !errors.As(err, &te) || te.Timeout || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a *TrapError caused by context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("stopped after %v", d)
	}
	// A context already done does not cost an instance.
	_, err = loop.Decide(ctx, decideInput("ok", `{}`))
	if !errors.Is(err, context.Canceled) || errors.As(err, &te) {
		t.Errorf("with a canceled context: %v", err)
	}
	if s := loop.Stats(); s.Canceled != 2 || s.Traps != 0 || s.Timeouts != 0 {
		t.Errorf("stats = %+v", s)
	}
	waitFor(t, func() bool { return len(loop.pool) == 1 }, "the replacement")
	if _, err := loop.Decide(t.Context(), decideInput("ok", `{}`)); err != nil {
		t.Errorf("after the cancel: %v", err)
	}
}

// TestMemoryHogTrapsAtItsCap: a guest allocating without bound traps at
// its own cap, other plugins keep serving, and the host's heap comes back.
// (Not parallel: it measures the heap.)
func TestMemoryHogTrapsAtItsCap(t *testing.T) {
	// A long deadline: the cap, not the deadline, must stop the hog.
	h := newHost(t, Options{PoolSize: 1, MemoryLimitMiB: 32, CallTimeout: 20 * time.Second})
	hog := load(t, h, "hog")
	ledger := load(t, h, "ledger")
	ctx := t.Context()

	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := ledger.Decide(ctx, decideInput("deposit", `{"amount":"1"}`)); err != nil {
				t.Errorf("concurrent call: %v", err)
				return
			}
			ok.Add(1)
		}
	})
	for i := range 3 {
		_, err := hog.Decide(ctx, decideInput("hog", `{}`))
		var te *TrapError
		if !errors.As(err, &te) || te.Timeout {
			t.Fatalf("hog %d: err = %v, want a trap", i, err)
		}
		if !strings.Contains(te.Output, "out of memory") {
			t.Errorf("hog %d: guest output %q, want out of memory", i, te.Output)
		}
	}
	close(stop)
	wg.Wait()
	if ok.Load() == 0 {
		t.Error("no concurrent call completed")
	}
	waitFor(t, func() bool { return len(hog.pool) == 1 }, "the replacement")
	if _, err := hog.Decide(ctx, decideInput("ok", `{}`)); err != nil {
		t.Errorf("after the traps: %v", err)
	}
	// Three guests grew to 32 MiB each; after they were discarded the
	// host's heap is back near where it was.
	if after := heap(); after > before+48<<20 {
		t.Errorf("host heap grew from %d MiB to %d MiB", before>>20, after>>20)
	}
}

func TestLoadRefusesBrokenModules(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 1})
	tests := []struct {
		name string
		wasm []byte
		want []string
	}{
		{"badabi", guests["badabi"], []string{"factline_abi_version returned 2; this host supports ABI version 1"}},
		{"noexport", guests["noexport"], []string{"missing export factline_decide", "missing export factline_evolve"}},
		{"baddescribe", guests["baddescribe"], []string{
			`name "Bad Name!"`, `version "latest"`, `kind "widget"`, "command 1 has no name",
			`method "FETCH"`, `path "no-slash"`, `command "go" is declared twice`, `command "peek" is read_only but emits peeked`,
		}},
		{"garbage", []byte("\x00asm\x01\x00\x00\x00\xff"), []string{"compile: "}},
		{"empty", nil, []string{"the module is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := h.Load(t.Context(), tt.wasm)
			var le *LoadError
			if !errors.As(err, &le) || p != nil {
				t.Fatalf("Load = %v, %v; want a *LoadError", p, err)
			}
			all := strings.Join(le.Reasons, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("reasons lack %q:\n%s", w, all)
				}
			}
			if len(le.Reasons) < len(tt.want) {
				t.Errorf("%d reasons for %d problems:\n%s", len(le.Reasons), len(tt.want), all)
			}
		})
	}
}

// TestCompilationCacheSpeedsUpLoad loads a module twice, each time in a
// new host sharing one cache directory. (Not parallel: it times; the
// benchmark measures properly.)
func TestCompilationCacheSpeedsUpLoad(t *testing.T) {
	dir := t.TempDir()
	timeLoad := func() time.Duration {
		h := newHost(t, Options{CacheDir: dir, PoolSize: 1})
		start := time.Now()
		p := load(t, h, "notify")
		d := time.Since(start)
		if err := p.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		return d
	}
	cold := timeLoad()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("cache dir: %v, %d entries", err, len(entries))
	}
	warm := timeLoad() // a new host: only the disk cache is shared
	t.Logf("load without cache %v, with the disk cache %v", cold, warm)
	if warm >= cold {
		t.Errorf("a cached load took %v, the first %v", warm, cold)
	}
}

func TestCloseDrainsCallsInFlight(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 1, CallTimeout: 300 * time.Millisecond})
	p := load(t, h, "loop")
	done := make(chan error, 1)
	go func() {
		_, err := p.Decide(t.Context(), decideInput("loop", `{}`))
		done <- err
	}()
	waitFor(t, func() bool { return p.inflight.Load() == 1 && len(p.pool) == 0 }, "the call to start")
	start := time.Now()
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var te *TrapError
		if !errors.As(err, &te) || !te.Timeout {
			t.Errorf("the call in flight: %v", err)
		}
	default:
		t.Fatal("Close returned before the call in flight")
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("Close returned after %v", d)
	}
	if _, err := p.Decide(t.Context(), decideInput("ok", `{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := p.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCloseWithExpiredContext: Close's context ends while a call runs and
// another waits for the only instance. The waiter is refused, the running
// call ends at its deadline, and only then is the runtime closed.
func TestCloseWithExpiredContext(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 1, CallTimeout: 500 * time.Millisecond})
	p := load(t, h, "loop")
	running, waiting := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := p.Decide(context.Background(), decideInput("loop", `{}`))
		running <- err
	}()
	waitFor(t, func() bool { return p.inflight.Load() == 1 && len(p.pool) == 0 }, "the call to start")
	go func() {
		_, err := p.Decide(context.Background(), decideInput("ok", `{}`))
		waiting <- err
	}()
	waitFor(t, func() bool { return p.inflight.Load() == 2 }, "the second call to wait")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	select {
	case err := <-waiting:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("the waiting call: %v", err)
		}
	default:
		t.Error("Close returned before the waiting call")
	}
	select {
	case err := <-running:
		var te *TrapError
		if !errors.As(err, &te) || !te.Timeout {
			t.Errorf("the running call: %v", err)
		}
	default:
		t.Error("Close returned before the running call ended")
	}
}

func TestHostClose(t *testing.T) {
	t.Parallel()
	h, err := NewHost(Options{CacheDir: testCacheDir, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := load(t, h, "ledger")
	if err := h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Decide(t.Context(), decideInput("deposit", `{"amount":"1"}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Host.Close: %v", err)
	}
	if _, err := h.Load(t.Context(), guests["ledger"]); !errors.Is(err, ErrClosed) {
		t.Errorf("Load after Host.Close: %v", err)
	}
	if err := h.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.MemoryLimitMiB != 64 || o.CallTimeout != 100*time.Millisecond || o.PoolSize != 2*runtime.GOMAXPROCS(0) || o.Logger == nil {
		t.Errorf("defaults = %+v", o)
	}
	if o.gomemlimit() != "56MiB" || o.memoryLimitPages() != 1024 {
		t.Errorf("GOMEMLIMIT %s, %d pages", o.gomemlimit(), o.memoryLimitPages())
	}
	if small := (Options{MemoryLimitMiB: 16}); small.gomemlimit() != "12MiB" {
		t.Errorf("GOMEMLIMIT for 16 MiB = %s", small.gomemlimit())
	}
	for _, bad := range []Options{{MemoryLimitMiB: 4}, {MemoryLimitMiB: 5000}, {CallTimeout: -1}, {PoolSize: -1}, {PoolSize: 2000}} {
		if _, err := NewHost(bad); err == nil {
			t.Errorf("NewHost(%+v) accepted", bad)
		}
	}
}

// waitIdle waits (up to 30 s) until p's pool holds n idle instances.
func waitIdle(t *testing.T, p *Plugin, n int) {
	t.Helper()
	wait.EventuallyNil(t, 30*time.Second, func() error {
		if st := p.Stats(); st.Idle != n {
			return fmt.Errorf("idle instances %d, want %d (stats %+v)", st.Idle, n, st)
		}
		return nil
	})
}

// TestLoadServesBeforeThePoolIsFilled: Load returns once one instance is
// made (it answers describe and serves calls); the rest of the pool is
// made in the background, so a restart that loads every plugin waits for
// one instantiation per plugin rather than PoolSize.
func TestLoadServesBeforeThePoolIsFilled(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var released sync.Once
	release := func() { released.Do(func() { close(gate) }) }
	t.Cleanup(release)
	h := newHost(t, Options{PoolSize: 4, beforeFill: func() { <-gate }})
	p := load(t, h, "ledger")
	if s := p.Stats(); s.Instances != 4 || s.Idle != 1 {
		t.Fatalf("stats right after Load with the filling held back = %+v, want 4 instances of which 1 made", s)
	}
	if _, err := p.Decide(t.Context(), decideInput("deposit", `{"amount":"1.00"}`)); err != nil {
		t.Fatalf("decide on the one instance: %v", err)
	}
	release()
	waitIdle(t, p, 4)
}

// TestHeldFillsWaitUntilReleased: while HoldFills is in force a loaded
// plugin keeps the one instance its load made (and serves calls on it);
// its pool fills once every hold is released, and a plugin closed while
// held does not wait for the release.
func TestHeldFillsWaitUntilReleased(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 3})
	release1, release2 := h.HoldFills(), h.HoldFills()
	t.Cleanup(release1)
	t.Cleanup(release2)
	if !h.FillsHeld() {
		t.Fatal("FillsHeld false under a hold")
	}
	p := load(t, h, "ledger")
	closed := load(t, h, "notify")
	waitFor(t, func() bool { return h.fillsHeld.Load() == 2 }, "both fills waiting for the release")
	if s := p.Stats(); s.Idle != 1 {
		t.Fatalf("stats with the filling held = %+v, want 1 idle instance", s)
	}
	if _, err := p.Decide(t.Context(), decideInput("deposit", `{"amount":"1.00"}`)); err != nil {
		t.Fatalf("decide while the filling is held: %v", err)
	}
	if err := closed.Close(t.Context()); err != nil {
		t.Fatalf("close a plugin whose filling is held: %v", err)
	}
	release1()
	release1() // idempotent: must not count as the second release
	if !h.FillsHeld() || h.fillsHeld.Load() != 1 {
		t.Fatalf("after one of two releases: held %v, %d fills waiting; want held, 1 waiting", h.FillsHeld(), h.fillsHeld.Load())
	}
	release2()
	if h.FillsHeld() {
		t.Fatal("FillsHeld true after every release")
	}
	waitIdle(t, p, 3)
}
