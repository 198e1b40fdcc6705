package ratelimit_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/factline/factline/internal/host/ratelimit"
)

// benchAllow runs Allow in parallel over 1024 keys at a limit high enough
// that most requests pass (a rejection costs the same).
func benchAllow(b *testing.B, lim ratelimit.Limiter) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i)
	}
	var next atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 7919
		for pb.Next() {
			if _, err := lim.Allow(ctx, keys[i%len(keys)], 1_000_000); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

func BenchmarkMemoryAllow(b *testing.B) {
	benchAllow(b, ratelimit.NewMemory(ratelimit.MemoryOptions{}))
}

func BenchmarkRedisAllow(b *testing.B) {
	benchAllow(b, ratelimit.NewRedis(redisClient(b), ratelimit.RedisOptions{CallTimeout: patient}))
}

// benchHotKey runs Allow in parallel on one key at a large limit: the
// gateway benchmark's load, with and without leases.
func benchHotKey(b *testing.B, maxLease int) {
	lim := ratelimit.NewRedis(redisClient(b), ratelimit.RedisOptions{CallTimeout: patient, MaxLease: maxLease})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := lim.Allow(ctx, "hot", ratelimit.MaxRPM); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkRedisAllowHotKey(b *testing.B) {
	b.Run("one call per request", func(b *testing.B) { benchHotKey(b, 1) })
	b.Run("leased", func(b *testing.B) { benchHotKey(b, 0) })
}
