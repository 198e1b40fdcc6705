package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/idempotency"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/tracing"
)

// Config configures the HTTP server.
type Config struct {
	// BodyLimit is the largest accepted request body in bytes
	// (default 1 MiB).
	BodyLimit int
	// UploadLimit is the largest body of the plugin upload endpoint
	// (default 32 MiB).
	UploadLimit int
	// DocsURL is the base of problem type URIs, without a trailing slash
	// (default https://docs.factline.dev).
	DocsURL string
	// RequestTimeout bounds the work of one request (default 30 s).
	RequestTimeout time.Duration
	// Version is reported by /health.
	Version string
	// NoMetrics leaves /metrics off the API port (404): the process
	// serves it on a listener of its own.
	NoMetrics bool
}

// Deps are the services the server fronts.
type Deps struct {
	Platform *platform.Service
	Auth     *auth.Authenticator
	Logger   *slog.Logger
	// Registry receives the HTTP metrics and is served at /metrics; a new
	// one is made when nil.
	Registry *prometheus.Registry
	// Checks are reported by /health in addition to the store.
	Checks []HealthCheck
	// Ready reports whether the process can serve its domain: nil once
	// the plugins and the domain model are loaded, an error saying what
	// is still loading before. /ready answers 503 until then; nil Ready
	// means ready from the start.
	Ready func() error
	// Limiter enforces manifest routes' rate limits; nil disables them.
	Limiter RateLimiter
	// Projections answers the query action; nil: every projection is
	// unknown.
	Projections Projections
	// Routes is the gateway manifest to serve; nil serves the platform API
	// alone. SetRoutes swaps it later.
	Routes *manifest.Gateway
	// TracerProvider traces requests; nil or the no-op provider: off.
	TracerProvider trace.TracerProvider
}

// HealthCheck is one named dependency check shown by /health.
type HealthCheck struct {
	Name string
	// Critical checks failing make /health answer 503.
	Critical bool
	// Dependency, when set, names the outside service the check reaches
	// ("database", "redis"); /health reports each one up or down.
	Dependency string
	Check      func(ctx context.Context) (detail string, err error)
}

// Server is the HTTP server.
type Server struct {
	cfg      Config
	app      *fiber.App
	platform *platform.Service
	auth     *auth.Authenticator
	idem     *idempotency.Keeper
	log      *slog.Logger
	registry *prometheus.Registry
	metrics  *httpMetrics
	checks   []HealthCheck
	ready    func() error
	started  time.Time

	limiter     RateLimiter
	tracer      trace.Tracer // nil when tracing is off
	projections Projections
	table       atomic.Pointer[routeTable]
	docs        docsCache // the last /openapi.json and /docs made
	// patterns are the fiber routes allowedMethods matches, split once.
	patterns atomic.Pointer[routePatterns]
	// methods are the methods fiber routes; guard answers any other.
	methods [][]byte
	conns   connTracker
	// endpoints document the routes registered through handle.
	endpoints []openapi.Endpoint
	// metricsHTTP serves the registry's metrics.
	metricsHTTP fiber.Handler
	// silentGrace is how long Shutdown lets a connection that has sent
	// nothing stay open (silentConnGrace; shorter in tests).
	silentGrace time.Duration
	// pages render the problems of browser requests under a prefix.
	pages []problemPages
	// stopping ends every request still in flight when a shutdown's
	// drain runs out (stopRequests): each answers 503 with Connection:
	// close and releases what it holds before the store closes.
	stopping     context.Context
	stopRequests context.CancelFunc
}

// New builds the server and registers the platform routes.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.Platform == nil || deps.Auth == nil {
		return nil, errors.New("gateway: platform and auth are required")
	}
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = 1 << 20
	}
	if cfg.UploadLimit <= 0 {
		cfg.UploadLimit = 32 << 20
	}
	if cfg.DocsURL == "" {
		cfg.DocsURL = "https://docs.factline.dev"
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Registry == nil {
		deps.Registry = prometheus.NewRegistry()
	}
	s := &Server{
		cfg:      cfg,
		platform: deps.Platform,
		auth:     deps.Auth,
		idem:     idempotency.New(deps.Platform.Store()),
		log:      deps.Logger,
		registry: deps.Registry,
		checks:   deps.Checks,
		ready:    deps.Ready,
		started:  time.Now(),

		silentGrace: silentConnGrace,
		limiter:     deps.Limiter,
		tracer:      tracing.Tracer(deps.TracerProvider),
		projections: deps.Projections,
	}
	s.stopping, s.stopRequests = context.WithCancel(context.Background())
	s.SetRoutes(deps.Routes)
	m, err := newHTTPMetrics(deps.Registry)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.app = fiber.New(fiber.Config{
		AppName: "factline",
		// The transport admits uploads; observe enforces BodyLimit on
		// every other route.
		BodyLimit:             max(cfg.BodyLimit, cfg.UploadLimit),
		ErrorHandler:          s.handleError,
		DisableStartupMessage: true,
		ReadTimeout:           cfg.RequestTimeout,
		WriteTimeout:          cfg.RequestTimeout,
		IdleTimeout:           2 * time.Minute,
		CaseSensitive:         true,
		StrictRouting:         false,
		ReadBufferSize:        headerLimit,
		// Bodies are JSON: fasthttp would otherwise parse a multipart body
		// while reading it and answer its parser's errors.
		DisablePreParseMultipartForm: true,
	})
	s.hookTransport()
	s.conns.hook(s.app.Server())
	s.app.Use(s.observe)
	s.metricsHTTP = adaptor.HTTPHandler(promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	s.routes()
	return s, nil
}

// App exposes the fiber app, for tests (app.Test) and for the gateway
// manifest's routes.
func (s *Server) App() *fiber.App { return s.app }

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.app.Listener(trackingListener{Listener: ln, tracker: &s.conns}); err != nil {
		return fmt.Errorf("gateway: serve: %w", err)
	}
	return nil
}

// Shutdown stops accepting connections and waits up to timeout for
// requests in flight to finish; every answer from then on carries
// Connection: close. An idle keep-alive connection is read from for one
// more second, so a request already on its way is answered; connections
// that never sent a byte close once they have been silent for the grace
// period.
func (s *Server) Shutdown(timeout time.Duration) error {
	defer s.stopRequests()
	deadline := time.Now().Add(timeout)
	// Idempotency records still being written once the requests are
	// done: their retries end (each after its current attempt).
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		defer cancel()
		if err := s.idem.Stop(ctx); err != nil {
			s.log.Warn("idempotency records not written before shutdown", "err", err)
		}
	}()
	s.conns.drain()
	done := make(chan error, 1)
	go func() { done <- s.app.ShutdownWithTimeout(timeout) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				// The drain ran out: stop the requests still in flight,
				// and give them a moment to answer and let go of what they
				// hold (an Idempotency-Key, a connection) while the store
				// is still open.
				s.stopRequests()
				s.conns.wait(time.Now().Add(stoppedRequestGrace))
				return fmt.Errorf("gateway: shutdown: %w", err)
			}
			if !s.conns.wait(deadline) {
				return fmt.Errorf("gateway: shutdown: %w", context.DeadlineExceeded)
			}
			return nil
		case <-tick.C:
			s.conns.closeSilent(s.silentGrace)
		}
	}
}

// PurgeLoop deletes expired idempotency records every interval until ctx
// ends.
func (s *Server) PurgeLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := s.idem.Purge(ctx)
			if err != nil {
				s.log.Warn("purge idempotency keys", "err", err)
			} else if n > 0 {
				s.log.Info("purged idempotency keys", "count", n)
			}
		}
	}
}
