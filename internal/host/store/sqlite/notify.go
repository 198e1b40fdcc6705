package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// broadcaster wakes fact subscribers in this process. Every subscriber has a
// channel with a buffer of one: a notification is dropped when one is
// already pending, so signals coalesce and the writer never blocks.
type broadcaster struct {
	mu     sync.Mutex
	subs   map[chan struct{}]func() bool // channel -> stop of its context.AfterFunc
	closed bool
}

func newBroadcaster() *broadcaster {
	return &broadcaster{subs: make(map[chan struct{}]func() bool)}
}

var errClosed = errors.New("store closed")

// subscribe registers a channel that is closed when ctx ends or the
// broadcaster closes.
func (b *broadcaster) subscribe(ctx context.Context) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed
	}
	ch := make(chan struct{}, 1)
	b.subs[ch] = context.AfterFunc(ctx, func() { b.unsubscribe(ch) })
	return ch, nil
}

func (b *broadcaster) unsubscribe(ch chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[ch]; ok {
		delete(b.subs, ch)
		close(ch)
	}
}

// notify signals every subscriber without blocking.
func (b *broadcaster) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// close closes every subscription and refuses new ones.
func (b *broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for ch, stop := range b.subs {
		stop()
		delete(b.subs, ch)
		close(ch)
	}
}

// SubscribeFacts returns a channel that receives a value after facts are
// committed by this Store. Signals coalesce; the channel closes when ctx ends
// or the Store is closed.
func (s *Store) SubscribeFacts(ctx context.Context) (<-chan struct{}, error) {
	ch, err := s.facts.subscribe(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: subscribe facts: %w", err)
	}
	return ch, nil
}
