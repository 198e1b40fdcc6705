package ratelimit

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/factline/factline/internal/clock"
)

// MemoryOptions configures NewMemory.
type MemoryOptions struct {
	// Clock decides; nil means clock.Real. Tests inject one.
	Clock clock.Clock
}

const (
	// shardCount is the number of independently locked parts of a Memory.
	shardCount = 64
	// sweepEvery is how often (at most) a shard drops its idle keys: those
	// whose allowance has fully refilled and so equal a key never seen.
	sweepEvery = int64(10 * time.Second / time.Microsecond)
)

// Memory is the in-process Limiter of one gateway process. Its memory is
// bounded by the keys used within the last minute or so: a shard drops the
// keys that have fully refilled at most every 10 s, lazily, on a request
// that reaches it. It starts no goroutine and needs no Close.
type Memory struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [shardCount]shard
}

type shard struct {
	mu        sync.Mutex
	tat       map[string]int64 // theoretical arrival time, µs since the epoch
	nextSweep int64            // µs since the epoch
	_         [40]byte         // keep shards on separate cache lines
}

var _ Limiter = (*Memory)(nil)

// NewMemory returns an empty in-process limiter.
func NewMemory(opts MemoryOptions) *Memory {
	m := &Memory{now: clock.Or(opts.Clock).Now, seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].tat = make(map[string]int64)
	}
	return m
}

// Allow implements Limiter.
func (m *Memory) Allow(_ context.Context, key string, rpm int) (Decision, error) {
	if err := checkRPM(rpm); err != nil {
		return Decision{}, err
	}
	now := m.now().UnixMicro()
	s := &m.shards[maphash.String(m.seed, key)%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	if now >= s.nextSweep {
		s.sweep(now)
	}
	tat, known := s.tat[key]
	d, next := decide(now, tat, rpm)
	if d.Allowed {
		if !known {
			// The caller's string may alias a buffer that is reused
			// (fiber's values are); the map keeps its own copy.
			key = strings.Clone(key)
		}
		s.tat[key] = next
	}
	return d, nil
}

// sweep drops the keys that have fully refilled by now.
func (s *shard) sweep(now int64) {
	for k, tat := range s.tat {
		if tat <= now {
			delete(s.tat, k)
		}
	}
	s.nextSweep = now + sweepEvery
}

// Check implements Limiter; the in-process limiter is always healthy.
func (m *Memory) Check(context.Context) (string, error) {
	return "in-process", nil
}
