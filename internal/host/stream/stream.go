// Package stream delivers the fact log to named, durable consumers:
// projections, subscription handlers and webhook matching.
//
// Each consumer keeps a checkpoint (the global position of the last fact it
// finished) in the database and receives every fact after it, in global
// order, at least once: a crash between handling a batch and saving the
// checkpoint replays that batch, so handlers must be idempotent (facts carry
// ids for that). Consumers wake promptly on new facts through the store's
// notifications (LISTEN/NOTIFY on Postgres, an in-process signal on the
// embedded store) and poll as a fallback.
//
// The store assigns positions from a counter locked until commit, so a
// position becomes visible only after every lower one is: a consumer that
// read position p can never later find a new fact below p, the sequence-gap
// trap of outboxes fed by a plain sequence. The consumer still checks that
// each batch continues its checkpoint exactly and stops to re-read if not.
package stream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/tracing"
)

// Handler processes facts in position order. Returning an error retries
// the same batch after a backoff; the checkpoint does not move. A handler
// must not modify facts: the members of a Group share them, and handle
// them concurrently.
type Handler func(ctx context.Context, facts []store.Fact) error

// Consumer is one named reader of the fact log. Run reads for it alone; a
// Group reads once for many consumers that have caught up (Group.Join).
type Consumer struct {
	Name    string
	Store   store.Store
	Handler Handler
	// BatchSize bounds facts per Handler call (default 256).
	BatchSize int
	// PollInterval is the fallback wake-up when no notification arrives
	// (default 2 s).
	PollInterval time.Duration
	Logger       *slog.Logger
	Metrics      *Metrics
	// Tracer, when set, gives each handled fact that carries a W3C trace
	// id a span continuing its trace (see tracing.FactSpans).
	Tracer trace.Tracer
	// From, when set, returns the position to read on from in place of
	// the saved checkpoint, for a consumer that must first check state it
	// keeps elsewhere. Like the checkpoint, it is retried until it
	// succeeds.
	From func(ctx context.Context) (int64, error)
	// Relevant, when set, tells which facts the handler acts on. In a
	// Group, a consumer given none of them in a batch saves its
	// checkpoint at most once a second rather than after every batch.
	Relevant func(f *store.Fact) bool
}

// Metrics are the stream gauges, shared by all consumers of a process.
type Metrics struct {
	lag      *prometheus.GaugeVec
	position *prometheus.GaugeVec
	errors   *prometheus.CounterVec
}

// NewMetrics registers the stream metrics.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "factline_stream_consumer_lag",
			Help: "Facts committed but not yet processed by the consumer.",
		}, []string{"consumer"}),
		position: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "factline_stream_consumer_position",
			Help: "Global position of the last fact the consumer finished.",
		}, []string{"consumer"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factline_stream_consumer_errors_total",
			Help: "Batches the consumer's handler failed and will retry.",
		}, []string{"consumer"}),
	}
	for _, c := range []prometheus.Collector{m.lag, m.position, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("stream: register metrics: %w", err)
		}
	}
	return m, nil
}

// MetricLabel is the consumer label of a consumer's series. /metrics may
// be served on the API port without a key, and a projection consumer's
// name holds a tenant id and a config id; its label is an opaque digest
// of the name instead ("projection:" and 12 hex digits), which the
// operator's GET /v1/admin/stream lists beside the name.
func MetricLabel(consumer string) string {
	if rest, ok := strings.CutPrefix(consumer, "projection:"); ok {
		sum := sha256.Sum256([]byte(rest))
		return "projection:" + hex.EncodeToString(sum[:6])
	}
	return consumer
}

// Forget drops the series of a consumer that will not run again.
func (m *Metrics) Forget(consumer string) {
	l := MetricLabel(consumer)
	m.lag.DeleteLabelValues(l)
	m.position.DeleteLabelValues(l)
	m.errors.DeleteLabelValues(l)
}

// record sets a consumer's position and lag gauges.
func (m *Metrics) record(consumer string, pos, head int64) {
	l := MetricLabel(consumer)
	m.position.WithLabelValues(l).Set(float64(pos))
	m.lag.WithLabelValues(l).Set(float64(head - pos))
}

// Lag returns the lag gauge of a consumer.
func (m *Metrics) Lag(consumer string) prometheus.Gauge {
	return m.lag.WithLabelValues(MetricLabel(consumer))
}

// failed counts a failed batch of a consumer.
func (m *Metrics) failed(consumer string) { m.errors.WithLabelValues(MetricLabel(consumer)).Inc() }

// errGap reports a batch that does not continue the checkpoint.
var errGap = errors.New("stream: position gap")

