package stream

import (
	"context"
	"sync"
	"time"

	"github.com/factline/factline/internal/host/store"
)

// LagSample is the stream's head and every consumer's lag at one moment.
type LagSample struct {
	At   int64            `json:"at"` // ms since the epoch
	Head int64            `json:"head"`
	Lag  map[string]int64 `json:"lag"`
}

// LagHistory keeps the last samples of the consumers' lag in a ring, in
// memory: it is the history of one process and starts empty.
type LagHistory struct {
	mu   sync.Mutex
	ring []LagSample
	next int
	full bool
	keep func(consumer string) bool
}

// NewLagHistory keeps the last size samples of the consumers keep holds
// (every consumer when keep is nil): a checkpoint outlives its consumer,
// and one nobody runs would show a lag that only grows.
func NewLagHistory(size int, keep func(consumer string) bool) *LagHistory {
	return &LagHistory{ring: make([]LagSample, max(size, 1)), keep: keep}
}

// Sample reads the head and the checkpoints and records them as of now.
func (h *LagHistory) Sample(ctx context.Context, st store.Store, now time.Time) error {
	head, err := st.HeadPosition(ctx)
	if err != nil {
		return err
	}
	cps, err := st.ListCheckpoints(ctx)
	if err != nil {
		return err
	}
	s := LagSample{At: now.UnixMilli(), Head: head, Lag: make(map[string]int64, len(cps))}
	for name, pos := range cps {
		if h.keep == nil || h.keep(name) {
			s.Lag[name] = head - pos
		}
	}
	h.mu.Lock()
	h.ring[h.next] = s
	h.next = (h.next + 1) % len(h.ring)
	h.full = h.full || h.next == 0
	h.mu.Unlock()
	return nil
}

// Samples returns the samples kept, oldest first.
func (h *LagHistory) Samples() []LagSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.full {
		return append([]LagSample{}, h.ring[:h.next]...)
	}
	return append(append([]LagSample{}, h.ring[h.next:]...), h.ring[:h.next]...)
}

// Run samples at once and then every interval until ctx ends; a failed
// sample is reported to onErr and skipped.
func (h *LagHistory) Run(ctx context.Context, st store.Store, every time.Duration, onErr func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := h.Sample(ctx, st, time.Now()); err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
