package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/testutil"
)

// clusterRoutes adds a limited route and a projection query route to the
// gateway manifest.
const clusterRoutes = `name: cluster
version: "1"
routes:
  - {path: /v1/reports/calls, method: POST, entity: contact, action: query}
  - {path: /v1/limited-contacts/:id, method: GET, entity: contact, action: get, rateLimit: {rpm: 3, scope: tenant}}
`

// TestGatewayOnRedisCluster: with --redis-url naming a Redis Cluster, a
// route limited to 3 requests a minute admits a tenant's first 3 requests
// and answers the 4th 429, the limit's state being a key on the cluster;
// and a materialized projection answers its query from state kept on the
// cluster (its keys, under the projection's hash tag, on the masters).
func TestGatewayOnRedisCluster(t *testing.T) {
	cl := testutil.RedisCluster(t)
	l := startLive(t, "sqlite", location(t, "sqlite"), func(c *app.Config) {
		man := filepath.Join(t.TempDir(), "gateway.yaml")
		if err := os.WriteFile(man, []byte(clusterRoutes), 0o644); err != nil {
			t.Fatal(err)
		}
		c.Manifest = man
		c.RedisURL = cl.URL
		// The test counts decisions on a cluster; a loaded machine must
		// not turn a slow one into a 503.
		c.RateLimitCallTimeout = 10 * time.Second
	})
	// The cluster serves every test of the binary: a tenant of this
	// test's own keeps its limit and projection keys apart.
	tenant := "cluster-" + strings.TrimSuffix(cl.Prefix, ":")
	key := l.newKey(tenant, "live")
	rdb := cl.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// keysOnMasters lists the keys matching pattern on every master.
	keysOnMasters := func(pattern string) []string {
		var (
			mu   sync.Mutex
			keys []string
		)
		if err := rdb.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			ks, err := n.Keys(ctx, pattern).Result()
			mu.Lock()
			keys = append(keys, ks...)
			mu.Unlock()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return keys
	}

	if code, body := l.call("POST", "/v1/entities", key, map[string]any{"type": "contact", "id": "c1", "name": "Ada", "status": "active"}); code != 201 {
		t.Fatalf("create contact: %d %v", code, body)
	}

	// The limit: a fresh key's burst is the rpm, then one request per
	// 20 s. Allowing more than 3 plus the refills of the time taken is
	// counting wrong; the 4th request is refused unless a refill came
	// first (a machine taking 20 s over 4 requests).
	start := time.Now()
	admitted := 0
	for {
		code, body := l.call("GET", "/v1/limited-contacts/c1", key, nil)
		if code == 429 {
			if !strings.HasSuffix(fmt.Sprint(body["type"]), "/errors/rate-limit-exceeded") {
				t.Fatalf("429 body %v", body)
			}
			break
		}
		if code != 200 {
			t.Fatalf("limited route, request %d: %d %v", admitted+1, code, body)
		}
		admitted++
		if most := 3 + int(time.Since(start)/(20*time.Second)); admitted > most {
			t.Fatalf("%d requests admitted in %v at 3 rpm, want at most %d", admitted, time.Since(start), most)
		}
	}
	if admitted < 3 {
		t.Fatalf("429 after %d requests at 3 rpm, want the burst of 3 admitted", admitted)
	}
	if keys := keysOnMasters("factline:rl:*:tenant:" + tenant); len(keys) != 1 {
		t.Fatalf("limit keys of the tenant on the cluster: %v, want one", keys)
	}
	code, body := l.call("GET", "/health", "", nil)
	checks, _ := dataOf(body)["checks"].(map[string]any)
	if rl, _ := checks["ratelimit"].(map[string]any); code != 200 || rl["status"] != "ok" || !strings.Contains(fmt.Sprint(rl), cl.Addrs[0]) {
		t.Fatalf("health: %d %v", code, body)
	}

	// The projection.
	for i, f := range []struct {
		ts       int64
		channel  string
		duration int
	}{{hour0 + 5*60_000, "phone", 30}, {hour0 + 20*60_000, "video", 60}, {hour0 + 30*60_000, "phone", 20}} {
		if code, body := l.call("POST", "/v1/facts", key, map[string]any{"entity_id": "c1", "type": "call", "timestamp": f.ts,
			"data": map[string]any{"channel": f.channel, "duration": f.duration, "n": i}}); code != 201 {
			t.Fatalf("append call %d: %d %v", i, code, body)
		}
	}
	settings := map[string]any{
		"source": "contact", "factTypes": []string{"call"}, "timeWindow": "hour", "groupBy": []string{"data.channel"},
		"aggregations": []map[string]any{
			{"field": "count", "function": "count"},
			{"field": "data.duration", "function": "sum"},
			{"field": "data.duration", "function": "avg"},
		},
		"materialize": true, "storageVersion": 2,
	}
	if code, body := l.call("POST", "/v1/configs", key, map[string]any{"type": "projection", "name": "calls", "settings": settings}); code != 201 {
		t.Fatalf("create projection config: %d %v", code, body)
	}
	waitRows(t, func() (int, map[string]any) {
		return l.call("POST", "/v1/reports/calls", key, map[string]any{"projection": "calls", "filters": map[string]any{"mode": "materialized"}})
	}, []map[string]any{
		row("2024-01-15T10:phone", "2024-01-15T10", "phone", 2, "50", "25"),
		row("2024-01-15T10:video", "2024-01-15T10", "video", 1, "60", "60"),
	})
	if keys := keysOnMasters("factline:projection:{" + tenant + ":*"); len(keys) < 3 {
		t.Fatalf("projection keys of the tenant on the cluster: %v, want its meta, index and buckets", keys)
	}
}
