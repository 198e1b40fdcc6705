// Package clock is the host's one source of time for decisions: retry and
// signature times, projection buckets, rate limits. Services take a Clock
// (default Real); tests pass the controllable one from package clocktest
// and move time instead of sleeping.
package clock

import "time"

// Clock tells the time and wakes waiters at a time.
type Clock interface {
	Now() time.Time
	// Until returns a channel that is closed once the clock reaches t (at
	// once when it already has), and a function that releases the wait.
	Until(t time.Time) (<-chan struct{}, func())
}

// Real is the wall clock.
var Real Clock = system{}

// Or returns c, or Real when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// After waits d on c, as Until does.
func After(c Clock, d time.Duration) (<-chan struct{}, func()) {
	return c.Until(c.Now().Add(d))
}

type system struct{}

func (system) Now() time.Time { return time.Now() }

func (system) Until(t time.Time) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	d := time.Until(t)
	if d <= 0 {
		close(ch)
		return ch, func() {}
	}
	timer := time.AfterFunc(d, func() { close(ch) })
	return ch, func() { timer.Stop() }
}
