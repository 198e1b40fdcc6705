package gateway

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

const waitLimit = 10 * time.Second

func waitDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(waitLimit):
		t.Fatalf("%s: not done after %v", what, waitLimit)
	}
}

func TestRequestContextDeadline(t *testing.T) {
	t.Parallel()
	c := newRequestContext(30 * time.Millisecond)
	defer c.cancel()
	if d, ok := c.Deadline(); !ok || time.Until(d) > 30*time.Millisecond {
		t.Fatalf("Deadline = %v, %v", d, ok)
	}
	if c.Err() != nil || c.Value("k") != nil {
		t.Fatalf("a fresh context: Err %v, Value %v", c.Err(), c.Value("k"))
	}
	waitDone(t, c, "the deadline")
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", c.Err())
	}
	c.cancel()
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("cancel after the deadline changed Err to %v", c.Err())
	}
}

// TestRequestContextNoTimer: past its deadline a context nobody waited on
// reports DeadlineExceeded, and a Done asked for then is closed.
func TestRequestContextNoTimer(t *testing.T) {
	t.Parallel()
	c := newRequestContext(-time.Millisecond)
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v", c.Err())
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done of an expired context is open")
	}
	c2 := newRequestContext(time.Hour)
	if c2.timer != nil || c2.done != nil {
		t.Fatal("a context nobody waits on started a timer")
	}
	c2.cancel()
	waitDone(t, c2, "Done after cancel")
}

func TestRequestContextCancel(t *testing.T) {
	t.Parallel()
	c := newRequestContext(time.Hour)
	done := c.Done()
	c.cancel()
	<-done
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err = %v, want Canceled", c.Err())
	}
	if c.timer.Stop() {
		t.Fatal("the timer still runs after cancel")
	}
}

// TestRequestContextDerived: contexts derived from a request context end
// with it, without a goroutine each while it lasts, and take its deadline.
func TestRequestContextDerived(t *testing.T) {
	t.Parallel()
	c := newRequestContext(time.Hour)
	before := runtime.NumGoroutine()
	var children []context.Context
	for range 100 {
		child, cancel := context.WithCancel(c)
		defer cancel()
		children = append(children, child)
	}
	short, cancelShort := context.WithTimeout(c, 2*time.Hour)
	defer cancelShort()
	if d, _ := short.Deadline(); !d.Equal(c.deadline) {
		t.Fatalf("a derived timeout's deadline %v, want the request's %v", d, c.deadline)
	}
	if n := runtime.NumGoroutine() - before; n > 10 {
		t.Fatalf("%d goroutines for 100 derived contexts", n)
	}
	// One child cancelled on its own leaves the request and the others.
	child, cancel := context.WithCancel(c)
	cancel()
	<-child.Done()
	if c.Err() != nil || children[0].Err() != nil {
		t.Fatal("cancelling a child ended its parent or a sibling")
	}
	ran := make(chan struct{})
	stopped := make(chan struct{})
	context.AfterFunc(c, func() { close(ran) })
	stop := context.AfterFunc(c, func() { close(stopped) })
	if !stop() {
		t.Fatal("stop of a pending AfterFunc reported false")
	}
	c.cancel()
	for _, ch := range append(children, short) {
		waitDone(t, ch, "a derived context")
		if !errors.Is(ch.Err(), context.Canceled) {
			t.Fatalf("derived Err = %v, want Canceled", ch.Err())
		}
	}
	select {
	case <-ran:
	case <-time.After(waitLimit):
		t.Fatal("AfterFunc did not run")
	}
	select {
	case <-stopped:
		t.Fatal("a stopped AfterFunc ran")
	default:
	}
	// Registered after the end: runs at once.
	late := make(chan struct{})
	context.AfterFunc(c, func() { close(late) })
	select {
	case <-late:
	case <-time.After(waitLimit):
		t.Fatal("AfterFunc on an ended context did not run")
	}
}

// TestRequestContextConcurrent hammers every method at once (run with
// -race).
func TestRequestContextConcurrent(t *testing.T) {
	t.Parallel()
	for range 200 {
		c := newRequestContext(time.Millisecond)
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch i {
				case 0:
					<-c.Done()
				case 1:
					child, cancel := context.WithCancel(c)
					<-child.Done()
					cancel()
				case 2:
					for c.Err() == nil {
						runtime.Gosched()
					}
				case 3:
					c.cancel()
				}
			}()
		}
		wg.Wait()
		if c.Err() == nil {
			t.Fatal("context did not end")
		}
	}
}
