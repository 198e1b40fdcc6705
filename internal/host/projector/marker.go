package projector

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Marker records, beside the cached state, that a projection's state was
// built from the first fact. A runtime marks its state key before it
// writes any state; at its next start a checkpoint past 0 with no mark and
// no stored state means the state was lost (a flushed or new Redis, a
// restored database, an in-process state after a restart), and the
// projection rebuilds from position 0 instead of reading on from a
// checkpoint its state no longer reflects.
type Marker interface {
	Marked(ctx context.Context, stateKey string) (bool, error)
	Mark(ctx context.Context, stateKey string) error
	Unmark(ctx context.Context, stateKey string) error
}

// MemoryMarker keeps marks in process, for in-process cached state: both
// go with the process.
type MemoryMarker struct {
	mu   sync.Mutex
	keys map[string]bool
}

// NewMemoryMarker returns an empty in-process marker.
func NewMemoryMarker() *MemoryMarker { return &MemoryMarker{keys: map[string]bool{}} }

func (m *MemoryMarker) Marked(_ context.Context, key string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keys[key], nil
}

func (m *MemoryMarker) Mark(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[key] = true
	return nil
}

func (m *MemoryMarker) Unmark(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, key)
	return nil
}

// RedisMarker keeps marks in the Redis that holds the cached state, one
// key per state key under prefix, so that whatever empties that Redis
// empties the marks too.
type RedisMarker struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewRedisMarker returns a marker whose keys are prefix + state key.
func NewRedisMarker(rdb redis.UniversalClient, prefix string) *RedisMarker {
	return &RedisMarker{rdb: rdb, prefix: prefix}
}

func (m *RedisMarker) Marked(ctx context.Context, key string) (bool, error) {
	n, err := m.rdb.Exists(ctx, m.prefix+key).Result()
	if err != nil {
		return false, fmt.Errorf("projection marker %s: %w", key, err)
	}
	return n == 1, nil
}

func (m *RedisMarker) Mark(ctx context.Context, key string) error {
	if err := m.rdb.Set(ctx, m.prefix+key, "1", 0).Err(); err != nil {
		return fmt.Errorf("projection marker %s: %w", key, err)
	}
	return nil
}

func (m *RedisMarker) Unmark(ctx context.Context, key string) error {
	if err := m.rdb.Del(ctx, m.prefix+key).Err(); err != nil {
		return fmt.Errorf("projection marker %s: %w", key, err)
	}
	return nil
}
