package ratelimit_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/ratelimit"
	"github.com/factline/factline/internal/testutil"
)

// serverTime is Redis' clock in microseconds.
func serverTime(t *testing.T, c redis.UniversalClient) int64 {
	t.Helper()
	now, err := c.Time(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMicro()
}

// TestRedisServerTime: without a test clock the script decides on Redis'
// clock, stores the TAT as exact integer microseconds with an expiry at the
// moment the key has fully refilled, and leaves it alone on rejection.
func TestRedisServerTime(t *testing.T) {
	t.Parallel()
	client := redisClient(t)
	lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient})
	c := ctx(t)
	key := ratelimit.DefaultPrefix + "tenant-a"

	before := serverTime(t, client)
	d, err := lim.Allow(c, "tenant-a", 60)
	after := serverTime(t, client)
	if err != nil || !d.Allowed || d.Remaining != 59 || d.ResetAfter != time.Second {
		t.Fatalf("first request: %+v, %v", d, err)
	}
	raw, err := client.Get(c, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	tat, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		t.Fatalf("stored TAT %q is not an integer: %v", raw, err)
	}
	if tat < before+1_000_000 || tat > after+1_000_000 {
		t.Fatalf("stored TAT %d is not server time + 1 s (server time was %d..%d)", tat, before, after)
	}
	if ttl := client.PTTL(c, key).Val(); ttl <= 0 || ttl > time.Second {
		t.Fatalf("PTTL = %v, want (0, 1s]", ttl)
	}

	// Use up the burst; whatever refills meanwhile is at most a request or
	// two, since 60 round trips take well under a second.
	n := 1
	for ; n < 70; n++ {
		if d, err = lim.Allow(c, "tenant-a", 60); err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			break
		}
	}
	if n < 60 || n > 62 || d.Allowed {
		t.Fatalf("%d requests passed before the first rejection (%+v), want 60 (up to 62 with refill)", n, d)
	}
	if d.RetryAfter <= 0 || d.RetryAfter > time.Second || d.Remaining != 0 {
		t.Fatalf("rejection: %+v, want 0 < RetryAfter <= 1s", d)
	}
	stored := client.Get(c, key).Val()
	ttl := client.PTTL(c, key).Val()
	if ttl < 58*time.Second || ttl > time.Minute {
		t.Fatalf("PTTL after the burst = %v, want about a minute", ttl)
	}
	refusedAt := time.Now()
	refused, err := lim.Allow(c, "tenant-a", 60)
	if err != nil {
		t.Fatal(err)
	}
	if got := client.Get(c, key).Val(); got != stored {
		t.Fatalf("a rejected request changed the TAT from %s to %s", stored, got)
	}

	// Real time passes on the server (nothing else moves Redis' clock):
	// the next request passes once RetryAfter has passed, and not before.
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		if d, err = lim.Allow(c, "tenant-a", 60); err != nil || !d.Allowed {
			return fmt.Errorf("after RetryAfter: %+v, %v; want allowed", d, err)
		}
		return nil
	})
	if waited := time.Since(refusedAt); waited < refused.RetryAfter-time.Millisecond {
		t.Fatalf("a request passed %v after a refusal saying RetryAfter %v", waited, refused.RetryAfter)
	}
}

func TestRedisPrefix(t *testing.T) {
	t.Parallel()
	client := redisClient(t)
	c := ctx(t)
	a := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient, Prefix: "a:"})
	b := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient, Prefix: "b:"})
	if d, err := a.Allow(c, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("a: %+v, %v", d, err)
	}
	// Same key under another prefix: a separate limit.
	if d, err := b.Allow(c, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("b: %+v, %v", d, err)
	}
	if d, err := a.Allow(c, "k", 1); err != nil || d.Allowed {
		t.Fatalf("a again: %+v, %v; want rejected", d, err)
	}
	keys := client.Keys(c, "*").Val()
	if strings.Join(keys, ",") != "a:k,b:k" && strings.Join(keys, ",") != "b:k,a:k" {
		t.Fatalf("keys = %q, want a:k and b:k", keys)
	}
}

// TestRedisTwoProcesses: two limiters with their own clients, as two
// gateway processes would have, share one limit exactly, on one Redis and
// on a Redis Cluster.
func TestRedisTwoProcesses(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			twoProcesses(t, b)
		})
	}
}

