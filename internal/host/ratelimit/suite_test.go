package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/factline/factline/internal/clock/clocktest"
	"github.com/factline/factline/internal/host/ratelimit"
	"github.com/factline/factline/internal/testutil"
)

// impl is one Limiter implementation built on a clock the test controls.
// Every test in this file runs against each of them, so Memory and Redis
// cannot drift apart.
type impl struct {
	name string
	new  func(t *testing.T, clk *clocktest.Manual) ratelimit.Limiter
}

func impls(t *testing.T) []impl {
	client := redisClient(t)
	cluster := testutil.RedisCluster(t)
	clusterClient := cluster.Client(t)
	return []impl{
		{"memory", func(_ *testing.T, clk *clocktest.Manual) ratelimit.Limiter {
			return ratelimit.NewMemory(ratelimit.MemoryOptions{Clock: clk})
		}},
		{"redis", func(t *testing.T, clk *clocktest.Manual) ratelimit.Limiter {
			// A prefix per subtest keeps parallel subtests apart.
			return ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient, Prefix: t.Name() + ":", Clock: clk})
		}},
		{"redis-cluster", func(t *testing.T, clk *clocktest.Manual) ratelimit.Limiter {
			return ratelimit.NewRedis(clusterClient, ratelimit.RedisOptions{CallTimeout: patient, Prefix: cluster.Prefix + t.Name() + ":", Clock: clk})
		}},
	}
}

// rates are the limits of the suite, with their emission interval T
// written out: 60 s / rpm, rounded up to a microsecond.
var rates = []struct {
	rpm int
	t   time.Duration
}{
	{1, 60 * time.Second},
	{7, 8_571_429 * time.Microsecond}, // 60 s / 7 = 8.571428571 s
	{60, time.Second},
	{600, 100 * time.Millisecond},
	{100_000, 600 * time.Microsecond},
}

// probe calls Allow and compares the whole decision.
type probe struct {
	t   *testing.T
	ctx context.Context
	lim ratelimit.Limiter
	rpm int
}

func (p probe) want(step, key string, want ratelimit.Decision) ratelimit.Decision {
	p.t.Helper()
	want.Limit = p.rpm
	got, err := p.lim.Allow(p.ctx, key, p.rpm)
	if err != nil {
		p.t.Fatalf("%s: Allow(%q, %d): %v", step, key, p.rpm, err)
	}
	if got != want {
		p.t.Fatalf("%s: Allow(%q, %d) = %+v, want %+v", step, key, p.rpm, got, want)
	}
	return got
}

func allowed(remaining int, resetAfter time.Duration) ratelimit.Decision {
	return ratelimit.Decision{Allowed: true, Remaining: remaining, ResetAfter: resetAfter}
}

func rejected(retryAfter, resetAfter time.Duration) ratelimit.Decision {
	return ratelimit.Decision{RetryAfter: retryAfter, ResetAfter: resetAfter}
}

// TestSemantics walks each limit through a burst, rejections, refills and a
// second key, checking every field of every decision.
func TestSemantics(t *testing.T) {
	t.Parallel()
	for _, im := range impls(t) {
		for _, r := range rates {
			t.Run(fmt.Sprintf("%s/rpm=%d", im.name, r.rpm), func(t *testing.T) {
				t.Parallel()
				clk := newClock()
				p := probe{t: t, ctx: ctx(t), lim: im.new(t, clk), rpm: r.rpm}
				rpm, T := r.rpm, r.t
				full := time.Duration(rpm) * T // ≥ 60 s

				// The whole minute's allowance at once, Remaining counting down.
				for i := range rpm {
					p.want(fmt.Sprintf("burst %d", i), "a", allowed(rpm-1-i, time.Duration(i+1)*T))
				}
				// Then rejection; rejected requests are not counted, so every
				// one of them gets the same answer.
				for i := range 5 {
					p.want(fmt.Sprintf("rejected %d", i), "a", rejected(T, full))
				}

				// Another key is untouched by the first one's exhaustion, and
				// its requests do not touch the first one.
				for i := range min(rpm, 100) {
					p.want(fmt.Sprintf("key b %d", i), "b", allowed(rpm-1-i, time.Duration(i+1)*T))
				}

				// RetryAfter is exactly the time to the next passing request.
				waited := time.Duration(0)
				if T > time.Millisecond {
					clk.Advance(T - time.Millisecond)
					waited = T - time.Millisecond
					p.want("RetryAfter-1ms", "a", rejected(time.Millisecond, full-waited))
				}
				clk.Advance(T - time.Microsecond - waited)
				p.want("RetryAfter-1µs", "a", rejected(time.Microsecond, full-T+time.Microsecond))
				clk.Advance(time.Microsecond)
				p.want("RetryAfter", "a", allowed(0, full))
				p.want("after RetryAfter", "a", rejected(T, full))

				// Sustained: one request per T.
				for i := range 3 {
					clk.Advance(T)
					p.want(fmt.Sprintf("sustained %d", i), "a", allowed(0, full))
					p.want(fmt.Sprintf("sustained %d rejected", i), "a", rejected(T, full))
				}

				// A partial refill: k intervals and a bit give k requests; the
				// bit counts toward the next one (k < rpm: a refill beyond the
				// full allowance is not kept).
				k := min(rpm-1, 3)
				clk.Advance(time.Duration(k)*T + 250*time.Microsecond)
				for i := range k {
					p.want(fmt.Sprintf("refill %d", i), "a", allowed(k-1-i, full-time.Duration(k-1-i)*T-250*time.Microsecond))
				}
				p.want("refill rejected", "a", rejected(T-250*time.Microsecond, full-250*time.Microsecond))

				// After ResetAfter the whole allowance is back.
				clk.Advance(full - 250*time.Microsecond)
				p.want("after reset", "a", allowed(rpm-1, T))
				// Long idle is the same as a new key.
				clk.Advance(time.Hour)
				p.want("idle", "a", allowed(rpm-1, T))
			})
		}
	}
}

