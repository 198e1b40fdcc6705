package testutil_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestPostgres(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	url := testutil.Postgres(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(ctx)

	var n int
	if err := conn.QueryRow(ctx, "SELECT 1 + 1").Scan(&n); err != nil || n != 2 {
		t.Fatalf("SELECT 1 + 1 = %d, %v", n, err)
	}
	// The database is fresh and writable.
	var tables int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("public tables = %d, %v; want an empty database", tables, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	var maxConns int
	if err := conn.QueryRow(ctx, "SELECT current_setting('max_connections')::int").Scan(&maxConns); err != nil || maxConns < 100 {
		t.Errorf("max_connections = %d, %v; want a generous limit", maxConns, err)
	}
}

func TestPostgresFreshDatabasePerCall(t *testing.T) {
	t.Parallel()
	a, b := testutil.Postgres(t), testutil.Postgres(t)
	if a == b {
		t.Fatalf("two calls returned the same database %s", a)
	}
	ctx := context.Background()
	for _, url := range []string{a, b} {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		// The same table name in both databases does not collide.
		if _, err := conn.Exec(ctx, "CREATE TABLE same (id int)"); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		conn.Close(ctx)
	}
}

// TestPostgresFromCopiesTheTemplate: prepare runs once per key; every call
// gets a database of its own that starts as prepare left the template.
func TestPostgresFromCopiesTheTemplate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var prepared atomic.Int32
	prepare := func(ctx context.Context, url string) error {
		prepared.Add(1)
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE seeded (id int PRIMARY KEY); INSERT INTO seeded VALUES (1)")
		return err
	}
	a, b := testutil.PostgresFrom(t, "copies", prepare), testutil.PostgresFrom(t, "copies", prepare)
	if a == b {
		t.Fatalf("two calls returned the same database %s", a)
	}
	if n := prepared.Load(); n != 1 {
		t.Errorf("prepare ran %d times, want once", n)
	}
	for i, url := range []string{a, b} {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		// A row written to the first copy is not in the second.
		if _, err := conn.Exec(ctx, "INSERT INTO seeded VALUES (2)"); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		var rows int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM seeded").Scan(&rows); err != nil || rows != 2 {
			t.Errorf("copy %d holds %d rows, %v; want the seeded one and its own", i, rows, err)
		}
	}
}

// TestPostgresDataInMemory: the fast server keeps its files in /dev/shm
// where the machine has it, so creating a database copies no files to disk.
func TestPostgresDataInMemory(t *testing.T) {
	t.Parallel()
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() || os.Getenv("FACTLINE_TEST_DATABASE_URL") != "" {
		t.Log("no /dev/shm or an external server: nothing to check")
		return
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testutil.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var dir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, "/dev/shm/") {
		t.Errorf("data directory %s, want one under /dev/shm", dir)
	}
}

func TestPostgresDurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testutil.PostgresDurable(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	// A server named by FACTLINE_TEST_DATABASE_URL keeps its own settings.
	if fsync != "on" && os.Getenv("FACTLINE_TEST_DATABASE_URL") == "" {
		t.Errorf("fsync = %s on the durable server", fsync)
	}
}

func TestRedis(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	urlA, urlB := testutil.Redis(t), testutil.Redis(t)
	if urlA == urlB {
		t.Fatalf("two calls returned the same database %s", urlA)
	}
	clients := make([]*redis.Client, 2)
	for i, url := range []string{urlA, urlB} {
		opts, err := redis.ParseURL(url)
		if err != nil {
			t.Fatalf("parse %s: %v", url, err)
		}
		clients[i] = redis.NewClient(opts)
		defer clients[i].Close()
		if err := clients[i].Ping(ctx).Err(); err != nil {
			t.Fatalf("PING %s: %v", url, err)
		}
		if n, err := clients[i].DBSize(ctx).Result(); err != nil || n != 0 {
			t.Fatalf("DBSIZE %s = %d, %v; want an empty database", url, n, err)
		}
	}
	// The databases are isolated from each other.
	if err := clients[0].Set(ctx, "k", "a", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := clients[1].Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("GET k in the other database: %v, want redis.Nil", err)
	}
}

// TestRedisCluster: the cluster forms with every slot served, a client
// reaches all three masters, and a test's keys are gone after it.
func TestRedisCluster(t *testing.T) {
	ctx := context.Background()
	var prefix string
	var c *redis.ClusterClient
	t.Run("use", func(t *testing.T) {
		srv := testutil.RedisCluster(t)
		prefix = srv.Prefix
		if !strings.HasPrefix(srv.URL, "redis+cluster://") || len(srv.Addrs) != 3 {
			t.Fatalf("URL %q, masters %v", srv.URL, srv.Addrs)
		}
		// Clients append the nodes they discover to their seed slice:
		// clients seeded with Addrs must not share room to append into.
		if cap(srv.Addrs) != len(srv.Addrs) {
			t.Fatalf("Addrs has capacity %d for %d masters, want none spare", cap(srv.Addrs), len(srv.Addrs))
		}
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: srv.Addrs})
		masters := map[string]bool{}
		for i := range 30 {
			key := fmt.Sprintf("%sk%d", srv.Prefix, i)
			if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			n, err := c.MasterForKey(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			masters[n.Options().Addr] = true
		}
		if len(masters) != 3 {
			t.Errorf("30 keys landed on masters %v, want all three", masters)
		}
	})
	if c == nil {
		t.FailNow()
	}
	defer c.Close()
	var left atomic.Int64 // masters are visited concurrently
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		keys, err := n.Keys(ctx, prefix+"*").Result()
		left.Add(int64(len(keys)))
		return err
	})
	if err != nil || left.Load() != 0 {
		t.Fatalf("%d keys of %s left after the test (err %v)", left.Load(), prefix, err)
	}
}