// Continues reports an error unless facts hold exactly the positions
// after+1, after+2, ... in order: a batch read after a position must
// continue it without a gap.
func Continues(facts []store.Fact, after int64) error {
	for i := range facts {
		if facts[i].Position != after+int64(i)+1 {
			return fmt.Errorf("%w: expected %d, read %d", errGap, after+int64(i)+1, facts[i].Position)
		}
	}
	return nil
}

// Run consumes until ctx ends; it returns nil then. It returns an error only
// when the consumer is misconfigured: a store that cannot read the
// checkpoint or subscribe (a database still starting, a blip) is retried
// with backoff, so a consumer never stops for good.
func (c *Consumer) Run(ctx context.Context) error {
	log, err := c.init()
	if err != nil {
		return err
	}
	pos, ok := c.start(ctx, log)
	if !ok {
		return nil
	}
	c.follow(ctx, log, pos, nil)
	return nil
}

// init checks the consumer, applies defaults and returns its logger.
func (c *Consumer) init() (*slog.Logger, error) {
	if c.Name == "" || c.Store == nil || c.Handler == nil {
		return nil, errors.New("stream: consumer needs a name, a store and a handler")
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 256
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 2 * time.Second
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	return log.With("consumer", c.Name), nil
}

// start returns the position to read on from, retrying until it is known;
// it reports false when ctx ended first.
func (c *Consumer) start(ctx context.Context, log *slog.Logger) (int64, bool) {
	from := c.From
	if from == nil {
		from = func(ctx context.Context) (int64, error) { return c.Store.GetCheckpoint(ctx, c.Name) }
	}
	return retry(ctx, log, "read checkpoint", from)
}

// follow reads and handles the facts after pos until ctx ends or, asked
// after each batch, caughtUp (when set) returns true. It returns the
// position reached and whether caughtUp ended it.
func (c *Consumer) follow(ctx context.Context, log *slog.Logger, pos int64, caughtUp func(ctx context.Context, pos int64) bool) (int64, bool) {
	l := loop{store: c.Store, batchSize: c.BatchSize, pollInterval: c.PollInterval, log: log}
	step := func(ctx context.Context) (int, error) {
		n, err := c.step(ctx, &pos)
		if err == nil {
			c.observe(ctx, pos)
		}
		return n, err
	}
	failed := func() {
		if c.Metrics != nil {
			c.Metrics.failed(c.Name)
		}
	}
	var idle func(context.Context) bool
	if caughtUp != nil {
		idle = func(ctx context.Context) bool { return caughtUp(ctx, pos) }
	}
	return pos, l.run(ctx, step, failed, idle)
}

// step handles one batch after *pos and advances the checkpoint.
func (c *Consumer) step(ctx context.Context, pos *int64) (int, error) {
	facts, err := c.Store.ReadFacts(ctx, *pos, c.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("read facts after %d: %w", *pos, err)
	}
	if len(facts) == 0 {
		return 0, nil
	}
	if err := Continues(facts, *pos); err != nil {
		return 0, err
	}
	if err := c.deliver(ctx, facts); err != nil {
		return 0, fmt.Errorf("handler: %w", err)
	}
	next := facts[len(facts)-1].Position
	// The batch is handled: record that even if we are being stopped, so a
	// clean shutdown does not replay it.
	if err := c.save(ctx, next); err != nil {
		return 0, fmt.Errorf("save checkpoint: %w", err)
	}
	*pos = next
	return len(facts), nil
}

// deliver hands facts to the handler, in a span per traced fact.
func (c *Consumer) deliver(ctx context.Context, facts []store.Fact) error {
	end := tracing.FactSpans(ctx, c.Tracer, "stream.consume", facts, attribute.String("factline.consumer", c.Name))
	err := c.Handler(ctx, facts)
	end(err)
	return err
}

// save stores the checkpoint, even when ctx has ended.
func (c *Consumer) save(ctx context.Context, pos int64) error {
	saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return c.Store.SetCheckpoint(saveCtx, c.Name, pos)
}

// relevant reports whether the handler acts on any of facts.
func (c *Consumer) relevant(facts []store.Fact) bool {
	if c.Relevant == nil {
		return len(facts) > 0
	}
	for i := range facts {
		if c.Relevant(&facts[i]) {
			return true
		}
	}
	return false
}

func (c *Consumer) observe(ctx context.Context, pos int64) {
	if c.Metrics == nil {
		return
	}
	c.Metrics.position.WithLabelValues(MetricLabel(c.Name)).Set(float64(pos))
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if head, err := c.Store.HeadPosition(hctx); err == nil {
		c.Metrics.lag.WithLabelValues(MetricLabel(c.Name)).Set(float64(head - pos))
	}
}
