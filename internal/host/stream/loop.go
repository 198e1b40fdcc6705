package stream

import (
	"context"
	"log/slog"
	"time"

	"github.com/factline/factline/internal/host/store"
)

// loop is the read loop of every reader of the stream, a lone Consumer or
// a Group: it handles batches, waits between them for a notification of
// new facts or the poll interval, and backs off after a failure.
//
// A subscription that cannot be made (a LISTEN connection refused, a
// database still starting) or that ends does not stop the reader: it polls
// meanwhile and subscribes again after the backoff.
type loop struct {
	store        store.Store
	batchSize    int
	pollInterval time.Duration
	log          *slog.Logger
}

// run calls step until ctx ends or idle returns true. step handles one
// batch and returns how many facts it read; when it fails, failed is
// called and step is retried after the backoff. After every batch idle,
// when set, is called; true ends run. run reports whether idle ended it.
func (l loop) run(ctx context.Context, step func(context.Context) (int, error), failed func(), idle func(context.Context) bool) bool {
	var (
		wake      <-chan struct{}
		subscribe time.Time // when to try to subscribe again
		subFails  backoff
		fails     backoff
	)
	// Subscriptions end with run: a consumer that joins a group stops
	// being woken for itself.
	subCtx, unsubscribe := context.WithCancel(ctx)
	defer unsubscribe()
	for {
		if wake == nil && !time.Now().Before(subscribe) {
			w, err := l.store.SubscribeFacts(subCtx)
			switch {
			case err == nil:
				wake = w
				subFails.reset()
			case ctx.Err() == nil:
				d := subFails.next()
				subscribe = time.Now().Add(d)
				l.log.Warn("stream: subscribe to new facts failed; polling meanwhile", "retry_in", d, "err", err)
			}
		}
		n, err := step(ctx)
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			if failed != nil {
				failed()
			}
			d := fails.next()
			l.log.Warn("stream batch failed; retrying", "retry_in", d, "err", err)
			if !sleep(ctx, d) {
				return false
			}
			continue
		}
		fails.reset()
		if idle != nil && idle(ctx) {
			return true
		}
		if n == l.batchSize {
			continue // more may be waiting
		}
		wait := l.pollInterval
		if wake == nil {
			wait = min(wait, time.Until(subscribe))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case _, ok := <-wake:
			if !ok {
				wake = nil // the subscription ended: subscribe again
			}
		case <-t.C:
		}
		t.Stop()
	}
}

// retry calls fn until it succeeds, backing off between attempts; it
// reports false when ctx ended first. It is the start-up of every reader.
func retry[T any](ctx context.Context, log *slog.Logger, what string, fn func(context.Context) (T, error)) (T, bool) {
	var b backoff
	for {
		v, err := fn(ctx)
		if err == nil {
			return v, true
		}
		if ctx.Err() != nil {
			return v, false
		}
		d := b.next()
		log.Warn("stream consumer cannot start; retrying", "step", what, "retry_in", d, "err", err)
		if !sleep(ctx, d) {
			return v, false
		}
	}
}

// backoff is the one retry policy of the stream's readers: 100 ms, doubled
// after each failure up to 30 s, back to the start after a success.
type backoff struct{ d time.Duration }

const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 30 * time.Second
)

func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = backoffMin
	} else {
		b.d = min(2*b.d, backoffMax)
	}
	return b.d
}

func (b *backoff) reset() { b.d = 0 }

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
