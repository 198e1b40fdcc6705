// Package clocktest is the controllable clock for tests. Only test files
// import it (a test in package clock checks), so production code cannot
// run on a clock that never moves.
package clocktest

import (
	"sort"
	"sync"
	"time"

	"github.com/factline/factline/internal/clock"
)

// Manual is a clock that moves only when told to. It is safe for
// concurrent use.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
	waiting chan struct{} // closed and replaced when a wait is registered
}

type waiter struct {
	at time.Time
	ch chan struct{}
}

var _ clock.Clock = (*Manual)(nil)

// New returns a clock standing at t.
func New(t time.Time) *Manual { return &Manual{now: t, waiting: make(chan struct{})} }

// Now returns the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Until returns a channel closed when the clock reaches t.
func (c *Manual) Until(t time.Time) (<-chan struct{}, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &waiter{at: t, ch: make(chan struct{})}
	if !t.After(c.now) {
		close(w.ch)
		return w.ch, func() {}
	}
	c.waiters = append(c.waiters, w)
	close(c.waiting)
	c.waiting = make(chan struct{})
	return w.ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.waiters {
			if x == w {
				c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
				break
			}
		}
	}
}

// Advance moves the clock forward by d and wakes every waiter whose time
// has come, earliest first.
func (c *Manual) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (never backwards) and wakes waiters.
func (c *Manual) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	sort.SliceStable(c.waiters, func(i, j int) bool { return c.waiters[i].at.Before(c.waiters[j].at) })
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
}

// Waiters returns how many waits are pending (tests use it to know a
// background loop is idle before moving the clock).
func (c *Manual) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// Waiting returns a channel closed at the next wait registered after the
// call: a signal that a background loop reached its timer.
func (c *Manual) Waiting() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}
