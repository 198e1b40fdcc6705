package ratelimit

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/factline/factline/internal/clock"
	"github.com/factline/factline/internal/gather"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

// RedisOptions configures NewRedis.
type RedisOptions struct {
	// Prefix starts every key; default "factline:rl:".
	Prefix string
	// FailOpen allows requests while Redis fails (logging a warning at most
	// every few seconds, with Check reporting the failure); otherwise Allow
	// returns an error wrapping ErrUnavailable.
	FailOpen bool
	// Logger receives the fail-open warnings; nil means slog.Default().
	Logger *slog.Logger
	// MaxLease is the most requests of one key a script call admits at
	// once for this process to hand out (see lease.go); 0 means
	// DefaultMaxLease, 1 turns leasing off. A lease is never more than
	// rpm/1000, so limits below 2000 rpm are always decided one request
	// per script call.
	MaxLease int
	// CallTimeout bounds each call to Redis (one script run); 0 means
	// DefaultCallTimeout. It takes effect through the call's context, so
	// the client needs ContextTimeoutEnabled.
	CallTimeout time.Duration
	// BreakerFailures is how many calls in a row may fail (errors or
	// timeouts) before the limiter stops calling Redis for BreakerCooldown
	// and answers at once as FailOpen says; 0 means DefaultBreakerFailures.
	BreakerFailures int
	// BreakerCooldown is how long the limiter leaves Redis alone once the
	// breaker opens; then one call probes it and closes the breaker when
	// it succeeds. 0 means DefaultBreakerCooldown.
	BreakerCooldown time.Duration
	// Clock, when set, decides instead of the Redis server's clock (tests
	// drive time with it). Nil: the server's clock, so that processes whose
	// clocks disagree still share one limit; the local clock.Real then only
	// times leases.
	Clock clock.Clock
}

// Defaults of RedisOptions. A Redis script call takes well under a
// millisecond on a healthy server; 100 ms is a server in trouble, and a
// request should not wait longer than that for its limit.
const (
	DefaultCallTimeout     = 100 * time.Millisecond
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 2 * time.Second
)

// errBreakerOpen is the cause reported while the breaker keeps the limiter
// from calling Redis.
var errBreakerOpen = errors.New("redis left alone after repeated failures (circuit breaker open)")

// DefaultPrefix is the key prefix when RedisOptions.Prefix is empty.
const DefaultPrefix = "factline:rl:"

// warnEvery is the shortest time between two fail-open warnings.
const warnEvery = 5 * time.Second

// healthKey is the key Check exercises, after the prefix. The NUL byte keeps
// it apart from any key a route limit builds.
const healthKey = "\x00health"

//go:embed redis.lua
var gcraSource string

// gcraScript runs as EVALSHA, falling back to EVAL when the server does not
// have it cached.
var gcraScript = redis.NewScript(gcraSource)

// Redis is a Limiter whose state lives in Redis, shared by every gateway
// process that uses the same server and prefix. Each Allow is one round trip
// (one Lua script) and decides on the server's clock, except for large
// limits, where one round trip leases several admissions (see lease.go).
//
// The client's timeouts bound how long Allow waits for a failing server:
// give it short ones (and the request a deadline) so that failing open or
// closed happens quickly.
type Redis struct {
	client   redis.UniversalClient
	prefix   string
	failOpen bool
	log      *slog.Logger
	desc     string
	leaseCap int
	leases   *leaseTable
	timeout  time.Duration
	breaker  *gobreaker.CircuitBreaker[scriptResult]
	batch    *gather.Gatherer[*batchReq] // exact decisions sharing round trips

	// clk replaces the server clock when set (RedisOptions.Clock).
	clk clock.Clock

	lastWarn   atomic.Int64 // time.Now().UnixNano() of the last warning
	suppressed atomic.Int64 // failures not logged since then
}

var _ Limiter = (*Redis)(nil)

// NewRedis returns a limiter on client, which stays the caller's to close.
func NewRedis(client redis.UniversalClient, opts RedisOptions) *Redis {
	if client == nil {
		panic("ratelimit: NewRedis with a nil client")
	}
	r := &Redis{client: client, prefix: opts.Prefix, failOpen: opts.FailOpen, log: opts.Logger,
		leaseCap: opts.MaxLease, leases: newLeaseTable(), clk: opts.Clock}
	r.batch = r.newBatcher()
	if r.leaseCap == 0 {
		r.leaseCap = DefaultMaxLease
	}
	if r.prefix == "" {
		r.prefix = DefaultPrefix
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.desc = "redis " + addrOf(client)
	r.timeout = cmp.Or(opts.CallTimeout, DefaultCallTimeout)
	failures := uint32(cmp.Or(opts.BreakerFailures, DefaultBreakerFailures))
	r.breaker = gobreaker.NewCircuitBreaker[scriptResult](gobreaker.Settings{
		Name:        r.desc,
		MaxRequests: 1, // one probe at a time while half-open
		Timeout:     cmp.Or(opts.BreakerCooldown, DefaultBreakerCooldown),
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		// A caller that went away says nothing about Redis.
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
		// Info: the failures themselves are warned about (fail-open) or
		// answered 503 (fail-closed) already.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			r.log.Info("rate limiter circuit breaker", "backend", r.desc, "from", from.String(), "to", to.String())
		},
	})
	return r
}

