package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgMaxConnections is generous: many tests run in parallel, each with a
// pool of its own.
const pgMaxConnections = 300

// pgFastSettings trade durability for speed. A crash of a throwaway test
// server loses nothing anyone needs.
var pgFastSettings = []string{"fsync=off", "synchronous_commit=off", "full_page_writes=off"}

// pgServer is a PostgreSQL server this binary started, or one named by
// FACTLINE_TEST_DATABASE_URL.
type pgServer struct {
	admin *pgxpool.Pool // on the maintenance database, for CREATE/DROP DATABASE
	base  url.URL       // the server's URL; the path is replaced per database
	// createWith ends every CREATE DATABASE: STRATEGY FILE_COPY on a server
	// this binary started (PostgreSQL 15+), which copies a small database
	// faster than writing it through the WAL.
	createWith string

	mu        sync.Mutex
	templates map[string]*pgTemplate // by key, see PostgresFrom
}

// pgTemplate is a database prepared once and copied by CREATE DATABASE ...
// TEMPLATE for every test that asks for it.
type pgTemplate struct {
	once sync.Once
	name string
	err  error
}

// pgLazy starts a server on first use and remembers the outcome, so a server
// that cannot start fails every test quickly with the same message.
type pgLazy struct {
	mu  sync.Mutex
	srv *pgServer
	err error
}

var (
	pgFast    pgLazy // fsync off
	pgDurable pgLazy // default durability
	dbSerial  atomic.Int64
)

// Postgres returns the URL of a fresh, empty database on a throwaway
// PostgreSQL server started once per test binary, with fsync, synchronous
// commit and full-page writes off for speed. The database is dropped when
// the test ends. FACTLINE_TEST_DATABASE_URL names a server to use instead.
func Postgres(t testing.TB) string {
	t.Helper()
	return postgresDB(t, &pgFast, false)
}

// PostgresDurable is [Postgres] on a second server, started on first use,
// that keeps PostgreSQL's default durability (fsync and synchronous commit
// on), for benchmarks whose figures must include the cost of flushing the
// WAL. With FACTLINE_TEST_DATABASE_URL it uses that server like Postgres.
func PostgresDurable(t testing.TB) string {
	t.Helper()
	return postgresDB(t, &pgDurable, true)
}

// PostgresFrom is [Postgres] for a database that starts as prepare leaves
// one: prepare runs once per test binary and key, on a database of its
// own that then serves as the template every call copies (CREATE DATABASE
// ... TEMPLATE, much faster than preparing each, migrations say). prepare
// must close its connections before it returns; a failed prepare fails
// every test of the key with its error.
func PostgresFrom(t testing.TB, key string, prepare func(ctx context.Context, url string) error) string {
	t.Helper()
	requireMain(t)
	srv, err := pgFast.get(false)
	if err != nil {
		t.Fatalf("testutil: PostgreSQL: %v", err)
	}
	tmpl, err := srv.template(key, prepare)
	if err != nil {
		t.Fatalf("testutil: PostgreSQL template %s: %v", key, err)
	}
	return srv.createDB(t, tmpl)
}

// template returns the name of the key's template database, preparing it on
// first use.
func (s *pgServer) template(key string, prepare func(ctx context.Context, url string) error) (string, error) {
	s.mu.Lock()
	if s.templates == nil {
		s.templates = make(map[string]*pgTemplate)
	}
	tp := s.templates[key]
	if tp == nil {
		tp = &pgTemplate{}
		s.templates[key] = tp
	}
	s.mu.Unlock()
	tp.once.Do(func() {
		name := fmt.Sprintf("factline_template_%d_%s_%s", os.Getpid(), key, randomHex(4))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ident := pgx.Identifier{name}.Sanitize()
		if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+ident+s.createWith); err != nil {
			tp.err = fmt.Errorf("create database %s: %w", name, err)
			return
		}
		// An external server keeps what this binary leaves behind.
		onStop(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
			return err
		})
		u := s.base
		u.Path = "/" + name
		if err := prepare(ctx, u.String()); err != nil {
			tp.err = fmt.Errorf("prepare: %w", err)
			return
		}
		tp.name = name
	})
	return tp.name, tp.err
}

func postgresDB(t testing.TB, lazy *pgLazy, durable bool) string {
	t.Helper()
	requireMain(t)
	srv, err := lazy.get(durable)
	if err != nil {
		t.Fatalf("testutil: PostgreSQL: %v", err)
	}
	return srv.createDB(t, "")
}

// createDB creates a database, a copy of template when it is not empty,
// and drops it when the test ends.
func (s *pgServer) createDB(t testing.TB, template string) string {
	t.Helper()
	name := fmt.Sprintf("factline_test_%d_%d_%s", os.Getpid(), dbSerial.Add(1), randomHex(4))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	sql += s.createWith
	if _, err := s.admin.Exec(ctx, sql); err != nil {
		t.Fatalf("testutil: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// FORCE ends connections the test left open.
		if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("testutil: drop database %s: %v", name, err)
		}
	})
	u := s.base
	u.Path = "/" + name
	return u.String()
}

