package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil"
)

// TestParseRedisURL: one server keeps go-redis' URL form; a cluster URL
// lists its seed nodes separated by commas, with credentials, TLS and
// query options; a database number or an empty node is refused.
func TestParseRedisURL(t *testing.T) {
	for _, tc := range []struct {
		url     string
		single  string   // Addr of a single server
		cluster []string // Addrs of a cluster
		check   func(t *testing.T, c redisConfig)
		err     string
	}{
		{url: "redis://127.0.0.1:6379/2", single: "127.0.0.1:6379",
			check: func(t *testing.T, c redisConfig) {
				if c.single.DB != 2 {
					t.Errorf("DB %d, want 2", c.single.DB)
				}
			}},
		{url: "redis+cluster://h1:6379,h2:6380", cluster: []string{"h1:6379", "h2:6380"}},
		{url: "redis+cluster://h1:7000/", cluster: []string{"h1:7000"}},
		{url: "rediss+cluster://u:p%40ss@h1:6379,h2:6379,h3:6379/?dial_timeout=2s&max_redirects=5",
			cluster: []string{"h1:6379", "h2:6379", "h3:6379"},
			check: func(t *testing.T, c redisConfig) {
				o := c.cluster
				if o.TLSConfig == nil || o.Username != "u" || o.Password != "p@ss" || o.DialTimeout != 2*time.Second || o.MaxRedirects != 5 {
					t.Errorf("options: TLS %v, user %q, password %q, dial %v, redirects %d", o.TLSConfig != nil, o.Username, o.Password, o.DialTimeout, o.MaxRedirects)
				}
			}},
		{url: "redis+cluster://h1:6379/3", err: "no database number"},
		{url: "redis+cluster://h1:6379,,h2:6379", err: "empty node"},
		{url: "redis+cluster://", err: "at least one host"},
		{url: "redis+cluster://h1:6379?dial_timeout=soon", err: "redis url"},
		{url: "http://h1:6379", err: "redis url"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			c, err := parseRedisURL(tc.url)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.single != "":
				if c.single == nil || c.cluster != nil || c.single.Addr != tc.single {
					t.Fatalf("got %+v, want the single server %s", c, tc.single)
				}
			default:
				if c.cluster == nil || c.single != nil || strings.Join(c.cluster.Addrs, ",") != strings.Join(tc.cluster, ",") {
					t.Fatalf("got %+v, want the cluster %v", c, tc.cluster)
				}
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

// TestLimiterOnRedisCluster: --redis-url naming a cluster gives a limiter
// on it whose health check passes and which limits.
func TestLimiterOnRedisCluster(t *testing.T) {
	cl := testutil.RedisCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lim, parts, err := newLimiter(ctx, Config{RedisURL: cl.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer parts.close()
	if detail, err := parts.check.Check(ctx); err != nil || !strings.Contains(detail, cl.Addrs[0]) {
		t.Fatalf("check: %q, %v", detail, err)
	}
	key := cl.Prefix + "route"
	for i := range 3 {
		d, err := lim.Allow(ctx, key, 2)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != (i < 2) {
			t.Fatalf("request %d: allowed %v", i+1, d.Allowed)
		}
	}
}
