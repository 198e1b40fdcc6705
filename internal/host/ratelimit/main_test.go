package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/factline/factline/internal/clock/clocktest"
	"github.com/factline/factline/internal/testutil"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// newClock starts at an instant with a sub-microsecond part, which both
// implementations must round the same way.
func newClock() *clocktest.Manual { return clocktest.New(time.Unix(1_750_000_000, 123_456_789)) }

// redisURL is the URL of a fresh logical database, flushed when the test
// ends.
func redisURL(t testing.TB) string {
	t.Helper()
	return testutil.Redis(t)
}

// redisClient returns a client on a fresh logical database, closed when the
// test ends.
func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// ctx is the context of a test's requests; its deadline only stops a hung
// test (the burst of rpm=100000 against Redis is 100,000 round trips).
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

// patient is the Redis call timeout of limiters in tests that are not
// about timeouts: the production default (100ms) is a fail-fast bound a
// test machine busy with other packages can exceed without anything
// being wrong.
const patient = 5 * time.Second

// backend is a Redis deployment the limiter runs on: client returns a new
// client each call (as separate processes would have), prefix is the
// test's key prefix there ("" for the default).
type backend struct {
	name   string
	client func(t *testing.T) redis.UniversalClient
	prefix string
}

// backends are one Redis and a Redis Cluster.
func backends(t *testing.T) []backend {
	url := redisURL(t)
	cl := testutil.RedisCluster(t)
	return []backend{
		{"redis", func(t *testing.T) redis.UniversalClient { return redisClientOn(t, url) }, ""},
		{"redis-cluster", func(t *testing.T) redis.UniversalClient { return cl.Client(t) }, cl.Prefix + "rl:"},
	}
}
