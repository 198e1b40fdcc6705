package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/ratelimit"
	"github.com/factline/factline/internal/testutil"
)

// TestRedisClusterKeySlots: on a Redis Cluster the script of one request
// touches the limit key alone (so one slot), and different limit keys land
// on different slots of all three masters.
func TestRedisClusterKeySlots(t *testing.T) {
	t.Parallel()
	cl := testutil.RedisCluster(t)
	client := cl.Client(t)
	c := ctx(t)
	prefix := cl.Prefix + "rl:"
	lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: patient, Prefix: prefix})
	const n = 40
	for i := range n {
		if _, err := lim.Allow(c, fmt.Sprintf("tenant-%d:route", i), 60); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu   sync.Mutex
		keys []string
	)
	if err := client.ForEachMaster(c, func(ctx context.Context, node *redis.Client) error {
		ks, err := node.Keys(ctx, prefix+"*").Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(keys) != n {
		t.Fatalf("%d keys under the prefix, want one per limit key (%d): %v", len(keys), n, keys)
	}
	slots, masters := map[int64]bool{}, map[string]bool{}
	for _, k := range keys {
		slot, err := client.ClusterKeySlot(c, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
		node, err := client.MasterForKey(c, k)
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	if len(slots) < n-5 || len(masters) != 3 {
		t.Fatalf("%d limit keys on %d slots of %d masters, want them spread over all three", n, len(slots), len(masters))
	}
}

// TestRedisClusterFailover: the master holding a limit key is killed;
// until its replica takes over, a fail-closed limiter answers
// ErrUnavailable and a fail-open one allows; after the failover both
// decide exactly again, on the state the replica kept, because each
// limiter has its cluster client reload the slot map when a call fails
// (the clients' own periodic reload is an hour away here).
//
// The replica takes over when the test says so (CLUSTER FAILOVER
// TAKEOVER, as an operator would after a crash; the cluster-node-timeout
// is too long for an automatic failover), so however slow the machine,
// the checks during the outage run before it and the checks after it
// wait on the promotion itself.
func TestRedisClusterFailover(t *testing.T) {
	t.Parallel()
	cl := testutil.RedisClusterWithReplicas(t, 10*time.Minute)
	c := ctx(t)
	prefix := cl.Prefix + "rl:"
	newLimiter := func(failOpen bool) *ratelimit.Redis {
		// As internal/host/app configures it, but for the periodic reload.
		client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs, MaxRetries: 1, DialerRetries: 1,
			DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
			ContextTimeoutEnabled: true, ClusterStateReloadInterval: time.Hour})
		t.Cleanup(func() { client.Close() })
		return ratelimit.NewRedis(client, ratelimit.RedisOptions{Prefix: prefix, FailOpen: failOpen,
			Logger: slog.New(slog.DiscardHandler), CallTimeout: patient, BreakerCooldown: 50 * time.Millisecond})
	}
	closed, open := newLimiter(false), newLimiter(true)

	// The key's one request per minute is used up, and the replica has it.
	const key = "exhausted"
	for i, want := range []bool{true, false} {
		d, err := closed.Allow(c, key, 1)
		if err != nil || d.Allowed != want {
			t.Fatalf("request %d: %+v, %v; want allowed %v", i+1, d, err, want)
		}
	}
	probe := cl.Client(t)
	master, err := probe.MasterForKey(c, prefix+key)
	if err != nil {
		t.Fatal(err)
	}
	slot, err := probe.ClusterKeySlot(c, prefix+key).Result()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the replica acknowledging the key's state", func() error {
		n, err := master.Do(c, "wait", 1, 1000).Int()
		if err == nil && n < 1 {
			err = errors.New("not acknowledged yet")
		}
		return err
	})
	addr := master.Options().Addr
	replica := cl.ReplicaOf(addr)
	if err := cl.Kill(addr); err != nil {
		t.Fatal(err)
	}

	// During the outage.
	if _, err := closed.Allow(c, key, 1); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("fail-closed with the master down: %v, want ErrUnavailable", err)
	}
	if d, err := open.Allow(c, key, 1); err != nil || !d.Allowed {
		t.Fatalf("fail-open with the master down: %+v, %v; want allowed", d, err)
	}

	// The replica takes over, and every live node knows it serves the
	// key's slot.
	rc := redis.NewClient(&redis.Options{Addr: replica})
	defer rc.Close()
	if err := rc.Do(c, "cluster", "failover", "takeover").Err(); err != nil {
		t.Fatal(err)
	}
	for _, a := range cl.Addrs {
		if a == addr {
			a = replica
		}
		node := redis.NewClient(&redis.Options{Addr: a})
		defer node.Close()
		waitFor(t, 2*time.Minute, a+" sees "+replica+" serve slot "+fmt.Sprint(slot), func() error {
			slots, err := node.ClusterSlots(c).Result()
			if err != nil {
				return err
			}
			for _, s := range slots {
				if int64(s.Start) <= slot && slot <= int64(s.End) {
					if len(s.Nodes) == 0 || s.Nodes[0].Addr != replica {
						return fmt.Errorf("slot served by %v", s.Nodes)
					}
					return nil
				}
			}
			return errors.New("slot not served")
		})
	}

	// Exact again: the used-up key is refused (the replica kept its
	// state; a fail-open answer would allow it) once each limiter's
	// client has the new slot map, and a new key admits its burst of 3,
	// no more.
	for _, lim := range []*ratelimit.Redis{closed, open} {
		waitFor(t, 2*time.Minute, "the used-up key refused by the new master", func() error {
			d, err := lim.Allow(c, key, 1)
			if err == nil && d.Allowed {
				err = errors.New("allowed")
			}
			return err
		})
	}
	allowed := 0
	for i := range 10 {
		lim := []*ratelimit.Redis{closed, open}[i%2]
		d, err := lim.Allow(c, "fresh", 3)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("%d of 10 requests allowed at a burst of 3 after the failover", allowed)
	}
}

// waitFor polls f until it returns nil, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	testutil.EventuallyNil(t, timeout, func() error {
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// TestWarmLoadsTheScriptOnEveryMaster: after Warm every master of the
// cluster has the script, so a request's first decision on any slot does
// not spend its call timeout loading it. Not parallel: no other test may
// load the script between the flush and the check.
func TestWarmLoadsTheScriptOnEveryMaster(t *testing.T) {
	cl := testutil.RedisCluster(t)
	client := cl.Client(t)
	c := ctx(t)
	if err := client.ForEachMaster(c, func(ctx context.Context, node *redis.Client) error {
		return node.ScriptFlush(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{Prefix: cl.Prefix + "rl:"})
	if err := lim.Warm(c); err != nil {
		t.Fatal(err)
	}
	var masters atomic.Int32
	if err := client.ForEachMaster(c, func(ctx context.Context, node *redis.Client) error {
		masters.Add(1)
		exists, err := node.ScriptExists(ctx, ratelimit.ScriptHash()).Result()
		if err == nil && (len(exists) != 1 || !exists[0]) {
			err = fmt.Errorf("master %s has no script after Warm", node.Options().Addr)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n := masters.Load(); n < 3 {
		t.Fatalf("%d masters checked, want the cluster's 3", n)
	}
}
