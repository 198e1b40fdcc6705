package projection

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// redisClient returns a client on a fresh logical Redis database.
func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(testutil.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// anotherClient returns a second client on the same Redis database.
func anotherClient(t testing.TB, c *redis.Client) *redis.Client {
	o := c.Options()
	n := redis.NewClient(&redis.Options{Addr: o.Addr, DB: o.DB, Username: o.Username, Password: o.Password})
	t.Cleanup(func() { n.Close() })
	return n
}

// stateKinds are the cached-state implementations every shared test runs
// against.
var stateKinds = []struct {
	name string
	new  func(t testing.TB) CachedState
}{
	{"memory", func(testing.TB) CachedState { return NewMemoryState() }},
	{"redis", func(t testing.TB) CachedState { return NewRedisState(redisClient(t)).WithPrefix("test:") }},
	{"redis-cluster", func(t testing.TB) CachedState {
		cl := testutil.RedisCluster(t)
		return NewRedisState(cl.Client(t)).WithPrefix(cl.Prefix + "test:")
	}},
}

// clock is a controllable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(t time.Time) *clock { return &clock{now: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// emitted collects emitted facts.
type emitted struct {
	mu    sync.Mutex
	facts []Fact
}

func (e *emitted) Emit(_ context.Context, f Fact) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.facts = append(e.facts, f)
	return nil
}

func (e *emitted) types() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, f := range e.facts {
		out = append(out, f.Type)
	}
	return out
}

func mustConfig(t testing.TB, y string) *Config {
	t.Helper()
	c, err := ParseSettings([]byte(y))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return c
}

func mustEngine(t testing.TB, c *Config, o EngineOptions) *Engine {
	t.Helper()
	e, err := NewEngine(c, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// js renders v as canonical JSON for comparisons and messages.
func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func ms(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMilli()
}

func num(s string) json.Number { return json.Number(s) }

func fact(id, typ string, ts int64, data map[string]any) Fact {
	return Fact{ID: id, Type: typ, Timestamp: ts, Data: data}
}

func sortStrings(s []string) { sort.Strings(s) }

// plainKeys writes the keys of the redis-cluster state kind as the redis
// kind has them: without the test's cluster prefix and hash-tag braces.
func plainKeys(kind string, keys []string) []string {
	if kind != "redis-cluster" {
		return keys
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		_, k, _ = strings.Cut(k, ":")
		out[i] = strings.NewReplacer("{", "", "}", "").Replace(k)
	}
	return out
}

// exactView drops the list of estimates from a materialized result's
// "_meta" (compute results count exactly and list none), to compare the
// values of both.
func exactView(r Result) Result {
	if meta, _ := r["_meta"].(map[string]any); meta != nil {
		delete(meta, "estimated")
		if len(meta) == 0 {
			delete(r, "_meta")
		}
	}
	return r
}
