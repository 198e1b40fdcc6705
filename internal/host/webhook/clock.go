package webhook

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and wakes waiters at a time. The service reads every
// timestamp it records (signature timestamps, retry times, audit facts)
// and schedules every retry through its Clock, so tests control time with
// a [ManualClock] instead of sleeping. HTTP timeouts and measured response
// times use real time: the network does not run on a test clock.
type Clock interface {
	Now() time.Time
	// Until returns a channel that is closed once the clock reaches t (at
	// once when it already has), and a function that releases the wait.
	Until(t time.Time) (<-chan struct{}, func())
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Until closes the channel at t.
func (SystemClock) Until(t time.Time) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	d := time.Until(t)
	if d <= 0 {
		close(ch)
		return ch, func() {}
	}
	timer := time.AfterFunc(d, func() { close(ch) })
	return ch, func() { timer.Stop() }
}

// ManualClock is a Clock that moves only when told to. It is safe for
// concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*clockWaiter
}

type clockWaiter struct {
	at   time.Time
	ch   chan struct{}
	done bool
}

var (
	_ Clock = SystemClock{}
	_ Clock = (*ManualClock)(nil)
)

// NewManualClock returns a clock standing at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Until returns a channel closed when the clock reaches t.
func (c *ManualClock) Until(t time.Time) (<-chan struct{}, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &clockWaiter{at: t, ch: make(chan struct{})}
	if !t.After(c.now) {
		close(w.ch)
		w.done = true
		return w.ch, func() {}
	}
	c.waiters = append(c.waiters, w)
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
func (c *ManualClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (never backwards) and wakes waiters.
func (c *ManualClock) Set(t time.Time) {
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
			w.done = true
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
}

// Waiters returns how many waits are pending (tests use it to know a
// background loop is idle before moving the clock).
func (c *ManualClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}