// Allow implements Limiter. While Redis fails, a fail-open limiter allows
// the request with the decision of a fresh key; a fail-closed one returns
// an error wrapping ErrUnavailable.
func (r *Redis) Allow(ctx context.Context, key string, rpm int) (Decision, error) {
	if err := checkRPM(rpm); err != nil {
		return Decision{}, err
	}
	var (
		d   Decision
		err error
	)
	if most := r.maxLease(rpm); most > 1 {
		d, err = r.allowLeased(ctx, key, rpm, most)
	} else {
		d, err = r.run(ctx, r.prefix+key, rpm)
	}
	if err == nil {
		return d, nil
	}
	if !r.failOpen {
		return Decision{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	r.warn(err)
	d, _ = decide(0, 0, rpm)
	d.Uncounted = true
	return d, nil
}

// run executes the script for one request.
func (r *Redis) run(ctx context.Context, key string, rpm int) (Decision, error) {
	res, err := r.decide(ctx, key, rpm)
	if err != nil {
		return Decision{}, err
	}
	return Decision{
		Allowed:    res.admitted == 1,
		Limit:      rpm,
		Remaining:  res.remaining,
		RetryAfter: micros(res.retryAfter),
		ResetAfter: micros(res.resetAfter),
	}, nil
}

// scriptResult is what the script answered.
type scriptResult struct {
	admitted   int // 0..n
	remaining  int
	retryAfter int64 // µs
	resetAfter int64 // µs
}

// script runs the script for n requests of key arriving together, within
// the call timeout and unless the breaker is open.
func (r *Redis) script(ctx context.Context, key string, rpm, n int) (scriptResult, error) {
	res, err := r.breaker.Execute(func() (scriptResult, error) {
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		defer cancel()
		return r.runScript(cctx, key, rpm, n)
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return scriptResult{}, errBreakerOpen
	}
	return res, err
}

// reloadSlots has a Redis Cluster client reload the cluster's slot map
// (in the background) after a call failed in a way a failover explains:
// the node did not answer (a connection error or a timeout), or the
// cluster said it is down or moving. Left alone, the client keeps sending
// the key's slot to a dead master until its periodic reload (every
// minute by default), long after a replica took over; MOVED replies it
// follows itself. Reloads are coalesced by the client, and the breaker
// keeps a failing cluster from being asked more than once per cooldown.
func (r *Redis) reloadSlots(err error) {
	c, ok := r.client.(*redis.ClusterClient)
	if !ok || errors.Is(err, context.Canceled) {
		return
	}
	var reply redis.Error
	if !errors.As(err, &reply) || redis.IsClusterDownError(err) || redis.IsTryAgainError(err) || redis.IsMasterDownError(err) {
		c.ReloadState(context.Background())
	}
}

func (r *Redis) runScript(ctx context.Context, key string, rpm, n int) (scriptResult, error) {
	now := ""
	if r.clk != nil {
		now = strconv.FormatInt(r.clk.Now().UnixMicro(), 10)
	}
	res, err := gcraScript.Run(ctx, r.client, []string{key}, rpm, interval(rpm), now, n).Int64Slice()
	if err != nil {
		r.reloadSlots(err)
		return scriptResult{}, err
	}
	if len(res) != 4 || res[0] < 0 || res[0] > int64(n) {
		return scriptResult{}, fmt.Errorf("ratelimit: script returned %v, want 4 values admitting 0..%d", res, n)
	}
	return scriptResult{admitted: int(res[0]), remaining: int(res[1]), retryAfter: res[2], resetAfter: res[3]}, nil
}

// clock is the limiter's local clock: the test clock when one is set.
func (r *Redis) clock() time.Time {
	return clock.Or(r.clk).Now()
}

// warn logs a fail-open failure, at most once every warnEvery.
func (r *Redis) warn(err error) {
	now := time.Now().UnixNano()
	last := r.lastWarn.Load()
	if (last != 0 && now-last < int64(warnEvery)) || !r.lastWarn.CompareAndSwap(last, now) {
		r.suppressed.Add(1)
		return
	}
	r.log.Warn("rate limiter backend failing; allowing requests unlimited (fail-open)",
		"backend", r.desc, "error", err, "suppressed", r.suppressed.Swap(0))
}

// Check implements Limiter by running the limiter's own script against a
// reserved key, so a failure of anything Allow needs shows.
func (r *Redis) Check(ctx context.Context) (string, error) {
	// While the breaker is open, run fails at once without asking Redis:
	// Redis is down as far as requests are concerned, and Check says so.
	if _, err := r.run(ctx, r.prefix+healthKey, MaxRPM); err != nil {
		mode := "failing closed"
		if r.failOpen {
			mode = "failing open: requests are not limited"
		}
		return r.desc, fmt.Errorf("%w (%s): %w", ErrUnavailable, mode, err)
	}
	return r.desc, nil
}

// addrOf names the server(s) of a client for Check.
func addrOf(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	case *redis.Ring:
		addrs := make([]string, 0, len(c.Options().Addrs))
		for _, a := range c.Options().Addrs {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		return strings.Join(addrs, ",")
	}
	return fmt.Sprintf("%T", c)
}

// Warm loads the limiter's script, on every master of a cluster, within
// ctx. A decision's call is bounded by CallTimeout (100 ms by default); a
// cold client first finds the cluster's slots, dials and has the script
// loaded after a NOSCRIPT, which on a busy machine can exceed it and
// refuse the first requests after a start with a 503. Warm does that
// work before the gateway serves.
func (r *Redis) Warm(ctx context.Context) error {
	if err := gcraScript.Load(ctx, r.client).Err(); err != nil {
		return fmt.Errorf("ratelimit: load the script into %s: %w", r.desc, err)
	}
	return nil
}
