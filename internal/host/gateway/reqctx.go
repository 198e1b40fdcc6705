package gateway

import (
	"context"
	"sync"
	"time"
)

// requestContext is the context of one request: it ends at its deadline or
// when the request is over (cancel), whichever comes first. Unlike
// context.WithTimeout it starts no timer until something waits on it: a
// request served from memory (a cached entity, a leased rate limit) never
// does, and then the context costs one allocation and no timer.
//
// It implements AfterFunc, so contexts derived from it (and
// context.AfterFunc) hook onto it without a goroutine each.
type requestContext struct {
	deadline time.Time
	// values, when set, answers Value: it carries the request's span
	// when tracing is on.
	values context.Context
	// stopping, when set, ends the context (Canceled) when it ends: the
	// server stopping the requests a shutdown's drain did not finish.
	stopping context.Context
	stopHook func() bool // unregisters the hook on stopping

	mu     sync.Mutex
	done   chan struct{} // made by the first Done or AfterFunc
	timer  *time.Timer   // fires at the deadline once done is made
	err    error         // set when the context ends
	afters []*afterFunc  // registered by AfterFunc, run when it ends
}

type afterFunc struct{ f func() }

var _ interface {
	context.Context
	AfterFunc(func()) func() bool
} = (*requestContext)(nil)

func newRequestContext(timeout time.Duration) *requestContext {
	return &requestContext{deadline: time.Now().Add(timeout)}
}

// Deadline implements context.Context.
func (c *requestContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Value implements context.Context; the context carries only the values
// of c.values (the request's span), if any.
func (c *requestContext) Value(key any) any {
	if c.values == nil {
		return nil
	}
	return c.values.Value(key)
}

// Done implements context.Context.
func (c *requestContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked()
	return c.done
}

// Err implements context.Context. Past the deadline it is
// DeadlineExceeded even when no timer runs.
func (c *requestContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && !time.Now().Before(c.deadline) {
		c.endLocked(context.DeadlineExceeded)
	}
	return c.err
}

// AfterFunc arranges for f to run in its own goroutine once the context
// ends; stop unregisters it and reports whether that kept it from running.
// context.AfterFunc and the context package's derived contexts use it.
func (c *requestContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	c.afters = append(c.afters, a)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.afters {
			if x == a {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// cancel ends the context, if it has not ended yet, and releases its
// timer. The request's middleware calls it when the request is over.
func (c *requestContext) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked(context.Canceled)
}

// armLocked makes the done channel and starts the deadline's timer, once;
// c.mu is held.
func (c *requestContext) armLocked() {
	if c.done != nil {
		return
	}
	c.done = make(chan struct{})
	if c.err != nil {
		close(c.done)
		return
	}
	if c.stopping != nil {
		c.stopHook = context.AfterFunc(c.stopping, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.endLocked(context.Canceled)
		})
	}
	d := time.Until(c.deadline)
	if d <= 0 {
		c.endLocked(context.DeadlineExceeded)
		return
	}
	c.timer = time.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.endLocked(context.DeadlineExceeded)
	})
}

// endLocked ends the context with err unless it has ended; c.mu is held.
func (c *requestContext) endLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stopHook != nil {
		c.stopHook()
	}
	for _, a := range c.afters {
		go a.f()
	}
	c.afters = nil
}
