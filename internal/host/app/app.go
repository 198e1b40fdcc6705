// Package app wires Factline's parts into a running server from a Config:
// the store (Postgres when a database URL is given, else the embedded SQLite
// file), the platform and its ledgers, authentication, idempotency, rate
// limits (ratelimit: Redis or in process), tracing (OTLP or off), the
// plugin runtime and manager (wasm, pluginhost), the stream's metrics and
// lag history, subscriptions, projections (projector on the projection
// engine), webhooks, the OpenAPI document, the operator console, the
// Prometheus registry and the HTTP gateway, plus manifest reload. The
// logger comes in the Config (cmd/factline batches it with logbuf).
// cmd/factline only parses flags into a Config; tests start the same App
// in-process.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/gateway"
	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/pluginhost"
	"github.com/factline/factline/internal/host/projector"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/store/postgres"
	"github.com/factline/factline/internal/host/store/sqlite"
	"github.com/factline/factline/internal/host/stream"
	"github.com/factline/factline/internal/host/subscription"
	"github.com/factline/factline/internal/host/tracing"
	"github.com/factline/factline/internal/host/wasm"
	"github.com/factline/factline/internal/host/webhook"
	"github.com/factline/factline/plugins"
)

// domainPoll is how often a process looks for domain manifests installed
// through another one.
const domainPoll = 2 * time.Second

// Version is the product version, set at build time.
var Version = "0.1.0-dev"

// Config is everything a Factline process needs.
type Config struct {
	Addr        string // listen address, default ":8080"
	DatabaseURL string // Postgres URL; empty: embedded SQLite in DataDir
	// DatabaseMaxConns caps the Postgres connection pool; zero sizes it
	// from GOMAXPROCS and the server's max_connections
	// (postgres.AutoMaxConns).
	DatabaseMaxConns int32
	RedisURL         string // empty: in-process limiter and cache
	DataDir          string // default "./data"
	// Domains are domain manifest files or directories (of *.yaml)
	// layered over the built-in domain manifest, in order.
	Domains []string
	// Manifest is the gateway (route) manifest path; empty serves the
	// platform API alone.
	Manifest string
	// Watch reloads the gateway manifest and the Domains files when one
	// changes.
	Watch bool
	// RateLimitFailOpen lets requests through when Redis is unreachable;
	// false answers 503 instead.
	RateLimitFailOpen bool
	// RateLimitCallTimeout bounds each Redis call of the limiter; 0 is
	// ratelimit.DefaultCallTimeout (100 ms).
	RateLimitCallTimeout time.Duration
	// PluginsDir is a directory of plugin modules (*.wasm) loaded at
	// start and watched; "" for none.
	PluginsDir string
	// PluginCacheDir keeps compiled plugins across restarts (default: the
	// user's cache directory, factline/wasm-cache).
	PluginCacheDir string
	// PluginTimeout and PluginMemoryMiB bound each plugin call (defaults
	// 100 ms of CPU time, see wasm.Options.CallTimeout, and 64 MiB).
	PluginTimeout   time.Duration
	PluginMemoryMiB int
	// PluginInstances is how many instances of each loaded plugin version
	// serve calls side by side (default 2 per GOMAXPROCS); each one holds
	// its own memory, up to PluginMemoryMiB.
	PluginInstances int
	// BuiltinPlugins replaces the plugins built into the binary (tests).
	BuiltinPlugins map[string][]byte
	// StandInLedgers serves the types of a ledger plugin that no source
	// holds at start-up with the built-in generic ledger, without the
	// plugin's rules, instead of answering 503 for their facts and
	// commands (tests of other parts that load no plugins).
	StandInLedgers bool
	// PluginPoll is how often the store and PluginsDir are read for
	// plugin versions installed elsewhere (default 2 s; tests that
	// order processes by hand make it long and call Plugins.Sync).
	PluginPoll time.Duration
	// OperatorTenant's admin keys manage plugins (default "operator").
	OperatorTenant string
	// PlatformOnly stops New once the store, the plugins and the platform
	// are up, for maintenance commands (factline ledger rebuild) that
	// serve nothing: they need no webhook secret key, rate limiter,
	// projections or server, and must not create a key file. Such an App
	// is not Run.
	PlatformOnly bool
	// SecretKey encrypts webhook signing secrets at rest (32 bytes, base64
	// or hex); empty: a key file created in DataDir.
	SecretKey string
	// WebhookAllowNetworks lists non-public address ranges webhooks may
	// reach (for example "10.0.0.0/8"); empty: public addresses only.
	WebhookAllowNetworks string
	// WebhookTLS is the client TLS configuration of webhook deliveries
	// (for example RootCAs trusting a private CA); nil: the system's.
	WebhookTLS *tls.Config
	DocsURL    string
	BodyLimit  int
	// ShutdownTimeout bounds the wait for requests in flight on stop.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
	// SkipMigrations opens the store without migrating it and refuses a
	// database with a pending migration (factline migrate up applies them).
	SkipMigrations bool
	// MetricsAddr, when set, serves /metrics (and /debug/pprof/ with
	// Pprof) on a listener of its own instead of the API address.
	MetricsAddr string
	Pprof       bool
	// TracerProvider traces requests and the work their facts cause; nil:
	// built from the OTEL_* environment (off unless it asks for OTLP).
	TracerProvider trace.TracerProvider
	// LagSampleInterval is how often the stream consumers' lag is sampled
	// for GET /v1/admin/stream/history (default 5 s; an hour is kept).
	LagSampleInterval time.Duration
}

