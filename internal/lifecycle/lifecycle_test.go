package lifecycle_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/factline/factline/internal/lifecycle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait on a signal; far above anything a loaded machine
// needs, it only turns a hang into a failure.
const wait = 30 * time.Second

func recv(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatalf("no %s within %v", what, wait)
	}
}

func TestSecondStartIsAnError(t *testing.T) {
	t.Parallel()
	var b lifecycle.Base
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	if err := b.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("Start after Stop: %v, want ErrStarted", err)
	}
}

func TestStopWaitsForEveryTask(t *testing.T) {
	t.Parallel()
	var b lifecycle.Base
	var returned atomic.Int32
	task := func(ctx context.Context) {
		<-ctx.Done()
		returned.Add(1)
	}
	if err := b.Start(t.Context(), task, task); err != nil {
		t.Fatal(err)
	}
	if !b.Go(task) {
		t.Fatal("Go on a running service ran nothing")
	}
	if err := b.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := returned.Load(); n != 3 {
		t.Fatalf("Stop returned with %d of 3 tasks returned", n)
	}
	recv(t, b.Stopped(), "Stopped signal")
}

func TestStopBeforeStartDoesNothing(t *testing.T) {
	t.Parallel()
	var b lifecycle.Base
	if err := b.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Stopped():
		t.Fatal("Stopped signalled for a service never started")
	default:
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatalf("Start after an early Stop: %v", err)
	}
	if err := b.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestStopGivesUpWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	var b lifecycle.Base
	release := make(chan struct{})
	if err := b.Start(t.Context(), func(context.Context) { <-release }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with an ended context: %v, want context.Canceled", err)
	}
	close(release)
	if err := b.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(t.Context()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestStartedSignalsAndTasksSeeTheContext(t *testing.T) {
	t.Parallel()
	var b lifecycle.Base
	started := b.Started()
	select {
	case <-started:
		t.Fatal("Started signalled before Start")
	default:
	}
	if b.Context() != nil {
		t.Fatal("a context before Start")
	}
	ran := make(chan struct{})
	if err := b.Start(t.Context(), func(ctx context.Context) {
		if ctx != b.Context() {
			t.Error("the task runs under another context than Context()")
		}
		close(ran)
	}); err != nil {
		t.Fatal(err)
	}
	recv(t, started, "Started signal")
	recv(t, ran, "task run")
	if err := b.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if b.Context().Err() == nil {
		t.Fatal("the tasks' context is still live after Stop")
	}
}

func TestCancelledParentStopsTheTasks(t *testing.T) {
	t.Parallel()
	var b lifecycle.Base
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	if err := b.Start(ctx, func(ctx context.Context) { <-ctx.Done(); close(done) }); err != nil {
		t.Fatal(err)
	}
	cancel()
	recv(t, done, "task end after the parent context was cancelled")
	if err := b.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestGoAfterStopRunsNothing(t *testing.T) {
	t.Parallel()
	var b lifecycle.Base
	if b.Go(func(context.Context) { t.Error("ran before Start") }) {
		t.Fatal("Go before Start reported a task started")
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if b.Go(func(context.Context) { t.Error("ran after Stop") }) {
		t.Fatal("Go after Stop reported a task started")
	}
}
