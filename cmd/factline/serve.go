package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/logbuf"
	"github.com/factline/factline/internal/host/webhook"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve [flags]")
	var sf storeFlags
	sf.register(fs)
	addr := fs.String("addr", ":8080", "address to listen on")
	redisURL := fs.String("redis-url", "", "Redis URL; empty uses the in-process limiter and cache")
	var domains listFlag
	fs.Var(&domains, "domain", "domain manifest file or directory of *.yaml adding entity types and fact types to the built-in one (repeatable)")
	gatewayManifest := fs.String("manifest", "", "gateway (route) manifest to serve; empty serves the platform API alone")
	watch := fs.Bool("watch", false, "reload the gateway manifest and the --domain files when one changes (SIGHUP always reloads)")
	failOpen := fs.Bool("ratelimit-fail-open", true, "when Redis is unreachable, let rate-limited requests through (false: answer 503)")
	pluginsDir := fs.String("plugins-dir", "", "directory of plugin modules (*.wasm) to load and watch; plugins built into the binary load anyway")
	secretKey := fs.String("secret-key", "", "32-byte key (base64 or hex) encrypting webhook secrets at rest; empty: a key file in --data-dir")
	allowNets := fs.String("webhook-allow-networks", "", "non-public address ranges webhooks may reach, for example 10.0.0.0/8 (empty: public only)")
	pluginCache := fs.String("plugin-cache-dir", "", "where compiled plugins are cached across restarts (default: the user cache dir)")
	operator := fs.String("operator-tenant", "operator", "tenant whose admin keys may install and roll back plugins")
	pluginTimeout := fs.Duration("plugin-timeout", 100*time.Millisecond, "CPU-time budget of one plugin call, above 0 (stopped after 10 times it in wall time)")
	pluginMemory := fs.Int("plugin-memory-mib", 64, "memory cap of one plugin instance, in MiB, 8 to 4096")
	pluginInstances := fs.Int("plugin-instances", 0, "instances of each loaded plugin serving calls side by side, 1 to 1024; 0: 2 per GOMAXPROCS")
	docsURL := fs.String("docs-url", "https://docs.factline.dev", "base URL of the problem type pages, an absolute http or https URL")
	bodyLimit := fs.Int("body-limit", 1<<20, "largest accepted request body in bytes, at least 1")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	migrate := fs.Bool("migrate", true, "apply pending schema migrations at start (false: refuse to start while one is pending; see factline migrate)")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics on this address instead of --addr (for example 127.0.0.1:9090)")
	dbMaxConns := fs.Int("database-max-conns", 0, "Postgres connection pool size; 0: 16 per GOMAXPROCS (at least 10), at most a quarter of the server's max_connections")
	pprof := fs.Bool("pprof", false, "serve /debug/pprof/ on --metrics-addr (requires --metrics-addr)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	// Every value that can be checked without I/O is checked here, before
	// the store is opened (or created) and the plugins start loading.
	bad := func(format string, args ...any) error { return usageErr("factline serve: "+format, args...) }
	if *dbMaxConns < 0 || *dbMaxConns > math.MaxInt32 {
		return bad("--database-max-conns must be 0 (automatic) or a positive number, got %d", *dbMaxConns)
	}
	for _, a := range []struct{ flag, addr string }{{"--addr", *addr}, {"--metrics-addr", *metricsAddr}} {
		if a.addr == "" && a.flag == "--metrics-addr" {
			continue
		}
		if _, port, err := net.SplitHostPort(a.addr); err != nil || port == "" {
			return bad("%s %q: want host:port or :port (for example 127.0.0.1:9090)", a.flag, a.addr)
		}
	}
	if *pluginInstances < 0 || *pluginInstances > 1024 {
		return bad("--plugin-instances must be 0 (2 per GOMAXPROCS) or 1 to 1024, got %d", *pluginInstances)
	}
	if err := checkPluginLimits("serve", "--plugin-memory-mib", *pluginMemory, "--plugin-timeout", *pluginTimeout); err != nil {
		return err
	}
	if *bodyLimit < 1 {
		return bad("--body-limit must be at least 1 (bytes), got %d", *bodyLimit)
	}
	docs, err := checkDocsURL("serve", *docsURL)
	if err != nil {
		return err
	}
	if !auth.ValidTenant(*operator) {
		return bad("--operator-tenant %q: use 1-64 letters, digits, _ . and -", *operator)
	}
	if *secretKey != "" {
		if _, err := webhook.ParseSecretKey(*secretKey); err != nil {
			// The value is a secret: not repeated.
			return bad("--secret-key: want 32 bytes, base64 or hex encoded (for example from openssl rand -base64 32)")
		}
	}
	if err := sf.check("serve"); err != nil {
		return err
	}
	if *redisURL != "" {
		if err := app.CheckRedisURL(*redisURL); err != nil {
			return bad("--redis-url: %v", err)
		}
	}
	if _, err := webhook.ParseAllowList(*allowNets); err != nil {
		return bad("--webhook-allow-networks: %v", err)
	}
	if *pprof && *metricsAddr == "" {
		return bad("--pprof requires --metrics-addr: profiles are never served on the API address")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return bad("--log-level: %v", err)
	}
	// One JSON line per request: batched into a write every 100 ms or
	// 64 KiB rather than a write system call per line.
	logOut := logbuf.New(stderr, logbuf.Options{})
	defer logOut.Close()
	logger := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level}))
	// go-redis prints its own plain-text lines (a failed dial, a pool
	// error) to stderr; they go through the JSON log instead.
	redis.SetLogger(redisLog{logger})

	// A SIGHUP before the server runs its reload handler (opening the
	// store can take seconds) must not end the process, as a signal with
	// no handler does; the manifests are read fresh at start anyway.
	early := make(chan os.Signal, 1)
	signal.Notify(early, syscall.SIGHUP)
	defer signal.Stop(early)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.New(ctx, app.Config{
		Addr: *addr, DatabaseURL: sf.databaseURL, DatabaseMaxConns: int32(*dbMaxConns), RedisURL: *redisURL, DataDir: sf.dataDir,
		Domains: domains, Manifest: *gatewayManifest, Watch: *watch, RateLimitFailOpen: *failOpen,
		SecretKey: *secretKey, WebhookAllowNetworks: *allowNets,
		PluginsDir: *pluginsDir, PluginCacheDir: *pluginCache, OperatorTenant: *operator, PluginTimeout: *pluginTimeout, PluginMemoryMiB: *pluginMemory,
		PluginInstances: *pluginInstances,
		DocsURL:         docs, BodyLimit: *bodyLimit, Logger: logger,
		SkipMigrations: !*migrate, MetricsAddr: *metricsAddr, Pprof: *pprof,
	})
	if err != nil {
		return err
	}
	return a.Run(ctx, func(bound net.Addr) {
		where := "embedded store in " + sf.dataDir
		if sf.databaseURL != "" {
			where = "postgres"
		}
		logger.Info("factline listening", "addr", bound.String(), "store", where, "version", app.Version)
		fmt.Fprintf(stdout, "factline %s listening on http://%s (%s)\n", app.Version, displayAddr(bound), where)
		if m := a.MetricsAddr(); m != nil {
			fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", displayAddr(m))
		}
	})
}

// displayAddr turns a wildcard listen address into one a user can curl.
func displayAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || (!tcp.IP.IsUnspecified() && tcp.IP != nil) {
		return a.String()
	}
	return fmt.Sprintf("localhost:%d", tcp.Port)
}

func runVersion(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("version", "version")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "factline", app.Version)
	return nil
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// redisLog writes go-redis's messages as warnings of the JSON log.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, v...))
}
