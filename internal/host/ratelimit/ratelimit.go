package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Decision is the outcome of one request against a limit.
type Decision struct {
	Allowed    bool
	Limit      int           // the rpm
	Remaining  int           // requests that would still pass right now (>= 0)
	RetryAfter time.Duration // when !Allowed: time until the next request would pass (> 0)
	ResetAfter time.Duration // time until the limiter is back to its full allowance
	// Uncounted: the request passed without being counted (the backend
	// failing open); Remaining and ResetAfter then claim nothing.
	Uncounted bool
}

// Limiter counts requests against per-key limits.
type Limiter interface {
	// Allow counts one request against key with a limit of rpm requests per
	// minute. A rejected request is NOT counted.
	Allow(ctx context.Context, key string, rpm int) (Decision, error)
	// Check reports the backend's health for /health ("redis 127.0.0.1:6379"
	// / "in-process").
	Check(ctx context.Context) (string, error)
}

// ErrUnavailable wraps backend failures when the limiter fails closed (the
// gateway maps it to a 503 problem).
var ErrUnavailable = errors.New("ratelimit: backend unavailable")

// MaxRPM is the largest limit Allow accepts: an emission interval of one
// microsecond, the resolution of the arithmetic.
const MaxRPM = 60_000_000

// minute is the period of a limit in microseconds.
const minute = int64(60 * time.Second / time.Microsecond)

// checkRPM rejects a limit outside 1..MaxRPM.
func checkRPM(rpm int) error {
	if rpm < 1 || rpm > MaxRPM {
		return fmt.Errorf("ratelimit: rpm must be between 1 and %d, got %d", MaxRPM, rpm)
	}
	return nil
}

// interval is the emission interval T of rpm in microseconds, rounded up so
// that the sustained rate never exceeds rpm per minute (it is exact whenever
// rpm divides 60,000,000).
func interval(rpm int) int64 {
	return (minute + int64(rpm) - 1) / int64(rpm)
}

// decide applies GCRA at now to a key whose theoretical arrival time is tat
// (both in microseconds; a tat at or before now, or 0 for a new key, is a
// full allowance). It returns the decision and the TAT to store, which is
// tat itself when the request is rejected.
//
// A request passes when, after counting it, the key is at most rpm·T ahead
// of now: the burst of rpm. The Lua script in redis.lua is the same
// computation and must stay so; the shared test suite holds them together.
func decide(now, tat int64, rpm int) (Decision, int64) {
	t := interval(rpm)
	limit := t * int64(rpm)
	if tat < now {
		tat = now
	}
	next := tat + t
	if next-now > limit {
		return Decision{
			Limit:      rpm,
			RetryAfter: micros(next - limit - now),
			ResetAfter: micros(tat - now),
		}, tat
	}
	return Decision{
		Allowed:    true,
		Limit:      rpm,
		Remaining:  int((limit - (next - now)) / t),
		ResetAfter: micros(next - now),
	}, next
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
