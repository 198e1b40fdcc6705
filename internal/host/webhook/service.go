package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/factline/factline/internal/clock"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/stream"
	"github.com/factline/factline/internal/host/tracing"
	"github.com/factline/factline/internal/lifecycle"
)

// ConfigType is the platform config type of webhook configs.
const ConfigType = "webhook"

// ConsumerName is the durable stream consumer that matches facts.
const ConsumerName = "webhooks"

// Options configure a Service. Store is required; everything else has a
// default.
type Options struct {
	Store store.Store
	// Platform is used to write the new config version of a secret
	// rotation; RegisterConfigType sets it when nil.
	Platform *platform.Service
	Logger   *slog.Logger
	// Clock reads every timestamp the service records (signature times,
	// retry times, audit facts) and schedules every retry, so tests move
	// time instead of sleeping. HTTP timeouts and measured response times
	// use real time. Default: clock.Real.
	Clock clock.Clock
	// SecretKey is FACTLINE_SECRET_KEY: the 32-byte key (base64 or hex)
	// that encrypts signing secrets at rest. Empty: the key file
	// webhook-secret.key in DataDir, created on first use.
	SecretKey string
	DataDir   string

	// Workers bounds the deliveries this process holds at once, from
	// claim until the attempt's outcome is recorded (default 128).
	Workers int
	// EndpointConcurrency bounds concurrent attempts to one endpoint
	// (scheme://host:port) in this process, so one slow receiver cannot
	// take every worker (default 8).
	EndpointConcurrency int
	// ClaimBatch bounds rows leased per claim (default 128).
	ClaimBatch int
	// PollInterval is how often workers look for due deliveries when no
	// fact notification wakes them (default 1 s, on Clock).
	PollInterval time.Duration
	// LeaseMargin is added to twice a delivery's timeout to size its lease
	// (default 30 s). Lease, when non-zero, replaces the computed lease
	// for every delivery; it must exceed the attempt timeouts, or another
	// worker may take a delivery still in flight.
	LeaseMargin time.Duration
	Lease       time.Duration
	// DepthInterval is how often the depth gauges are read (default 5 s,
	// on Clock).
	DepthInterval time.Duration

	// AllowNetworks are address ranges deliveries may reach although they
	// are not public (loopback, private); see ParseAllowList.
	AllowNetworks []netip.Prefix
	// TLSConfig, when set, is the client TLS configuration (for example
	// RootCAs of a private CA).
	TLSConfig *tls.Config
	// Jitter returns a number in [0, 1) that scales the backoff jitter
	// (0 to 50 percent); default math/rand.
	Jitter func() float64

	// NoMatcher and NoDelivery turn off the stream consumer or the
	// delivery workers of this process.
	NoMatcher  bool
	NoDelivery bool
	// StreamMetrics are passed to the stream consumer.
	StreamMetrics *stream.Metrics
	// TracerProvider traces deliveries and the matcher's stream batches;
	// nil or the no-op provider: off.
	TracerProvider trace.TracerProvider
}

// Service matches facts to webhook configs, delivers, retries, audits and
// dead-letters. Start runs it in the background; it is safe for
// concurrent use.
type Service struct {
	opts     Options
	st       store.Store
	log      *slog.Logger
	clock    clock.Clock
	secrets  *secretStore
	client   *http.Client
	policy   addressPolicy
	metrics  *metrics
	jitter   func() float64
	runID    string
	platform *platform.Service

	tracer  trace.Tracer // nil when tracing is off
	matcher *matcher
	bg      lifecycle.Base
	dl      *deliverer
}

