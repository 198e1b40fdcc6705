package app

import (
	"context"
	"time"

	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/ratelimit"
)

type limiterParts struct {
	check gateway.HealthCheck
	close func() error
}

// newLimiter builds the Redis limiter when a Redis URL is set, else the
// in-process one.
func newLimiter(ctx context.Context, cfg Config) (gateway.RateLimiter, limiterParts, error) {
	if cfg.RedisURL == "" {
		m := ratelimit.NewMemory(ratelimit.MemoryOptions{})
		return m, limiterParts{check: gateway.HealthCheck{Name: "ratelimit", Check: m.Check}, close: func() error { return nil }}, nil
	}
	rc, err := parseRedisURL(cfg.RedisURL)
	if err != nil {
		return nil, limiterParts{}, err
	}
	// The limiter bounds each call through its context
	// (RedisOptions.CallTimeout) and fails fast when Redis is down.
	client := rc.failFast().client()
	l := ratelimit.NewRedis(client, ratelimit.RedisOptions{FailOpen: cfg.RateLimitFailOpen, CallTimeout: cfg.RateLimitCallTimeout, Logger: cfg.Logger})
	// A Redis that is down at start is not fatal (the limiter fails open
	// or closed as configured, and /ready says so); warming only spares
	// the first requests the cold client's work.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if err := l.Warm(wctx); err != nil && cfg.Logger != nil {
		cfg.Logger.Warn("rate limiter: Redis not ready at start", "err", err)
	}
	cancel()
	mode := "fail-closed"
	if cfg.RateLimitFailOpen {
		mode = "fail-open"
	}
	check := gateway.HealthCheck{
		Name: "ratelimit",
		// Failing closed turns a Redis outage into refused requests, so
		// then it is critical.
		Critical:   !cfg.RateLimitFailOpen,
		Dependency: "redis",
		Check: func(ctx context.Context) (string, error) {
			detail, err := l.Check(ctx)
			return detail + " (" + mode + ")", err
		},
	}
	return l, limiterParts{check: check, close: client.Close}, nil
}
