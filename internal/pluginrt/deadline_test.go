package pluginrt

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// spinners is the number of spinning goroutines per P: enough for a call
// to wait for a P past its budget, few enough that it never waits for the
// hard cap.
const spinners = 4

// hog keeps every P of the Go scheduler busy with spinning goroutines
// until the returned function is called: a call into a guest then waits
// for a P most of its wall time, as on a machine saturated by load.
func hog(t *testing.T) (stop func()) {
	t.Helper()
	var quit atomic.Bool
	var wg sync.WaitGroup
	for range spinners * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			n := 0
			for !quit.Load() {
				n++
			}
			_ = n
		})
	}
	var once sync.Once
	stop = func() { once.Do(func() { quit.Store(true); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// stallingHandler holds each guest log line for hold, as if the calling
// thread had been descheduled in the middle of the call.
type stallingHandler struct {
	hold  time.Duration
	lines atomic.Int64
}

func (h *stallingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *stallingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *stallingHandler) WithGroup(string) slog.Handler            { return h }
func (h *stallingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "a line from the guest") {
		h.lines.Add(1)
		<-time.After(h.hold)
	}
	return nil
}

// TestStarvedCallIsNotARunaway: an ordinary call whose thread gets little
// or no CPU for longer than the budget (descheduled, or waiting for a core
// behind busy goroutines) completes; the budget is CPU time, not wall
// time. (Not parallel: it loads the machine.)
func TestStarvedCallIsNotARunaway(t *testing.T) {
	const limit = 100 * time.Millisecond
	t.Run("descheduled", func(t *testing.T) {
		// The call is held three budgets (within the 10x hard cap) in a
		// host function, using no CPU.
		lh := &stallingHandler{hold: 3 * limit}
		h := newHost(t, Options{PoolSize: 1, CallTimeout: limit, Logger: slog.New(lh)})
		loop := load(t, h, "loop")
		start := time.Now()
		if _, err := loop.Decide(t.Context(), decideInput("log", `{}`)); err != nil {
			t.Fatalf("a call held %v without using CPU failed: %v", lh.hold, err)
		}
		if lh.lines.Load() != 1 {
			t.Fatalf("the guest logged %d lines, want 1", lh.lines.Load())
		}
		if d := time.Since(start); d < lh.hold {
			t.Fatalf("the call took %v, less than it was held", d)
		}
		if s := loop.Stats(); s.Timeouts != 0 || s.Traps != 0 {
			t.Errorf("stats = %+v", s)
		}
	})
	t.Run("busy goroutines", func(t *testing.T) {
		h := newHost(t, Options{PoolSize: 1, CallTimeout: limit})
		loop := load(t, h, "loop")
		stop := hog(t)
		// Calls of a few milliseconds of CPU each, until one has waited
		// past the budget in wall time (or 40 calls): none may fail.
		var slowest time.Duration
		calls := 0
		for calls < 40 && slowest <= limit {
			start := time.Now()
			if _, err := loop.Decide(t.Context(), decideInput("busy", `{}`)); err != nil {
				t.Fatalf("call %d under CPU pressure failed after %v: %v", calls+1, time.Since(start), err)
			}
			slowest = max(slowest, time.Since(start))
			calls++
		}
		stop()
		t.Logf("%d calls under %d busy goroutines; slowest %v (budget %v)", calls, spinners*runtime.GOMAXPROCS(0), slowest, limit)
	})
}

// TestRunawayStoppedByItsCPUBudget: a guest that never returns is still
// stopped once it has used its budget of CPU time, on an idle machine and
// behind busy goroutines alike (then by the wall-clock hard cap at the
// latest), and the error says it timed out.
func TestRunawayStoppedByItsCPUBudget(t *testing.T) {
	const limit = 100 * time.Millisecond
	for _, busy := range []bool{false, true} {
		name := map[bool]string{false: "idle", true: "busy goroutines"}[busy]
		t.Run(name, func(t *testing.T) {
			h := newHost(t, Options{PoolSize: 1, CallTimeout: limit})
			loop := load(t, h, "loop")
			if busy {
				hog(t)
			}
			start := time.Now()
			_, err := loop.Decide(t.Context(), decideInput("loop", `{}`))
			elapsed := time.Since(start)
			var te *TrapError
			if !errors.As(err, &te) || !te.Timeout || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want a *TrapError with Timeout", err)
			}
			if elapsed < limit || elapsed > hardCapFactor*limit+time.Second {
				t.Errorf("stopped after %v, want %v..%v", elapsed, limit, hardCapFactor*limit+time.Second)
			}
			if s := loop.Stats(); s.Timeouts != 1 {
				t.Errorf("stats = %+v", s)
			}
			t.Logf("stopped after %v: %v", elapsed, err)
		})
	}
}

// BenchmarkCallDeadline is the cost the deadline adds to each call: the
// wall-clock timeout it replaced, and the CPU-time budget (thread lock,
// two syscalls and a timer).
func BenchmarkCallDeadline(b *testing.B) {
	b.Run("wall timeout", func(b *testing.B) {
		for b.Loop() {
			_, cancel := context.WithTimeout(b.Context(), time.Second)
			cancel()
		}
	})
	b.Run("cpu budget", func(b *testing.B) {
		for b.Loop() {
			_, bg := startBudget(b.Context(), time.Second, hardCapFactor*time.Second)
			_ = bg.end()
		}
	})
}

// BenchmarkDepositCall is one ledger deposit through the pool, with the
// product's deadline (wazero's termination checks compiled into the guest
// and the CPU-time budget) and, for comparison, without it
// (Options.DisableDeadline, which no host ships): the difference is what
// being able to stop a runaway guest costs every call.
func BenchmarkDepositCall(b *testing.B) {
	for _, c := range []struct {
		name    string
		disable bool
	}{{"deadline", false}, {"no deadline", true}} {
		b.Run(c.name, func(b *testing.B) {
			h, err := NewHost(Options{CacheDir: testCacheDir, PoolSize: 1, DisableDeadline: c.disable})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			p, err := h.Load(b.Context(), guests["ledger"])
			if err != nil {
				b.Fatal(err)
			}
			in := decideInput("deposit", `{"amount":"1.50"}`)
			for b.Loop() {
				if _, err := p.Decide(b.Context(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestWallCapStopsACallHeldInAHostFunction: a call that uses no CPU but
// is held in a host function past WallCap is stopped all the same, and
// the error says it timed out.
func TestWallCapStopsACallHeldInAHostFunction(t *testing.T) {
	const limit = 100 * time.Millisecond
	lh := &stallingHandler{hold: 5 * limit}
	h := newHost(t, Options{PoolSize: 1, CallTimeout: limit, WallCap: 2 * limit, Logger: slog.New(lh)})
	loop := load(t, h, "loop")
	_, err := loop.Decide(t.Context(), decideInput("log", `{}`))
	var te *TrapError
	if !errors.As(err, &te) || !te.Timeout {
		t.Fatalf("a call held %v past a wall cap of %v: err = %v, want a timeout", lh.hold, 2*limit, err)
	}
}
