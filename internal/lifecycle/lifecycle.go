// Package lifecycle is the start/stop base of the host's long-lived
// services (webhook delivery, projections, subscriptions, the plugin
// manager): one way to start background goroutines under one context, one
// way to stop them and wait, and signals tests can wait on instead of
// sleeping.
//
// A Base starts once. A second Start, also after Stop, returns
// ErrStarted: a stopped service is not restarted, a new one is built.
// Stop before Start does nothing; Stop after Stop waits again and returns
// at once.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrStarted is returned by a second Start.
var ErrStarted = errors.New("already started")

// Base runs a service's background goroutines. The zero value is ready;
// embed or hold one per service and do not copy it.
type Base struct {
	mu      sync.Mutex
	state   int // 0 new, 1 running, 2 stopped
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started chan struct{}
	stopped chan struct{}
}

func (b *Base) init() {
	if b.started == nil {
		b.started = make(chan struct{})
		b.stopped = make(chan struct{})
	}
}

// Start derives the service's context from ctx and runs each task in a
// goroutine of its own under it. Cancelling ctx stops the tasks as Stop
// does; pass context.WithoutCancel(ctx) for a service that only Stop ends.
func (b *Base) Start(ctx context.Context, tasks ...func(context.Context)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	if b.state != 0 {
		return ErrStarted
	}
	b.state = 1
	b.ctx, b.cancel = context.WithCancel(ctx)
	for _, t := range tasks {
		b.goLocked(t)
	}
	close(b.started)
	return nil
}

// Go runs one more task under the service's context, for work that begins
// after Start. It reports false, running nothing, when the service is not
// running.
func (b *Base) Go(task func(context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != 1 {
		return false
	}
	b.goLocked(task)
	return true
}

func (b *Base) goLocked(task func(context.Context)) {
	b.wg.Add(1)
	ctx := b.ctx
	go func() {
		defer b.wg.Done()
		task(ctx)
	}()
}

// Context is the context the tasks run under: nil before Start, done once
// Stop has begun.
func (b *Base) Context() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ctx
}

// Stop cancels the tasks' context and waits for every task to return, or
// for ctx to end, whichever is first; then the error wraps ctx.Err() and
// the tasks may still be running (Wait waits on).
func (b *Base) Stop(ctx context.Context) error {
	b.mu.Lock()
	b.init()
	if b.state == 0 {
		b.mu.Unlock()
		return nil
	}
	first := b.state == 1
	b.state = 2
	cancel := b.cancel
	b.mu.Unlock()
	cancel()
	if first {
		go func() {
			b.wg.Wait()
			close(b.stopped)
		}()
	}
	return b.Wait(ctx)
}

// Wait waits, within ctx, until a stopped service's tasks have returned.
func (b *Base) Wait(ctx context.Context) error {
	select {
	case <-b.Stopped():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop: tasks still running: %w", ctx.Err())
	}
}

// Started is closed once Start has launched the tasks.
func (b *Base) Started() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.started
}

// Stopped is closed once Stop was called and every task has returned.
func (b *Base) Stopped() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.stopped
}
