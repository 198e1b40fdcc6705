package app

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/host/gateway"
	"github.com/factline/factline/host/ratelimit"
)

type limiterParts struct {
	check gateway.HealthCheck
	close func() error
}

// newLimiter builds the Redis limiter when a Redis URL is set, else the
// in-process one.
func newLimiter(_ context.Context, cfg Config) (gateway.RateLimiter, limiterParts, error) {
	if cfg.RedisURL == "" {
		m := ratelimit.NewMemory(ratelimit.MemoryOptions{})
		return m, limiterParts{check: gateway.HealthCheck{Name: "ratelimit", Check: m.Check}, close: func() error { return nil }}, nil
	}
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, limiterParts{}, fmt.Errorf("redis url: %w", err)
	}
	// A limiter sits on the request path: when Redis is down, fail fast
	// (open or closed) instead of retrying for most of a second.
	if opt.MaxRetries == 0 {
		opt.MaxRetries = 1
	}
	opt.DialerRetries = 1
	if opt.DialTimeout == 0 || opt.DialTimeout > time.Second {
		opt.DialTimeout = 500 * time.Millisecond
	}
	if opt.ReadTimeout == 0 || opt.ReadTimeout > time.Second {
		opt.ReadTimeout = 500 * time.Millisecond
	}
	if opt.WriteTimeout == 0 || opt.WriteTimeout > time.Second {
		opt.WriteTimeout = 500 * time.Millisecond
	}
	// The limiter bounds each call through its context
	// (RedisOptions.CallTimeout), which go-redis honours only when told to.
	opt.ContextTimeoutEnabled = true
	client := redis.NewClient(opt)
	l := ratelimit.NewRedis(client, ratelimit.RedisOptions{FailOpen: cfg.RateLimitFailOpen, Logger: cfg.Logger})
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