func twoProcesses(t *testing.T, b backend) {
	var clients [2]redis.UniversalClient
	var lims [2]*ratelimit.Redis
	for i := range clients {
		clients[i] = b.client(t)
		lims[i] = ratelimit.NewRedis(clients[i], ratelimit.RedisOptions{CallTimeout: patient, Prefix: b.prefix})
		if err := clients[i].Ping(ctx(t)).Err(); err != nil { // connect outside the timed span
			t.Fatal(err)
		}
	}
	key := cmp.Or(b.prefix, ratelimit.DefaultPrefix) + "shared"
	// The server whose clock decides: the one holding the key.
	server := clients[0]
	if c, ok := server.(*redis.ClusterClient); ok {
		m, err := c.MasterForKey(ctx(t), key)
		if err != nil {
			t.Fatal(err)
		}
		server = m
	}
	const rpm, total, perProcess = 60, 500, 8
	var (
		tickets atomic.Int64
		passed  atomic.Int64
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	tickets.Store(total)
	c := ctx(t)
	for _, lim := range lims {
		for range perProcess {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for tickets.Add(-1) >= 0 {
					d, err := lim.Allow(c, "shared", rpm)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						passed.Add(1)
					} else if d.RetryAfter <= 0 || d.RetryAfter > time.Second || d.Remaining != 0 {
						t.Errorf("rejection %+v, want 0 < RetryAfter <= 1s", d)
					}
				}
			}()
		}
	}
	serverStart := serverTime(t, server)
	begin := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(begin)
	serverEnd := serverTime(t, server)
	allowed := passed.Load()

	// GCRA lets the burst of 60 through at once and then one request per
	// second: 60 + floor(s) where s is the server-time span from the first
	// request to the last, which lies inside the measured elapsed time. The
	// upper bound takes ceil and one more because s is read on Redis' wall
	// clock (TIME, truncated to microseconds) while elapsed is Go's
	// monotonic clock, and the two may disagree slightly; a limiter that
	// loses updates between processes overshoots by far more.
	hi := 60 + int64(math.Ceil(elapsed.Seconds())) + 1
	t.Logf("%d of %d requests passed in %v", allowed, total, elapsed)
	if allowed < 60 || allowed > hi {
		t.Fatalf("%d requests passed in %v, want 60..%d", allowed, elapsed, hi)
	}
	// Every allowed request moved the shared TAT by exactly T = 1 s from the
	// first request's arrival, so TAT − allowed·1 s is that arrival, which
	// lies within the run. (The TAT never fell behind the clock: after the
	// burst it was a minute ahead.)
	tat, err := clients[1].Get(c, key).Int64()
	if err != nil {
		t.Fatal(err)
	}
	if first := tat - allowed*1_000_000; first < serverStart || first > serverEnd {
		t.Fatalf("TAT %d − %d s = %d is outside the run [%d, %d]", tat, allowed, first, serverStart, serverEnd)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestRedisDown(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	// No retries: each Allow fails at once, as a gateway should configure.
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { client.Close() })
	c := ctx(t)

	t.Run("fail open", func(t *testing.T) {
		var logs testutil.Logs
		lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{
			FailOpen: true,
			Logger:   logs.Logger(),
		})
		for range 20 {
			d, err := lim.Allow(c, "k", 60)
			if err != nil || !d.Allowed || d.Limit != 60 || !d.Uncounted {
				t.Fatalf("Allow with Redis down, failing open = %+v, %v; want allowed", d, err)
			}
		}
		// Twenty failures within a few seconds: one warning.
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
			t.Fatalf("%d warnings for 20 failures, want 1:\n%s", n, logs.String())
		}
		desc, err := lim.Check(c)
		if err == nil || !errors.Is(err, ratelimit.ErrUnavailable) || !strings.Contains(err.Error(), "failing open") {
			t.Fatalf("Check with Redis down = %q, %v; want an error saying it fails open", desc, err)
		}
		if desc != "redis "+addr {
			t.Fatalf("Check description = %q, want %q", desc, "redis "+addr)
		}
	})

	t.Run("fail closed", func(t *testing.T) {
		lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient})
		d, err := lim.Allow(c, "k", 60)
		if !errors.Is(err, ratelimit.ErrUnavailable) || d.Allowed {
			t.Fatalf("Allow with Redis down, failing closed = %+v, %v; want ErrUnavailable", d, err)
		}
		if !strings.Contains(err.Error(), addr) {
			t.Fatalf("error %q does not carry the cause", err)
		}
		if _, err := lim.Check(c); !errors.Is(err, ratelimit.ErrUnavailable) {
			t.Fatalf("Check = %v, want ErrUnavailable", err)
		}
	})
}

// TestRedisRecovers: a limiter that failed open limits again, and Check is
// healthy again, once Redis answers. The server here is a real one behind a
// proxy that the test switches off and on.
func TestRedisRecovers(t *testing.T) {
	t.Parallel()
	opts, err := redis.ParseURL(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	px := testutil.NewProxy(t, opts.Addr)
	o := *opts
	o.Addr = px.Addr()
	o.MaxRetries, o.DialerRetries = -1, 1
	client := redis.NewClient(&o)
	t.Cleanup(func() { client.Close() })
	lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{FailOpen: true, Logger: slog.New(slog.DiscardHandler)})
	c := ctx(t)

	if d, err := lim.Allow(c, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("first: %+v, %v", d, err)
	}
	px.SetDown(true)
	if d, err := lim.Allow(c, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("down, failing open: %+v, %v; want allowed", d, err)
	}
	if _, err := lim.Check(c); err == nil {
		t.Fatal("Check healthy while Redis is unreachable")
	}
	px.SetDown(false)
	if _, err := lim.Check(c); err != nil {
		t.Fatalf("Check after recovery: %v", err)
	}
	// The limit held in Redis is still there: rpm=1 was used up.
	if d, err := lim.Allow(c, "k", 1); err != nil || d.Allowed {
		t.Fatalf("after recovery: %+v, %v; want rejected", d, err)
	}
}

// TestRedisOneRoundTrip: each Allow is a single EVALSHA once the script is
// cached on the server.
func TestRedisOneRoundTrip(t *testing.T) {
	t.Parallel()
	client := redisClient(t)
	lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient})
	c := ctx(t)
	if _, err := lim.Allow(c, "warm", 60); err != nil { // may load the script
		t.Fatal(err)
	}
	var cmds commandLog
	client.AddHook(&cmds)
	for range 10 {
		if _, err := lim.Allow(c, "k", 60); err != nil {
			t.Fatal(err)
		}
	}
	if got := cmds.String(); got != strings.Repeat("evalsha ", 10) {
		t.Fatalf("10 requests sent %q, want 10 evalsha", got)
	}
}

// commandLog is a go-redis hook that records the commands sent.
type commandLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.mu.Lock()
		l.b.WriteString(cmd.Name() + " ")
		l.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.mu.Lock()
		l.b.WriteString("pipeline ")
		l.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (l *commandLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