// New checks the options, applies defaults and loads the secret key. It
// starts nothing; call Start.
func New(opts Options) (*Service, error) {
	if opts.Store == nil {
		return nil, errors.New("webhook: a store is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.Workers <= 0 {
		opts.Workers = 128
	}
	if opts.EndpointConcurrency <= 0 {
		opts.EndpointConcurrency = 8
	}
	if opts.ClaimBatch <= 0 {
		opts.ClaimBatch = 128
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.LeaseMargin <= 0 {
		opts.LeaseMargin = 30 * time.Second
	}
	if opts.Lease < 0 {
		return nil, errors.New("webhook: Lease is negative")
	}
	if opts.DepthInterval <= 0 {
		opts.DepthInterval = 5 * time.Second
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	key, err := LoadSecretKey(opts.SecretKey, opts.DataDir)
	if err != nil {
		return nil, err
	}
	secrets, err := newSecretStore(opts.Store, key, opts.Clock)
	if err != nil {
		return nil, err
	}
	policy := addressPolicy{allow: opts.AllowNetworks}
	s := &Service{
		opts:     opts,
		policy:   policy,
		st:       opts.Store,
		log:      opts.Logger.With("component", "webhook"),
		clock:    opts.Clock,
		tracer:   tracing.Tracer(opts.TracerProvider),
		secrets:  secrets,
		client:   newHTTPClient(policy, opts.TLSConfig, opts.EndpointConcurrency),
		metrics:  newMetrics(),
		jitter:   opts.Jitter,
		runID:    newULID(time.Now()).String(),
		platform: opts.Platform,
	}
	s.matcher = newMatcher(s)
	s.dl = newDeliverer(s)
	return s, nil
}

// CheckSecretKey fails, naming FACTLINE_SECRET_KEY, when the database's
// webhook secrets are encrypted with another key than this process's: the
// process could neither sign their deliveries nor write secrets the
// others can read. A process should refuse to start on it.
func (s *Service) CheckSecretKey(ctx context.Context) error {
	return s.secrets.checkKey(ctx)
}

// Collectors returns the contract's metrics, for a Prometheus registry.
func (s *Service) Collectors() []prometheus.Collector { return s.metrics.collectors() }

// Register registers the metrics on reg.
func (s *Service) Register(reg prometheus.Registerer) error {
	for _, c := range s.Collectors() {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("webhook: register metrics: %w", err)
		}
	}
	return nil
}

// Start runs the stream consumer that matches facts, the delivery workers
// and the depth gauges in the background until Stop (or until ctx ends).
func (s *Service) Start(ctx context.Context) error {
	var tasks []func(context.Context)
	if !s.opts.NoMatcher {
		c := &stream.Consumer{Name: ConsumerName, Store: s.st, Handler: s.matcher.handle, BatchSize: matchBatch,
			Logger: s.log, Metrics: s.opts.StreamMetrics, Tracer: s.tracer}
		tasks = append(tasks, func(ctx context.Context) {
			if err := c.Run(ctx); err != nil {
				s.log.Error("webhook matcher stopped", "err", err)
			}
		})
	}
	if !s.opts.NoDelivery {
		tasks = append(tasks, s.dl.run)
	}
	tasks = append(tasks, s.depthLoop)
	if err := s.bg.Start(ctx, tasks...); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// Stop stops matching and claiming at once, lets attempts in flight finish
// and records their outcomes, within ctx. Attempts still running when ctx
// ends are abandoned unrecorded; their leases run out and the next claim
// records them as interrupted.
func (s *Service) Stop(ctx context.Context) error {
	err := s.bg.Stop(ctx)
	if err != nil {
		// Cut the attempts in flight short and give them a moment to
		// return.
		s.dl.abort()
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.bg.Wait(wctx)
		cancel()
		err = fmt.Errorf("webhook: stop: %w", ctx.Err())
	}
	s.client.CloseIdleConnections()
	return err
}

// depthLoop refreshes the depth gauges.
func (s *Service) depthLoop(ctx context.Context) {
	for {
		s.refreshDepths(ctx)
		wait, release := s.clock.Until(s.clock.Now().Add(s.opts.DepthInterval))
		select {
		case <-ctx.Done():
			release()
			return
		case <-wait:
		}
	}
}

func (s *Service) refreshDepths(ctx context.Context) {
	d, err := s.st.CountOutbox(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("webhook: read outbox depth", "err", err)
		}
		return
	}
	s.metrics.queueDepth.Set(float64(d.Pending))
	s.metrics.dlqDepth.Set(float64(d.Dead))
}
