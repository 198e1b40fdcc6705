// Package app wires Factline's parts into a running server from a Config:
// the store (Postgres when a database URL is given, else the embedded SQLite
// file), the platform, authentication and the HTTP gateway. cmd/factline
// only parses flags into a Config; tests start the same App in-process.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/factline/factline/host/auth"
	"github.com/factline/factline/host/gateway"
	"github.com/factline/factline/host/ledger"
	"github.com/factline/factline/host/manifest"
	"github.com/factline/factline/host/platform"
	"github.com/factline/factline/host/store"
	"github.com/factline/factline/host/store/postgres"
	"github.com/factline/factline/host/store/sqlite"
	"github.com/factline/factline/host/stream"
)

// Version is the product version, set at build time.
var Version = "0.1.0-dev"

// Config is everything a Factline process needs.
type Config struct {
	Addr        string // listen address, default ":8080"
	DatabaseURL string // Postgres URL; empty: embedded SQLite in DataDir
	RedisURL    string // empty: in-process limiter and cache
	DataDir     string // default "./data"
	// Domain is the domain manifest path; empty uses the built-in one.
	Domain string
	// Manifest is the gateway (route) manifest path; empty serves the
	// platform API alone.
	Manifest string
	// Watch reloads the gateway manifest when its file changes.
	Watch bool
	// RateLimitFailOpen lets requests through when Redis is unreachable;
	// false answers 503 instead.
	RateLimitFailOpen bool
	DocsURL           string
	BodyLimit         int
	// ShutdownTimeout bounds the wait for requests in flight on stop.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
}

func (c *Config) defaults() {
	if c.Addr == "" {
		c.Addr = ":8080"
	}
	if c.DataDir == "" {
		c.DataDir = "./data"
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
	cfg.defaults()
	if cfg.DatabaseURL != "" {
		s, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.Options{Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
		return s, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	s, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "factline.db"), sqlite.Options{Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("open embedded store: %w", err)
	}
	return s, nil
}

// App is a running Factline process.
type App struct {
	cfg          Config
	baseDomain   *manifest.Domain
	limiterClose func() error
	Store        store.Store
	Platform     *platform.Service
	Server       *gateway.Server
	Registry     *prometheus.Registry
	Stream       *stream.Metrics
}

// New opens the store and builds every part; it does not listen yet.
func New(ctx context.Context, cfg Config) (*App, error) {
	cfg.defaults()
	base, err := LoadDomain(cfg.Domain)
	if err != nil {
		return nil, err
	}
	var gw *manifest.Gateway
	domain := base
	if cfg.Manifest != "" {
		if gw, err = manifest.LoadGatewayFile(cfg.Manifest, base); err != nil {
			return nil, fmt.Errorf("gateway manifest:\n%w", err)
		}
		domain = manifest.MergeDomain(base, gw)
	}
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, Store: st, Registry: prometheus.NewRegistry(), baseDomain: base}
	limiter, limiterCheck, err := newLimiter(ctx, cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	a.limiterClose = limiterCheck.close
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if a.Stream, err = stream.NewMetrics(a.Registry); err != nil {
		st.Close()
		return nil, err
	}
	a.Platform, err = platform.New(platform.Options{Store: st, Domain: domain, Ledgers: ledger.Builtin(), Logger: cfg.Logger})
	if err != nil {
		st.Close()
		return nil, err
	}
	a.Server, err = gateway.New(gateway.Config{BodyLimit: cfg.BodyLimit, DocsURL: cfg.DocsURL, Version: Version}, gateway.Deps{
		Platform: a.Platform,
		Auth:     auth.NewAuthenticator(st),
		Logger:   cfg.Logger,
		Registry: a.Registry,
		Limiter:  limiter,
		Routes:   gw,
		Checks:   []gateway.HealthCheck{limiterCheck.check},
	})
	if err != nil {
		a.Platform.Close()
		st.Close()
		return nil, err
	}
	return a, nil
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
	if ready != nil {
		ready(ln.Addr())
	}
	bg, stopBG := context.WithCancel(context.Background())
	go a.Server.PurgeLoop(bg, 10*time.Minute)
	if a.cfg.Manifest != "" {
		go a.watchManifest(bg)
	}

	served := make(chan error, 1)
	go func() { served <- a.Server.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
		a.cfg.Logger.Info("shutting down", "timeout", a.cfg.ShutdownTimeout)
		err = a.Server.Shutdown(a.cfg.ShutdownTimeout)
		<-served
	}
	stopBG()
	a.Close()
	return err
}

// Close releases everything New opened.
func (a *App) Close() {
	a.Platform.Close()
	if a.limiterClose != nil {
		a.limiterClose()
	}
	if err := a.Store.Close(); err != nil {
		a.cfg.Logger.Warn("close store", "err", err)
	}
}
