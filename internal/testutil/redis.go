package testutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// redisPIDFile, inside the server directory, holds the daemon's pid.
	redisPIDFile = "redis.pid"
	// redisDatabases is the number of logical databases of a server this
	// binary starts: more than the tests of one binary use at once.
	redisDatabases = 1024
	// redisLeaseTTL bounds how long a crashed binary keeps a logical database
	// of a shared server (FACTLINE_TEST_REDIS_URL) leased.
	redisLeaseTTL = 30 * time.Minute
	// redisWait is how long Redis waits for a free logical database.
	redisWait = 2 * time.Minute
)

// redisServer hands out the logical databases of one server.
type redisServer struct {
	opts redis.Options // DB is set per call

	// A server started by this binary: a free list guarded by mu.
	mu   sync.Mutex
	cond *sync.Cond
	free []int

	// A shared server: databases are leased with keys in database 0.
	shared *redis.Client
	n      int
	owner  string
}

var redisState struct {
	mu  sync.Mutex
	srv *redisServer
	err error
}

// Redis returns the URL (redis://127.0.0.1:PORT/N) of logical database N of
// a Redis server started once per test binary. The database is the test's
// alone until it ends and is empty when handed out. FACTLINE_TEST_REDIS_URL
// names a server to use instead.
func Redis(t testing.TB) string {
	t.Helper()
	requireMain(t)
	redisState.mu.Lock()
	if redisState.srv == nil && redisState.err == nil {
		if env := os.Getenv("FACTLINE_TEST_REDIS_URL"); env != "" {
			redisState.srv, redisState.err = connectRedis(env)
		} else {
			redisState.srv, redisState.err = startRedis()
		}
	}
	srv, err := redisState.srv, redisState.err
	redisState.mu.Unlock()
	if err != nil {
		t.Fatalf("testutil: Redis: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), redisWait+time.Minute)
	defer cancel()
	db, err := srv.acquire(ctx)
	if err != nil {
		t.Fatalf("testutil: Redis: %v", err)
	}
	if err := srv.flush(ctx, db); err != nil {
		srv.release(db)
		t.Fatalf("testutil: Redis: flush database %d: %v", db, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.flush(ctx, db); err != nil {
			t.Logf("testutil: Redis: flush database %d: %v", db, err)
		}
		srv.release(db)
	})
	return srv.url(db)
}

// url returns the URL of logical database db.
func (s *redisServer) url(db int) string {
	u := url.URL{Scheme: "redis", Host: s.opts.Addr, Path: "/" + strconv.Itoa(db)}
	if s.opts.TLSConfig != nil {
		u.Scheme = "rediss"
	}
	switch {
	case s.opts.Password != "":
		u.User = url.UserPassword(s.opts.Username, s.opts.Password)
	case s.opts.Username != "":
		u.User = url.User(s.opts.Username)
	}
	return u.String()
}

func (s *redisServer) client(db int) *redis.Client {
	o := s.opts
	o.DB = db
	return redis.NewClient(&o)
}

func (s *redisServer) flush(ctx context.Context, db int) error {
	c := s.client(db)
	defer c.Close()
	return c.FlushDB(ctx).Err()
}

// acquire returns a logical database no other test uses, waiting for one
// when all are taken.
func (s *redisServer) acquire(ctx context.Context) (int, error) {
	deadline := time.Now().Add(redisWait)
	if s.shared == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		for len(s.free) == 0 {
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("all %d logical databases stayed in use for %v", redisDatabases, redisWait)
			}
			// Wake periodically to check the deadline.
			t := time.AfterFunc(time.Second, s.cond.Broadcast)
			s.cond.Wait()
			t.Stop()
		}
		db := s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		return db, nil
	}
	for {
		for db := 1; db < s.n; db++ {
			ok, err := s.shared.SetNX(ctx, leaseKey(db), s.owner, redisLeaseTTL).Result()
			if err != nil {
				return 0, fmt.Errorf("lease a logical database: %w", err)
			}
			if ok {
				return db, nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("all %d logical databases of FACTLINE_TEST_REDIS_URL stayed leased for %v", s.n-1, redisWait)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// releaseScript deletes a lease only if this process still holds it.
var releaseScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

func (s *redisServer) release(db int) {
	if s.shared == nil {
		s.mu.Lock()
		s.free = append(s.free, db)
		s.mu.Unlock()
		s.cond.Signal()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = releaseScript.Run(ctx, s.shared, []string{leaseKey(db)}, s.owner).Err()
}

func leaseKey(db int) string { return "factline:testutil:lease:" + strconv.Itoa(db) }

// connectRedis uses an existing server and leases its logical databases.
func connectRedis(raw string) (*redisServer, error) {
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("FACTLINE_TEST_REDIS_URL: %w", err)
	}
	s := &redisServer{opts: *opts}
	s.opts.DB = 0
	s.shared = s.client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.shared.Ping(ctx).Err(); err != nil {
		s.shared.Close()
		return nil, fmt.Errorf("FACTLINE_TEST_REDIS_URL: %w", err)
	}
	s.n = 16 // Redis' default, when CONFIG is not allowed
	if v, err := s.shared.ConfigGet(ctx, "databases").Result(); err == nil {
		if n, err := strconv.Atoi(v["databases"]); err == nil && n > 1 {
			s.n = n
		}
	}
	host, _ := os.Hostname()
	s.owner = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), randomHex(4))
	shared := s.shared
	onStop(func() error { return shared.Close() })
	return s, nil
}

// startRedis starts a daemonized, non-persistent server on a free port,
// retrying with another port when the chosen one was taken meanwhile.
func startRedis() (srv *redisServer, err error) {
	bin, err := ensureInstalled("redis-server", redisServerPath)
	if err != nil {
		return nil, err
	}
	dir, err := newServerDir("redis", false)
	if err != nil {
		return nil, err
	}
	pidFile := filepath.Join(dir, redisPIDFile)
	stop := func() error {
		killPIDFile(pidFile, syscall.SIGTERM)
		killPIDFile(pidFile, syscall.SIGKILL) // only if SIGTERM did not do
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("stop Redis in %s: %w", dir, err)
		}
		return nil
	}
	defer func() {
		if err != nil {
			_ = stop() // err is the one to report
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logFile := filepath.Join(dir, "redis.log")
	var port int
	for attempt := 1; ; attempt++ {
		if port, err = freePort(); err != nil {
			return nil, err
		}
		os.Remove(logFile)
		err = runLogged(ctx, dir, filepath.Join(dir, "redis-start.log"), false, bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no",
			"--daemonize", "yes", "--pidfile", pidFile, "--logfile", logFile, "--dir", dir,
			"--databases", strconv.Itoa(redisDatabases))
		if err != nil {
			return nil, err
		}
		err = waitRedis(ctx, port, pidFile, logFile)
		if err == nil {
			break
		}
		if attempt < 5 && errors.Is(err, errPortTaken) {
			continue
		}
		return nil, err
	}

	s := &redisServer{opts: redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}}
	s.cond = sync.NewCond(&s.mu)
	// Hand out low numbers first; 0 is kept for ad hoc use.
	for db := redisDatabases - 1; db >= 1; db-- {
		s.free = append(s.free, db)
	}
	onStop(stop)
	return s, nil
}

// errPortTaken: another process bound the port first.
var errPortTaken = errors.New("port taken")

// waitRedis waits until the daemon started on port answers and is the one
// that wrote pidFile (and not another server that took the port).
func waitRedis(ctx context.Context, port int, pidFile, logFile string) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		log, _ := os.ReadFile(logFile)
		if strings.Contains(string(log), "already in use") {
			return fmt.Errorf("%w: %s", errPortTaken, tail(log, 500))
		}
		if strings.Contains(string(log), "# Fatal") {
			return fmt.Errorf("redis-server did not start:\n%s", tail(log, 2000))
		}
		if _, err := os.Stat(pidFile); err == nil {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			v, err := c.ConfigGet(ctx, "pidfile").Result()
			c.Close()
			if err == nil {
				if v["pidfile"] != pidFile {
					return fmt.Errorf("%w: port %d answers with another Redis", errPortTaken, port)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	log, _ := os.ReadFile(logFile)
	return errors.New("redis-server did not answer within 20s:\n" + tail(log, 2000))
}
