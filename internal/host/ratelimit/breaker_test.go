package ratelimit_test

import (
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/ratelimit"
	"github.com/factline/factline/internal/testutil"
)

// TestFrozenRedisFailsFast: with Redis frozen (connections open, no byte
// answered), limited requests are decided within a small bound in both
// fail modes, with fail-open allowing and fail-closed refusing; Check
// reports Redis down meanwhile; and once Redis answers again the limiter is
// exact again.
func TestFrozenRedisFailsFast(t *testing.T) {
	for _, failOpen := range []bool{true, false} {
		name := "fail-closed"
		if failOpen {
			name = "fail-open"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts, err := redis.ParseURL(redisURL(t))
			if err != nil {
				t.Fatal(err)
			}
			px := testutil.NewProxy(t, opts.Addr)
			o := *opts
			o.Addr = px.Addr()
			// As internal/host/app configures it.
			o.MaxRetries, o.DialerRetries = 1, 1
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
			o.ContextTimeoutEnabled = true
			client := redis.NewClient(&o)
			t.Cleanup(func() { client.Close() })
			lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{
				FailOpen: failOpen, Logger: slog.New(slog.DiscardHandler),
				CallTimeout: 50 * time.Millisecond, BreakerCooldown: 300 * time.Millisecond,
			})
			// The same keys through a limiter whose calls wait, for the
			// counts before and after, which a busy test machine must not
			// turn into timeouts.
			exact := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient})
			c := ctx(t)
			if d, err := exact.Allow(c, "k", 1); err != nil || !d.Allowed {
				t.Fatalf("before the freeze: %+v, %v", d, err)
			}

			px.Freeze()
			lat := make([]time.Duration, 200)
			for i := range lat {
				start := time.Now()
				d, err := lim.Allow(c, "other", 60)
				lat[i] = time.Since(start)
				if failOpen && (err != nil || !d.Allowed) {
					t.Fatalf("request %d, failing open: %+v, %v; want allowed", i, d, err)
				}
				if !failOpen && (!errors.Is(err, ratelimit.ErrUnavailable) || d.Allowed) {
					t.Fatalf("request %d, failing closed: %+v, %v; want ErrUnavailable", i, d, err)
				}
			}
			slices.Sort(lat)
			p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
			t.Logf("frozen Redis, 200 requests: p50 %v, p99 %v, max %v", p50, p99, lat[len(lat)-1])
			if p99 > 150*time.Millisecond {
				t.Errorf("p99 %v with Redis frozen, want under 150ms", p99)
			}
			if _, err := lim.Check(c); !errors.Is(err, ratelimit.ErrUnavailable) {
				t.Fatalf("Check with the breaker open = %v, want ErrUnavailable", err)
			}

			px.Thaw()
			// The health key: probing does not touch the keys below.
			testutil.EventuallyNil(t, 30*time.Second, func() error {
				_, err := lim.Check(c)
				return err
			})
			// Exact again: the request used before the freeze still counts
			// (rpm 1 frees the next one only after a minute), and a fresh
			// key admits one request and refuses the next.
			for i, tc := range []struct {
				key  string
				want bool
			}{{"k", false}, {"fresh", true}, {"fresh", false}} {
				d, err := exact.Allow(c, tc.key, 1)
				if err != nil || d.Allowed != tc.want {
					t.Fatalf("after the thaw, request %d (%s): %+v, %v; want allowed=%v", i, tc.key, d, err, tc.want)
				}
			}
		})
	}
}
