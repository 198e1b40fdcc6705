package ratelimit_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/ratelimit"
	"github.com/factline/factline/internal/testutil"
)

// TestLeaseDecisionsMatchUnleased: with the clock standing still, a leasing
// limiter answers every request of one process exactly as one script call
// per request would (Allowed, Remaining, ResetAfter, and the rejections
// after the burst), with far fewer round trips.
func TestLeaseDecisionsMatchUnleased(t *testing.T) {
	t.Parallel()
	url := redisURL(t)
	client := redisClientOn(t, url)
	c := ctx(t)
	for _, rpm := range []int{2000, 7001, 100_000, 1_000_000} {
		t.Run(fmt.Sprint("rpm=", rpm), func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			plain := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient, Prefix: t.Name() + ":plain:", MaxLease: 1, Clock: clk})
			// The leasing limiter has a client of its own, whose commands
			// are counted.
			var cmds commandLog
			own := redisClientOn(t, url)
			own.AddHook(&cmds)
			leased := ratelimit.NewRedis(own, ratelimit.RedisOptions{CallTimeout: patient, Prefix: t.Name() + ":leased:", Clock: clk})
			n := min(rpm+10, 3000)
			for i := range n {
				if i == n/2 {
					// Time passes between requests too.
					clk.Advance(7 * time.Millisecond)
				}
				want, err := plain.Allow(c, "k", rpm)
				if err != nil {
					t.Fatal(err)
				}
				got, err := leased.Allow(c, "k", rpm)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("request %d: leased %+v, one call per request %+v", i, got, want)
				}
			}
			calls := strings.Count(cmds.String(), "evalsha")
			t.Logf("%d requests, %d script calls", n, calls)
			if most := min(64, rpm/1000); calls > 2*n/most+16 {
				t.Fatalf("%d script calls for %d requests with leases of up to %d", calls, n, most)
			}
		})
	}
}

// TestLeaseNeverExceedsGrant: two processes with leases, many concurrent
// requests and a clock that stands still: the burst of rpm is never
// exceeded, and at most the leases the processes still hold go unused.
func TestLeaseNeverExceedsGrant(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			leaseNeverExceedsGrant(t, b)
		})
	}
}

func leaseNeverExceedsGrant(t *testing.T, b backend) {
	clk := newClock()
	var lims [2]*ratelimit.Redis
	for i := range lims {
		lims[i] = ratelimit.NewRedis(b.client(t), ratelimit.RedisOptions{CallTimeout: patient, Prefix: b.prefix, Clock: clk})
	}
	const rpm, total, perProcess = 20_000, 30_000, 16
	most := rpm / 1000
	var (
		tickets, passed atomic.Int64
		wg              sync.WaitGroup
	)
	tickets.Store(total)
	c := ctx(t)
	for _, lim := range lims {
		for range perProcess {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for tickets.Add(-1) >= 0 {
					d, err := lim.Allow(c, "shared", rpm)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						passed.Add(1)
					} else if d.RetryAfter <= 0 || d.Remaining != 0 {
						t.Errorf("rejection %+v", d)
					}
				}
			}()
		}
	}
	wg.Wait()
	got := passed.Load()
	t.Logf("%d of %d requests passed at rpm %d", got, total, rpm)
	if got > rpm || got < int64(rpm-2*(most-1)) {
		t.Fatalf("%d requests passed, want %d..%d", got, rpm-2*(most-1), rpm)
	}
}

// TestLeaseWindowTwoProcesses: two processes with leases on Redis' own
// clock share a limit: over the run, at most the GCRA bound plus one lease
// per process passes.
func TestLeaseWindowTwoProcesses(t *testing.T) {
	t.Parallel()
	url := redisURL(t)
	var lims [2]*ratelimit.Redis
	for i := range lims {
		lims[i] = ratelimit.NewRedis(redisClientOn(t, url), ratelimit.RedisOptions{CallTimeout: patient})
	}
	const rpm, perProcess = 6000, 8 // T = 10 ms, leases of up to 6
	most := int64(rpm / 1000)
	var (
		passed atomic.Int64
		stop   atomic.Bool
		wg     sync.WaitGroup
	)
	c := ctx(t)
	start := time.Now()
	for _, lim := range lims {
		for range perProcess {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					d, err := lim.Allow(c, "shared", rpm)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						passed.Add(1)
					}
				}
			}()
		}
	}
	// Run until the burst and some more have passed (at least 1.5 s, so
	// that leases are taken over many T), however slow the machine.
	testutil.Eventually(t, time.Minute, "the burst and 100 more to pass over 1.5 s", func() bool {
		return passed.Load() >= rpm+100 && time.Since(start) >= 1500*time.Millisecond
	})
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	got := passed.Load()
	// rpm at once, one per T after, and what the two processes' leases
	// held when the run began counting (one request of each lease is
	// the asking request's own).
	hi := rpm + int64(elapsed/(10*time.Millisecond)) + 1 + 2*(most-1)
	t.Logf("%d requests passed in %v (at most %d)", got, elapsed, hi)
	if got < rpm || got > hi {
		t.Fatalf("%d requests passed in %v, want %d..%d", got, elapsed, rpm, hi)
	}
}

