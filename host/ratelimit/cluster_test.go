package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/host/ratelimit"
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
// decide exactly again, on the state the replica kept.
func TestRedisClusterFailover(t *testing.T) {
	t.Parallel()
	cl := testutil.RedisClusterWithReplicas(t, 5*time.Second)
	c := ctx(t)
	prefix := cl.Prefix + "rl:"
	newLimiter := func(failOpen bool) *ratelimit.Redis {
		client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs, MaxRetries: 1, DialerRetries: 1,
			DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
			ContextTimeoutEnabled: true})
		t.Cleanup(func() { client.Close() })
		return ratelimit.NewRedis(client, ratelimit.RedisOptions{Prefix: prefix, FailOpen: failOpen,
			CallTimeout: patient, BreakerCooldown: 50 * time.Millisecond})
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
	if err := master.Do(c, "wait", 1, 10_000).Err(); err != nil {
		t.Fatal(err)
	}
	addr := master.Options().Addr
	replica := cl.ReplicaOf(addr)
	if err := cl.Kill(addr); err != nil {
		t.Fatal(err)
	}

	// During the failover (cluster-node-timeout is 5 s).
	if _, err := closed.Allow(c, key, 1); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("fail-closed during the failover: %v, want ErrUnavailable", err)
	}
	if d, err := open.Allow(c, key, 1); err != nil || !d.Allowed {
		t.Fatalf("fail-open during the failover: %+v, %v; want allowed", d, err)
	}

	// The replica becomes master.
	rc := redis.NewClient(&redis.Options{Addr: replica})
	defer rc.Close()
	waitFor(t, 90*time.Second, "replica "+replica+" promoted", func() error {
		info, err := rc.Info(c, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "role:master") {
			return errors.New("still a replica")
		}
		return nil
	})

	// Exact again: the used-up key is refused (the replica kept its
	// state; a fail-open answer would allow it) once each limiter's
	// client has the new slot map, and a new key admits its burst of 3,
	// no more.
	for _, lim := range []*ratelimit.Redis{closed, open} {
		waitFor(t, 60*time.Second, "the used-up key refused by the new master", func() error {
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
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not ordering
	}
}
