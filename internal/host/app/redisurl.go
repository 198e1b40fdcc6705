package app

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/store/postgres"
)

// redisConfig is a parsed --redis-url: one server (redis://, rediss://,
// unix://) or a Redis Cluster (redis+cluster://, rediss+cluster://).
type redisConfig struct {
	single  *redis.Options
	cluster *redis.ClusterOptions
}

// CheckRedisURL reports whether raw is a Redis URL the app can use (see
// parseRedisURL), without connecting: for a command line to check before
// it opens anything.
func CheckRedisURL(raw string) error {
	_, err := parseRedisURL(raw)
	return err
}

// CheckDatabaseURL reports whether raw is a Postgres connection URL or
// key=value string the app can open, without connecting.
func CheckDatabaseURL(raw string) error { return postgres.CheckURL(raw) }

// parseRedisURL parses --redis-url. A cluster URL lists seed nodes
// separated by commas, redis+cluster://[user:pass@]host1:6379,host2:6379[/?opts],
// and takes the query options of go-redis' ParseClusterURL.
func parseRedisURL(raw string) (redisConfig, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != "redis+cluster" && scheme != "rediss+cluster") {
		opt, err := redis.ParseURL(raw)
		if err != nil {
			return redisConfig{}, fmt.Errorf("redis url: %w", err)
		}
		return redisConfig{single: opt}, nil
	}
	// Split authority from path and query by hand: url.Parse refuses a
	// host list.
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hosts := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hosts = authority[:i+1], authority[i+1:]
	}
	path, query, _ := strings.Cut(tail, "?")
	if path != "" && path != "/" {
		return redisConfig{}, fmt.Errorf("redis url: a cluster has no database number (path %q)", path)
	}
	addrs := strings.Split(hosts, ",")
	q, err := url.ParseQuery(query)
	if err != nil {
		return redisConfig{}, fmt.Errorf("redis url: %w", err)
	}
	for _, a := range addrs[1:] {
		if a == "" {
			return redisConfig{}, errors.New("redis url: empty node in the cluster's host list")
		}
		q.Add("addr", a)
	}
	if addrs[0] == "" {
		return redisConfig{}, errors.New("redis url: a cluster URL needs at least one host:port")
	}
	u := strings.TrimSuffix(scheme, "+cluster") + "://" + userinfo + addrs[0]
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	opt, err := redis.ParseClusterURL(u)
	if err != nil {
		return redisConfig{}, fmt.Errorf("redis url: %w", err)
	}
	return redisConfig{cluster: opt}, nil
}

// client returns a client for the configuration.
func (c redisConfig) client() redis.UniversalClient {
	if c.cluster != nil {
		o := *c.cluster
		return redis.NewClusterClient(&o)
	}
	o := *c.single
	return redis.NewClient(&o)
}

// honouringContext makes the client's calls end at their context's
// deadline (go-redis otherwise waits out its own timeouts and retries),
// so a caller on the request path can bound a call to a Redis that has
// stopped answering.
func (c redisConfig) honouringContext() redisConfig {
	if c.cluster != nil {
		o := *c.cluster
		o.ContextTimeoutEnabled = true
		return redisConfig{cluster: &o}
	}
	o := *c.single
	o.ContextTimeoutEnabled = true
	return redisConfig{single: &o}
}

// failFast tunes the configuration for the request path: when Redis is
// down, fail (open or closed) quickly instead of retrying for most of a
// second, and honour the call's context deadline.
func (c redisConfig) failFast() redisConfig {
	tune := func(maxRetries, dialerRetries *int, dial, read, write *time.Duration, ctxTimeout *bool) {
		if *maxRetries == 0 {
			*maxRetries = 1
		}
		*dialerRetries = 1
		for _, d := range []*time.Duration{dial, read, write} {
			if *d == 0 || *d > time.Second {
				*d = 500 * time.Millisecond
			}
		}
		*ctxTimeout = true
	}
	if c.cluster != nil {
		o := *c.cluster
		tune(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.ContextTimeoutEnabled)
		return redisConfig{cluster: &o}
	}
	o := *c.single
	tune(&o.MaxRetries, &o.DialerRetries, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.ContextTimeoutEnabled)
	return redisConfig{single: &o}
}