// TestLeaseRemembersRejection: once Redis refuses a leased key, the process
// refuses it without asking again until RetryAfter, with RetryAfter and
// ResetAfter counted down; then it asks again.
func TestLeaseRemembersRejection(t *testing.T) {
	t.Parallel()
	clk := newClock()
	client := redisClient(t)
	var cmds commandLog
	client.AddHook(&cmds)
	lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient, Clock: clk})
	c := ctx(t)
	const rpm = 3000 // T = 20 ms
	T := 20 * time.Millisecond
	full := rpm * T
	for i := range rpm {
		if d, err := lim.Allow(c, "k", rpm); err != nil || !d.Allowed {
			t.Fatalf("burst %d: %+v, %v", i, d, err)
		}
	}
	d, err := lim.Allow(c, "k", rpm)
	if err != nil || d.Allowed || d.RetryAfter != T || d.ResetAfter != full {
		t.Fatalf("after the burst: %+v, %v; want rejected, RetryAfter %v", d, err, T)
	}
	calls := cmds.String()
	clk.Advance(5 * time.Millisecond)
	for range 10 {
		d, err := lim.Allow(c, "k", rpm)
		if err != nil || d.Allowed || d.RetryAfter != T-5*time.Millisecond || d.ResetAfter != full-5*time.Millisecond {
			t.Fatalf("remembered rejection: %+v, %v", d, err)
		}
	}
	if cmds.String() != calls {
		t.Fatalf("a remembered rejection asked Redis: %q", strings.TrimPrefix(cmds.String(), calls))
	}
	clk.Advance(T - 5*time.Millisecond)
	if d, err := lim.Allow(c, "k", rpm); err != nil || !d.Allowed || d.Remaining != 0 || d.ResetAfter != full {
		t.Fatalf("after RetryAfter: %+v, %v; want allowed", d, err)
	}
}

// TestLeaseExpires: leased admissions are handed out only within the
// lease's lifetime and count against the limit whether used or not; after
// it, the next request asks Redis, and the next lease is no larger than
// what was used.
func TestLeaseExpires(t *testing.T) {
	t.Parallel()
	clk := newClock()
	client := redisClient(t)
	var cmds commandLog
	client.AddHook(&cmds)
	lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient, Clock: clk})
	c := ctx(t)
	const rpm = 64_000
	T := int64(938) // µs: 60 s / 64,000, rounded up
	calls := func() int { return strings.Count(cmds.String(), "evalsha") }
	// Leases grow 1, 2, 4, 8 while they run out at once.
	for i := range 1 + 2 + 4 + 8 {
		if d, err := lim.Allow(c, "k", rpm); err != nil || !d.Allowed || d.Remaining != rpm-1-i {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
	}
	if got := calls(); got != 4 {
		t.Fatalf("%d script calls for leases of 1, 2, 4 and 8, want 4", got)
	}
	// A lease of 16, of which 3 are used: Redis counted all 16.
	for range 3 {
		lim.Allow(c, "k", rpm)
	}
	start := newClock().Now().UnixMicro()
	if tat, err := client.Get(c, ratelimit.DefaultPrefix+"k").Int64(); err != nil || tat != start+31*T {
		t.Fatalf("TAT %d, %v; want the start + 31·T = %d", tat, err, start+31*T)
	}
	// Within its lifetime the lease serves; at its end it is dropped.
	clk.Advance(ratelimit.LeaseTTL - time.Microsecond)
	lim.Allow(c, "k", rpm)
	if got := calls(); got != 5 {
		t.Fatalf("%d script calls, want 5: the lease still serves", got)
	}
	clk.Advance(time.Microsecond)
	if d, err := lim.Allow(c, "k", rpm); err != nil || !d.Allowed {
		t.Fatalf("after expiry: %+v, %v", d, err)
	}
	// The next lease is of 4, what the expired one served: three more
	// requests, then another call.
	for range 3 {
		lim.Allow(c, "k", rpm)
	}
	if got := calls(); got != 6 {
		t.Fatalf("%d script calls, want 6: one lease of 4 after the expiry", got)
	}
	lim.Allow(c, "k", rpm)
	if got := calls(); got != 7 {
		t.Fatalf("%d script calls, want 7", got)
	}
}

// TestLeaseKeysSwept: the lease table forgets keys that hold nothing.
func TestLeaseKeysSwept(t *testing.T) {
	t.Parallel()
	clk := newClock()
	lim := ratelimit.NewRedis(redisClient(t), ratelimit.RedisOptions{CallTimeout: patient, Clock: clk})
	c := ctx(t)
	for i := range 500 {
		if _, err := lim.Allow(c, fmt.Sprint("k", i), 1_000_000); err != nil {
			t.Fatal(err)
		}
	}
	if n := lim.LeaseKeys(); n != 500 {
		t.Fatalf("%d keys, want 500", n)
	}
	clk.Advance(time.Minute)
	for i := range 5000 {
		if _, err := lim.Allow(c, fmt.Sprint("new", i), 1_000_000); err != nil {
			t.Fatal(err)
		}
	}
	if n := lim.LeaseKeys(); n > 5000 {
		t.Fatalf("%d keys after the first 500 went idle, want them dropped", n)
	}
}

// TestLeaseSmallLimitsUnleased: below 2000 rpm every request is a script
// call of its own.
func TestLeaseSmallLimitsUnleased(t *testing.T) {
	t.Parallel()
	client := redisClient(t)
	var cmds commandLog
	client.AddHook(&cmds)
	lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient})
	c := ctx(t)
	for range 20 {
		if _, err := lim.Allow(c, "k", 1999); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(cmds.String(), "evalsha"); got < 20 {
		t.Fatalf("%d script calls for 20 requests at 1999 rpm, want 20", got)
	}
}

// redisClientOn returns a client on url, closed when the test ends.
func redisClientOn(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}
