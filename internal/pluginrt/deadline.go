package pluginrt

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// hardCapFactor: by default a call is stopped after this many budgets of
// wall time even if its thread used less CPU, so a guest stuck in a host
// function or starved for good still gives its instance back.
const hardCapFactor = 10

// budget bounds one guest call by the CPU time of the thread running it,
// not by wall time: on a loaded machine a call waiting for a core (or for a
// P of the Go scheduler) is not a runaway. The calling goroutine is locked
// to its thread for the call, so the thread's CPU clock is the guest's
// (plus its host functions). A timer wakes after the budget in wall time
// and, while the CPU used is still below it, sleeps again for the rest;
// once the CPU used reaches the budget, or the wall time the hard cap, it
// cancels the call's context, which close-on-context-done turns into a
// stop at the guest's next loop edge or call.
type budget struct {
	cancel  context.CancelFunc
	clock   threadClock
	start   time.Time
	cpu0    time.Duration
	limit   time.Duration
	hardCap time.Duration

	mu      sync.Mutex
	done    bool
	timer   *time.Timer
	overrun error // set when the watchdog stopped the call
}

// startBudget locks the caller to its thread and returns the context of
// one call under limit. The caller must call end, on the same goroutine,
// when the call returns.
func startBudget(ctx context.Context, limit, hardCap time.Duration) (context.Context, *budget) {
	runtime.LockOSThread()
	b := &budget{limit: limit, hardCap: hardCap, start: time.Now(), clock: currentThreadClock()}
	if cpu, ok := b.clock.now(); ok {
		b.cpu0 = cpu
	} else {
		b.hardCap = limit // no CPU clock: wall time is all there is
	}
	ctx, b.cancel = context.WithCancel(ctx)
	b.mu.Lock() // the timer may fire before the field is set
	b.timer = time.AfterFunc(limit, b.check)
	b.mu.Unlock()
	return ctx, b
}

// check runs on the timer's goroutine.
func (b *budget) check() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	wall := time.Since(b.start)
	cpu, ok := b.clock.now()
	cpu -= b.cpu0
	switch {
	case ok && cpu >= b.limit:
		b.overrun = fmt.Errorf("%w: still running after %v of CPU time (%v in all)",
			context.DeadlineExceeded, b.limit, wall.Round(time.Millisecond))
	case wall >= b.hardCap:
		b.overrun = fmt.Errorf("%w: still running after %v (%v of CPU time)",
			context.DeadlineExceeded, wall.Round(time.Millisecond), cpu.Round(time.Millisecond))
	default:
		// The thread cannot use more CPU than wall time passes, so the
		// budget cannot run out before the rest of it has passed.
		next := b.limit - cpu
		if !ok {
			next = b.hardCap - wall
		}
		b.timer.Reset(min(next, b.hardCap-wall))
		return
	}
	b.cancel()
}

// end stops the watchdog and unlocks the thread. It returns why the
// watchdog stopped the call, or nil.
func (b *budget) end() error {
	b.mu.Lock()
	b.done = true
	b.timer.Stop()
	err := b.overrun
	b.mu.Unlock()
	b.cancel()
	runtime.UnlockOSThread()
	return err
}

// CallBudget bounds one call made outside a Host (the conformance kit's
// raw probes) the way a Host bounds its own: the returned context ends
// once the calling thread has used limit of CPU time or wallCap has
// passed. The caller must call end on the same goroutine when the call
// returns; end tells why the budget stopped the call, or nil.
func CallBudget(ctx context.Context, limit, wallCap time.Duration) (_ context.Context, end func() error) {
	ctx, b := startBudget(ctx, limit, max(wallCap, limit))
	return ctx, b.end
}
