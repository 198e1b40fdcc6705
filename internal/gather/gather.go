// Package gather shares round trips among concurrent calls: the calls that
// arrive while a round trip is in flight are gathered and sent together
// in the next one.
//
// A Gatherer guarantees that a lone call goes out at once, in a round trip
// of its own; that at most Flights round trips are in flight; that a
// round trip carries calls of at most Max weight (a single heavier call
// still goes, alone); that calls go out in the order they arrived; and
// that each caller waits for its own round trip or for its context,
// whichever comes first. What a round trip does with a caller that gave
// up is the flush func's choice. No goroutine outlives the last round
// trip.
package gather

import (
	"context"
	"sync"
)

// Config bounds a Gatherer.
type Config[T any] struct {
	// Flights is the number of round trips in flight at once; at least 1.
	Flights int
	// Max bounds the weight of one round trip; 0 leaves it unbounded.
	Max int
	// Weight is the weight of one call; nil weighs every call 1.
	Weight func(T) int
}

// Gatherer gathers calls of type T (usually a pointer to a request that
// the flush func fills in) into batches and hands each batch to its flush
// func, one round trip per batch.
type Gatherer[T any] struct {
	cfg   Config[T]
	flush func(batch []T)

	mu      sync.Mutex
	pending []T
	done    []chan struct{} // done[i] is closed once pending[i] was flushed
	flights int             // flush loops running
}

// New returns a Gatherer that sends each batch with flush. flush runs on
// a goroutine of the Gatherer, never concurrently with itself for more
// than cfg.Flights batches; it reports results through the calls.
func New[T any](cfg Config[T], flush func(batch []T)) *Gatherer[T] {
	cfg.Flights = max(cfg.Flights, 1)
	return &Gatherer[T]{cfg: cfg, flush: flush}
}

// Do sends call in the next round trip with the calls that arrive
// meanwhile, and returns nil once that round trip is done, or ctx.Err()
// when ctx ends first (the call may still be sent).
func (g *Gatherer[T]) Do(ctx context.Context, call T) error {
	done := make(chan struct{})
	g.mu.Lock()
	g.pending = append(g.pending, call)
	g.done = append(g.done, done)
	start := g.flights < g.cfg.Flights
	if start {
		g.flights++
	}
	g.mu.Unlock()
	if start {
		go g.flushLoop()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pending is the number of calls waiting for a round trip.
func (g *Gatherer[T]) Pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// flushLoop sends what is pending, one round trip at a time, until
// nothing is.
func (g *Gatherer[T]) flushLoop() {
	for {
		g.mu.Lock()
		n := g.take()
		if n == 0 {
			g.flights--
			if g.flights == 0 {
				g.pending, g.done = nil, nil
			}
			g.mu.Unlock()
			return
		}
		batch, done := g.pending[:n:n], g.done[:n:n]
		g.pending, g.done = g.pending[n:], g.done[n:]
		g.mu.Unlock()
		g.flush(batch)
		for _, d := range done {
			close(d)
		}
	}
}

// take is how many pending calls the next round trip carries: as many as
// fit its bound, and at least one.
func (g *Gatherer[T]) take() int {
	if g.cfg.Weight == nil {
		if g.cfg.Max <= 0 {
			return len(g.pending)
		}
		return min(len(g.pending), g.cfg.Max)
	}
	n, w := 0, 0
	for n < len(g.pending) {
		w += g.cfg.Weight(g.pending[n])
		if n > 0 && g.cfg.Max > 0 && w > g.cfg.Max {
			break
		}
		n++
	}
	return n
}