// TestWindow checks the guarantee in docs/decisions.md: at most 2·rpm−1
// requests pass in any 60-second interval, and that many can.
func TestWindow(t *testing.T) {
	t.Parallel()
	for _, im := range impls(t) {
		for _, rpm := range []int{1, 2, 60, 600} {
			t.Run(fmt.Sprintf("%s/rpm=%d", im.name, rpm), func(t *testing.T) {
				t.Parallel()
				clk := newClock()
				lim := im.new(t, clk)
				ctx := ctx(t)
				// A request every T/2 for two minutes; count the passes in
				// every window [s, s+60 s) that starts at a request.
				step := 60 * time.Second / time.Duration(2*rpm)
				var passed []time.Duration
				for at := time.Duration(0); at < 2*time.Minute; at += step {
					d, err := lim.Allow(ctx, "k", rpm)
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed {
						passed = append(passed, at)
					}
					clk.Advance(step)
				}
				most := 0
				for i, s := range passed {
					n := 0
					for _, at := range passed[i:] {
						if at < s+time.Minute {
							n++
						}
					}
					most = max(most, n)
				}
				if most != 2*rpm-1 {
					t.Fatalf("at most %d requests passed in a 60 s window, want 2·rpm−1 = %d", most, 2*rpm-1)
				}
				// Sustained: rpm at once, then one per T for the remaining 119 s
				// (the first of them at T): rpm + 2·rpm − 1 in two minutes.
				if len(passed) != 3*rpm-1 {
					t.Fatalf("%d requests passed in two minutes, want %d", len(passed), 3*rpm-1)
				}
			})
		}
	}
}

func TestInvalidLimit(t *testing.T) {
	t.Parallel()
	for _, im := range impls(t) {
		t.Run(im.name, func(t *testing.T) {
			lim := im.new(t, newClock())
			for _, rpm := range []int{0, -1, ratelimit.MaxRPM + 1} {
				d, err := lim.Allow(ctx(t), "k", rpm)
				if err == nil || errors.Is(err, ratelimit.ErrUnavailable) || d.Allowed {
					t.Errorf("Allow(rpm=%d) = %+v, %v; want a limit error", rpm, d, err)
				}
			}
			// The largest limit works: T is one microsecond.
			d, err := lim.Allow(ctx(t), "k", ratelimit.MaxRPM)
			if err != nil || !d.Allowed || d.Remaining != ratelimit.MaxRPM-1 || d.ResetAfter != time.Microsecond {
				t.Errorf("Allow(MaxRPM) = %+v, %v", d, err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, im := range impls(t) {
		t.Run(im.name, func(t *testing.T) {
			desc, err := im.new(t, newClock()).Check(ctx(t))
			if err != nil {
				t.Fatalf("Check: %s, %v", desc, err)
			}
			want := map[string]string{"memory": "in-process", "redis": "redis 127.0.0.1:"}[im.name]
			if len(desc) < len(want) || desc[:len(want)] != want {
				t.Fatalf("Check = %q, want it to start with %q", desc, want)
			}
		})
	}
}