func (c *Config) defaults() {
	if c.Addr == "" {
		c.Addr = ":8080"
	}
	if c.DataDir == "" {
		c.DataDir = "./data"
	}
	if c.PluginCacheDir == "" {
		c.PluginCacheDir = DefaultPluginCacheDir(c.DataDir)
	}
	if c.OperatorTenant == "" {
		c.OperatorTenant = "operator"
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 20 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
}

// OpenStore opens the configured store: Postgres when DatabaseURL is set,
// otherwise the SQLite file DataDir/factline.db.
func OpenStore(ctx context.Context, cfg Config) (store.Store, error) {
	return openStore(ctx, cfg, nil)
}

// openStore is OpenStore telling applied about each migration it applies.
func openStore(ctx context.Context, cfg Config, applied func(store.Migration)) (store.Store, error) {
	cfg.defaults()
	if cfg.DatabaseURL != "" {
		s, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Options{Logger: cfg.Logger, SkipMigrations: cfg.SkipMigrations, MaxConns: cfg.DatabaseMaxConns, Applied: applied})
		if err != nil {
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
		return s, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	s, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, EmbeddedStoreFile), sqlite.Options{Logger: cfg.Logger, SkipMigrations: cfg.SkipMigrations, Applied: applied})
	if err != nil {
		return nil, fmt.Errorf("open embedded store: %w", err)
	}
	return s, nil
}

// App is a running Factline process.
type App struct {
	cfg          Config
	manifestHash []byte   // of the gateway manifest and domain files being served
	closers      []func() // run in reverse by Close

	// reloadMu serialises model changes (SIGHUP, --watch).
	reloadMu sync.Mutex
	ledgers  pluginhost.Ledgers
	// awaited holds ledger names the model's types need (from the start,
	// or added at run time) that no plugin of this process served when
	// they were needed: those types answer 503 until one does.
	awaited atomic.Pointer[map[string]bool]
	awaitMu sync.Mutex // serialises changes to awaited
	// startupMisfits holds, by plugin name, why the start-up load refused
	// a ledger plugin that does not fit the served model (a route to a
	// command it lacks, a type it does not serve); startupDone is set once
	// that load has ended. fatal carries an error that ends Run.
	startupMu      sync.Mutex
	startupMisfits map[string]error
	startupDone    atomic.Bool
	fatal          chan error
	// served is the model being served, for the checks of new plugin
	// versions (checkPluginFits), which run on the plugins' goroutines.
	served atomic.Pointer[servedModel]
	// layersHash identifies the stored domain manifests being served, or
	// last refused.
	layersHash string
	// refusedWith, while the stored manifests are refused, identifies the
	// plugin versions loaded when they were: a set that needs a plugin
	// version this process had not loaded yet is tried again once the
	// loaded versions change.
	refusedWith string
	// layersSeen is the set of stored domain manifests being served (the
	// last applied), for readers without reloadMu (modelBehind); behind
	// caches the stored set modelBehind read last.
	layersSeen atomic.Pointer[layerSet]
	behind     struct {
		sync.Mutex
		at     time.Time
		stored *layerSet
		// reading is closed when the read of the store under way ends;
		// nil when none is.
		reading chan struct{}
	}
	// files are the --domain and --manifest files being served, as read
	// when last accepted; reloadMu guards them.
	files manifestFiles
	// metricsAddr is the bound --metrics-addr listener, if any.
	metricsAddr net.Addr

	Store         store.Store
	Platform      *platform.Service
	Server        *gateway.Server
	Registry      *prometheus.Registry
	Stream        *stream.Metrics
	Plugins       *pluginhost.Manager
	Subscriptions *subscription.Runner
	Webhooks      *webhook.Service
	Projections   *projector.Service
	// LagHistory samples the stream consumers' lag while Run runs.
	LagHistory *stream.LagHistory
}