func (l *pgLazy) get(durable bool) (*pgServer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.srv == nil && l.err == nil {
		if env := os.Getenv("FACTLINE_TEST_DATABASE_URL"); env != "" {
			l.srv, l.err = connectPostgres(env)
		} else {
			l.srv, l.err = startPostgres(durable)
		}
	}
	return l.srv, l.err
}

// connectPostgres uses an existing server.
func connectPostgres(raw string) (*pgServer, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("FACTLINE_TEST_DATABASE_URL must be a postgres:// URL, got %q", raw)
	}
	pool, err := adminPool(*u)
	if err != nil {
		return nil, fmt.Errorf("FACTLINE_TEST_DATABASE_URL: %w", err)
	}
	onStop(func() error { pool.Close(); return nil })
	return &pgServer{admin: pool, base: *u}, nil
}

// adminPool connects to the database named by u (the server's maintenance
// database when the path is empty).
func adminPool(u url.URL) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// startPostgres creates a cluster in a new directory and starts it on a free
// port, retrying with another port when the chosen one was taken meanwhile.
func startPostgres(durable bool) (srv *pgServer, err error) {
	bin, err := ensureInstalled("postgresql", postgresBinDir)
	if err != nil {
		return nil, err
	}
	asPostgres := os.Geteuid() == 0
	kind := "pg"
	if durable {
		kind = "pgdurable"
	}
	// The fast server lives in memory where it can: CREATE DATABASE, the
	// bulk of a test's setup, then copies files in memory, not on a disk
	// other test binaries keep busy.
	dir, err := newServerDir(kind, !durable)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			// A start that timed out may have left a postmaster behind.
			killPIDFile(filepath.Join(dir, "data", "postmaster.pid"), syscall.SIGQUIT)
			os.RemoveAll(dir)
		}
	}()
	if asPostgres {
		pgUser, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres user (created by the postgresql package): %w", err)
		}
		uid, _ := strconv.Atoi(pgUser.Uid)
		gid, _ := strconv.Atoi(pgUser.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, fmt.Errorf("chown %s to postgres: %w", dir, err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := filepath.Join(dir, "data")
	if err := runLogged(ctx, dir, filepath.Join(dir, "initdb.log"), asPostgres,
		filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"); err != nil {
		return nil, err
	}

	settings := []string{
		"listen_addresses=127.0.0.1",
		"max_connections=" + strconv.Itoa(pgMaxConnections),
		"shared_buffers=64MB",
		"log_min_messages=warning",
	}
	if !durable {
		settings = append(settings, pgFastSettings...)
	}
	pgCtl := filepath.Join(bin, "pg_ctl")
	var port int
	for attempt := 1; ; attempt++ {
		if port, err = freePort(); err != nil {
			return nil, err
		}
		opts := []string{"-p", strconv.Itoa(port), "-k", dir}
		for _, s := range settings {
			opts = append(opts, "-c", s)
		}
		// pg_ctl hands -o to a shell: quote every word.
		quoted := make([]string, len(opts))
		for i, o := range opts {
			quoted[i] = "'" + strings.ReplaceAll(o, "'", `'\''`) + "'"
		}
		serverLog := filepath.Join(dir, "server.log")
		os.Remove(serverLog)
		err = runLogged(ctx, dir, filepath.Join(dir, "pg_ctl.log"), asPostgres,
			pgCtl, "start", "-D", data, "-l", serverLog, "-w", "-t", "60", "-o", strings.Join(quoted, " "))
		if err == nil {
			break
		}
		log, _ := os.ReadFile(serverLog)
		if attempt < 5 && strings.Contains(string(log), "already in use") {
			continue // the port was taken between freePort and the bind
		}
		return nil, fmt.Errorf("%w\nserver log:\n%s", err, tail(log, 3000))
	}
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := runLogged(ctx, dir, filepath.Join(dir, "pg_ctl_stop.log"), asPostgres,
			pgCtl, "stop", "-D", data, "-m", "immediate", "-w")
		if err != nil {
			// pg_ctl failed (say runuser vanished): stop it by pid.
			killPIDFile(filepath.Join(data, "postmaster.pid"), syscall.SIGQUIT)
		}
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("stop PostgreSQL in %s: %w", dir, err)
		}
		return nil
	}

	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	pool, err := adminPool(u)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("connect to the test server: %w", err), stop())
	}
	onStop(func() error { pool.Close(); return stop() })
	u.Path = ""
	srv = &pgServer{admin: pool, base: u}
	var version int
	if pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version) == nil && version >= 150000 {
		srv.createWith = " STRATEGY FILE_COPY"
	}
	return srv, nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// PostgresExec connects to the database at url for statements a test
// runs itself (a setting a fault test changes) and returns a function
// that runs one, failing the test on an error. The connection closes when
// the test ends.
func PostgresExec(t testing.TB, url string) func(sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("testutil: connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return func(sql string) {
		t.Helper()
		if _, err := conn.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// WithSetting returns the connection URL url with a server setting its
// sessions start with (a query parameter pgx sends at connect).
func WithSetting(url, name, value string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + name + "=" + value
}