// New opens the store and builds every part; it does not listen yet.
func New(ctx context.Context, cfg Config) (_ *App, err error) {
	cfg.defaults()
	// The domain files are checked before the store opens, and so is the
	// gateway manifest on its own: bad input must not create or migrate a
	// store. It is checked in full once the stored domain manifests are
	// read (buildModel): its routes may name entity types only they
	// declare, as the running processes that accepted it had them.
	if _, err := LoadDomain(cfg.Domains...); err != nil {
		return nil, err
	}
	if cfg.Manifest != "" {
		if _, err := os.Stat(cfg.Manifest); err != nil {
			return nil, fmt.Errorf("gateway manifest: %w", err)
		}
		src, err := os.ReadFile(cfg.Manifest)
		if err != nil {
			return nil, fmt.Errorf("read gateway manifest: %w", err)
		}
		if err := manifest.PrecheckGateway(cfg.Manifest, src); err != nil {
			return nil, fmt.Errorf("manifests:\n%w", err)
		}
	}
	var gw *manifest.Gateway
	var domain *manifest.Domain // built with the stored manifests below
	// Hashed before reading, so an edit made meanwhile is reloaded.
	manifestHash, _ := sourcesHash(cfg)
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// The watcher compares against the bytes actually served, so an edit
	// made before it starts is not missed.
	a := &App{cfg: cfg, Store: st, Registry: prometheus.NewRegistry(), manifestHash: manifestHash,
		startupMisfits: map[string]error{}, fatal: make(chan error, 1)}
	a.closers = append(a.closers, func() {
		if err := st.Close(); err != nil {
			cfg.Logger.Warn("close store", "err", err)
		}
	})
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	if a.cfg.TracerProvider == nil {
		tp, shutdown, err := tracing.FromEnv(ctx, os.Getenv, cfg.Logger)
		if err != nil {
			return nil, err
		}
		a.cfg.TracerProvider = tp
		a.closers = append(a.closers, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := shutdown(sctx); err != nil {
				cfg.Logger.Warn("flush traces", "err", err)
			}
		})
	}
	cfg = a.cfg
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if a.Stream, err = stream.NewMetrics(a.Registry); err != nil {
		return nil, err
	}
	// Domain manifests installed through the admin API of any process.
	stored, err := st.ListDomainLayers(ctx)
	if err != nil {
		return nil, fmt.Errorf("read stored domain manifests: %w", err)
	}
	// Always built here: stored manifests and --domain files may carry
	// routes, and command routes are checked.
	if a.files, err = readManifestFiles(cfg); err != nil {
		return nil, err
	}
	if domain, gw, err = a.buildModel(a.files, stored); err != nil {
		return nil, fmt.Errorf("manifests:\n%w", err)
	}
	a.setLayersHash(stored)
	a.served.Store(&servedModel{domain: domain, routes: gw})
	limiter, limiterParts, err := newLimiter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() { _ = limiterParts.close() })

	ledgers, pluginCheck, err := a.startPlugins(ctx, domain)
	if err != nil {
		return nil, err
	}
	if a.Platform, err = platform.New(platform.Options{Store: st, Domain: domain, Ledgers: ledgers, Logger: cfg.Logger, ModelBehind: a.modelBehind, RoutesBehind: a.routesBehind}); err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.Platform.Close)
	if cfg.PlatformOnly {
		return a, nil
	}
	allow, err := webhook.ParseAllowList(cfg.WebhookAllowNetworks)
	if err != nil {
		return nil, fmt.Errorf("webhook allow list: %w", err)
	}
	a.Webhooks, err = webhook.New(webhook.Options{Store: st, Platform: a.Platform, Logger: cfg.Logger,
		SecretKey: cfg.SecretKey, DataDir: cfg.DataDir, AllowNetworks: allow, TLSConfig: cfg.WebhookTLS, StreamMetrics: a.Stream,
		TracerProvider: cfg.TracerProvider})
	if err != nil {
		return nil, err
	}
	// Refuse to start with a key that cannot read the shared secrets.
	if err := a.Webhooks.CheckSecretKey(ctx); err != nil {
		return nil, err
	}
	a.Webhooks.RegisterConfigType(a.Platform)
	if err := a.Webhooks.Register(a.Registry); err != nil {
		return nil, err
	}
	if a.Projections, err = a.newProjector(ctx); err != nil {
		return nil, err
	}
	a.Projections.RegisterConfigType(a.Platform)
	// One authenticator for the API and the console, so a key the console
	// finds revoked is refused by the API at once too.
	authn := auth.NewAuthenticator(st)
	a.Server, err = gateway.New(gateway.Config{BodyLimit: cfg.BodyLimit, DocsURL: cfg.DocsURL, Version: Version, NoMetrics: cfg.MetricsAddr != ""}, gateway.Deps{
		Platform:       a.Platform,
		Auth:           authn,
		Logger:         cfg.Logger,
		Registry:       a.Registry,
		Limiter:        limiter,
		Projections:    a.Projections,
		Routes:         gw,
		TracerProvider: cfg.TracerProvider,
		Checks:         []gateway.HealthCheck{limiterParts.check, pluginCheck},
		// The domain model is loaded before the server exists; the
		// plugins load in the background.
		Ready: func() error {
			if !a.Plugins.Loaded() {
				return fmt.Errorf("loading plugins: %s", strings.Join(a.Plugins.PendingNames(), ", "))
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	a.Plugins.Mount(a.Server, a.Platform, cfg.OperatorTenant)
	a.mountDomainAdmin(a.Server)
	a.Webhooks.Mount(a.Server)
	a.Projections.Mount(a.Server)
	a.LagHistory = a.newLagHistory()
	a.mountOperatorReads(a.Server)
	if err := a.mountConsole(authn); err != nil {
		return nil, err
	}
	a.Subscriptions, err = subscription.New(subscription.Options{
		Platform: a.Platform, Store: st, Handlers: a.Plugins, Subscriptions: domain.Subscriptions,
		Logger: cfg.Logger, Metrics: a.Stream, Registerer: a.Registry,
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// startPlugins starts the WebAssembly runtime and loads the plugins: the
// versions active in the store, then built-in ones, then the plugins
// directory. It returns the ledger registry the platform resolves the
// manifest's ledger names with, and a health check naming ledger plugins
// that are not loaded (their types are served by the built-in ledger).
func (a *App) startPlugins(ctx context.Context, domain *manifest.Domain) (ledger.Registry, gateway.HealthCheck, error) {
	cfg := a.cfg
	host, err := wasm.NewHost(wasm.Options{
		CacheDir:       cfg.PluginCacheDir,
		MemoryLimitMiB: cfg.PluginMemoryMiB,
		CallTimeout:    cfg.PluginTimeout,
		PoolSize:       cfg.PluginInstances,
		Logger:         cfg.Logger,
		Registerer:     a.Registry,
	})
	if err != nil {
		return nil, gateway.HealthCheck{}, fmt.Errorf("plugin runtime: %w", err)
	}
	reg := wasm.NewRegistry(host)
	a.closers = append(a.closers, func() {
		reg.Wait()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		host.Close(cctx)
	})
	builtin := a.builtinPlugins()
	a.Plugins, err = pluginhost.NewManager(pluginhost.Options{
		Store: a.Store, Registry: reg, Dir: cfg.PluginsDir, Builtin: builtin, Check: a.checkPlugin, Poll: cfg.PluginPoll, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, gateway.HealthCheck{}, err
	}
	if err := a.Plugins.Start(ctx); err != nil {
		return nil, gateway.HealthCheck{}, err
	}
	a.closers = append(a.closers, func() {
		if err := a.Plugins.Stop(context.Background()); err != nil {
			a.cfg.Logger.Warn("stop plugin manager", "err", err)
		}
	})
	ledgers := pluginhost.Ledgers{Builtin: ledger.Builtin(), Registry: reg, Loading: a.Plugins.Pending, Awaited: func(name string) bool {
		aw := a.awaited.Load()
		return aw != nil && (*aw)[name]
	}, Refused: func(name string) bool {
		a.startupMu.Lock()
		defer a.startupMu.Unlock()
		return a.startupMisfits[name] != nil
	}, Commands: &pluginhost.CommandCache{}}
	a.ledgers = ledgers
	var names []string
	for _, t := range domain.Entities {
		names = append(names, t.Ledger)
	}
	// A ledger plugin the domain names is not stood in for by the
	// built-in ledger, while it loads or when it is nowhere to load: that
	// would record facts the plugin refuses and leave the state it keeps
	// behind. Its types answer 503 for facts and commands until it is
	// loaded here.
	if !cfg.StandInLedgers {
		a.await(ledgers.Missing(dedupe(names)))
	}
	// Closed before the manager stops (closers run in reverse): a load
	// that a failed start cut short names nothing as missing.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	a.closers = append(a.closers, stopWatch)
	go func() {
		if a.Plugins.WaitLoaded(watchCtx) != nil || watchCtx.Err() != nil {
			return
		}
		a.startupDone.Store(true)
		missing := ledgers.Missing(dedupe(names))
		// A ledger the start-up load refused because the manifests do not
		// fit it is not stood in for: the built-in ledger would take its
		// types' writes without its rules; they answer 503 (Refused). With
		// only manifest files to blame the process stops, as check and a
		// reload refuse such manifests. Domain manifests stored through
		// the admin API are fixed through it, so then it keeps serving.
		a.startupMu.Lock()
		var misfits []error
		var others []string // missing without a refusal: stood in for
		for _, name := range missing {
			if err := a.startupMisfits[name]; err != nil {
				misfits = append(misfits, err) // each problem names the ledger and where the manifest says it
			} else {
				others = append(others, name)
			}
		}
		a.startupMu.Unlock()
		if len(misfits) > 0 {
			problems := errors.Join(misfits...)
			stored, err := a.Store.ListDomainLayers(watchCtx)
			if err == nil && len(stored) == 0 {
				a.fatal <- fmt.Errorf("the manifests do not fit the ledger plugins they name; fix them (factline check shows each problem) or install plugin versions that fit:\n%w", problems)
				return
			}
			cfg.Logger.Error("the manifests, stored domain manifests among them, do not fit the ledger plugins they name; their entity types answer 503 "+
				"until a version that fits is loaded: change the stored manifests (PUT or DELETE /v1/admin/domain/<name>) or the files and restart, or install plugin versions that fit",
				"problems", problems.Error())
		}
		if len(others) > 0 && cfg.StandInLedgers {
			cfg.Logger.Warn("plugins named by the domain manifest are not loaded; their entity types use the built-in ledger until they are", "missing", others)
		} else if len(others) > 0 {
			cfg.Logger.Warn("plugins named by the domain manifest are not loaded; their entity types answer 503 for facts and commands until they are "+
				"(install them: PUT /v1/admin/plugins/<name>, or a file in --plugins-dir)", "missing", others)
		}
	}()
	check := gateway.HealthCheck{Name: "plugins", Check: func(context.Context) (string, error) {
		loaded := len(reg.List())
		if pending := a.Plugins.PendingNames(); len(pending) > 0 {
			return fmt.Sprintf("%d loaded", loaded), fmt.Errorf("loading: %s", strings.Join(pending, ", "))
		}
		var missing []string
		for _, t := range a.Platform.Domain().Entities {
			missing = append(missing, ledgers.Missing([]string{t.Ledger})...)
		}
		for _, s := range a.Platform.Domain().Subscriptions {
			if _, ok := a.Plugins.SubscriptionHandler(s.Handler); !ok {
				missing = append(missing, "handler "+s.Handler)
			}
		}
		detail := fmt.Sprintf("%d loaded", loaded)
		if missing = dedupe(missing); len(missing) > 0 {
			return detail, fmt.Errorf("not loaded: %s", strings.Join(missing, ", "))
		}
		return detail, nil
	}}
	return ledgers, check, nil
}

// DefaultPluginCacheDir is where compiled plugins are cached when no
// directory is given: compiled code depends only on the module and the
// runtime, so one cache per user serves every data dir (dataDir's
// wasm-cache when the user has no cache dir).
func DefaultPluginCacheDir(dataDir string) string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "factline", "wasm-cache")
	}
	return filepath.Join(dataDir, "wasm-cache")
}

// builtinPlugins are the plugin modules built into the binary.
func (a *App) builtinPlugins() map[string][]byte {
	if a.cfg.BuiltinPlugins != nil {
		return a.cfg.BuiltinPlugins
	}
	return plugins.Builtin()
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// Run listens on the configured address and serves until ctx ends, then
// shuts down gracefully: requests in flight finish, queued fact appends
// commit, and the store closes. ready, when non-nil, receives the bound
// address once listening.
func (a *App) Run(ctx context.Context, ready func(addr net.Addr)) error {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		a.Close()
		return fmt.Errorf("listen on %s: %w", a.cfg.Addr, err)
	}
	if a.cfg.MetricsAddr != "" {
		m, err := a.listenMetrics()
		if err != nil {
			ln.Close()
			a.Close()
			return fmt.Errorf("listen on metrics address %s: %w", a.cfg.MetricsAddr, err)
		}
		defer m.close()
	}
	// SIGHUP reloads the manifests, with or without manifest files (the
	// stored layers are re-read too). Registered before the server says it
	// listens: a SIGHUP with no handler ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if ready != nil {
		ready(ln.Addr())
	}
	bg, stopBG := context.WithCancel(context.Background())
	go a.Server.PurgeLoop(bg, 10*time.Minute)
	stopNow := context.Background() // only on failed starts
	if err := a.Subscriptions.Start(bg); err != nil {
		stopBG()
		ln.Close()
		a.Close()
		return fmt.Errorf("start subscriptions: %w", err)
	}
	if err := a.Webhooks.Start(bg); err != nil {
		stopBG()
		_ = a.Subscriptions.Stop(stopNow)
		ln.Close()
		a.Close()
		return fmt.Errorf("start webhooks: %w", err)
	}
	if err := a.Projections.Start(bg); err != nil {
		stopBG()
		_ = a.Subscriptions.Stop(stopNow)
		ln.Close()
		a.Close()
		return fmt.Errorf("start projections: %w", err)
	}
	go a.LagHistory.Run(bg, a.Store, a.lagEvery(), func(err error) {
		a.cfg.Logger.Warn("sample stream lag", "err", err)
	})
	go a.pollDomainLayers(bg, domainPoll)
	var checks sync.WaitGroup // one-off checks at start, waited for at stop
	checks.Go(func() { a.warnOfUndeclaredTypes(bg) })
	go a.watchManifest(bg, hup)

	served := make(chan error, 1)
	go func() { served <- a.Server.Serve(ln) }()
	var fatal error
	stop := true
	select {
	case err = <-served:
		stop = false
	case fatal = <-a.fatal:
	case <-ctx.Done():
	}
	if stop {
		if fatal != nil {
			a.cfg.Logger.Error("stopping", "err", fatal)
		} else {
			a.cfg.Logger.Info("shutting down", "timeout", a.cfg.ShutdownTimeout)
		}
		err = a.Server.Shutdown(a.cfg.ShutdownTimeout)
		// A signal right after the listener opened can come before Serve
		// has started; Shutdown then has nothing to stop and Serve would
		// accept for ever. Closing the listener ends it either way.
		ln.Close()
		<-served //nolint:errcheck // Shutdown's error is the one to report
		if fatal != nil {
			err = fatal
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	if werr := a.Webhooks.Stop(sctx); werr != nil {
		a.cfg.Logger.Warn("stop webhooks", "err", werr)
	}
	cancel()
	stopBG()
	checks.Wait()
	if serr := a.Subscriptions.Stop(context.Background()); serr != nil {
		a.cfg.Logger.Warn("stop subscriptions", "err", serr)
	}
	if perr := a.Projections.Stop(context.Background()); perr != nil {
		a.cfg.Logger.Warn("stop projections", "err", perr)
	}
	a.Close()
	return err
}

// Close releases everything New opened, in reverse order.
func (a *App) Close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}
