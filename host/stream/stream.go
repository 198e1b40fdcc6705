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
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/factline/factline/host/store"
	"github.com/factline/factline/host/tracing"
)

// Handler processes facts in position order. Returning an error retries
// the same batch after a backoff; the checkpoint does not move.
type Handler func(ctx context.Context, facts []store.Fact) error

// Consumer is one named reader of the fact log.
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
	// CaughtUp, when set, is called each time the consumer has handled
	// every fact it found (a batch shorter than BatchSize), with the
	// position it saved; returning true ends Run. A reader that serves
	// several consumers at once uses it to take over a consumer that has
	// caught up with it.
	CaughtUp func(ctx context.Context, pos int64) bool
	// Tracer, when set, gives each handled fact that carries a W3C trace
	// id a span continuing its trace (see tracing.FactSpans).
	Tracer trace.Tracer
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

// Forget drops the series of a consumer that will not run again.
func (m *Metrics) Forget(consumer string) {
	m.lag.DeleteLabelValues(consumer)
	m.position.DeleteLabelValues(consumer)
	m.errors.DeleteLabelValues(consumer)
}

// Record sets a consumer's position and lag gauges, for readers that
// advance consumers without running them.
func (m *Metrics) Record(consumer string, pos, head int64) {
	m.position.WithLabelValues(consumer).Set(float64(pos))
	m.lag.WithLabelValues(consumer).Set(float64(head - pos))
}

// Lag returns the lag gauge of a consumer.
func (m *Metrics) Lag(consumer string) prometheus.Gauge { return m.lag.WithLabelValues(consumer) }

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
// when the consumer is misconfigured: a store that cannot subscribe or read
// the checkpoint (a database still starting, a blip) is retried with the
// same backoff as a failing batch, so a consumer never stops for good.
func (c *Consumer) Run(ctx context.Context) error {
	if c.Name == "" || c.Store == nil || c.Handler == nil {
		return errors.New("stream: consumer needs a name, a store and a handler")
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
	log = log.With("consumer", c.Name)

	backoff := newBackoff()
	// Subscribe once: each successful subscription lives until ctx ends.
	wake, ok := retryStart(ctx, c, log, backoff, "subscribe", c.Store.SubscribeFacts)
	if !ok {
		return nil
	}
	pos, ok := retryStart(ctx, c, log, backoff, "read checkpoint", func(ctx context.Context) (int64, error) {
		return c.Store.GetCheckpoint(ctx, c.Name)
	})
	if !ok {
		return nil
	}
	backoff.reset()
	for {
		n, err := c.step(ctx, &pos)
		if err == nil {
			c.observe(ctx, pos)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if c.Metrics != nil {
				c.Metrics.errors.WithLabelValues(c.Name).Inc()
			}
			d := backoff.next()
			log.Warn("stream batch failed; retrying", "position", pos, "retry_in", d, "err", err)
			if !sleep(ctx, d) {
				return nil
			}
			continue
		}
		backoff.reset()
		if n == c.BatchSize {
			continue // more may be waiting
		}
		if c.CaughtUp != nil && c.CaughtUp(ctx, pos) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-time.After(c.PollInterval):
		}
	}
}

// step handles one batch after *pos and advances the checkpoint.
func (c *Consumer) step(ctx context.Context, pos *int64) (int, error) {
	facts, err := c.Store.ReadFacts(ctx, *pos, c.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("read facts: %w", err)
	}
	if len(facts) == 0 {
		return 0, nil
	}
	if err := Continues(facts, *pos); err != nil {
		return 0, err
	}
	end := tracing.FactSpans(ctx, c.Tracer, "stream.consume", facts, attribute.String("factline.consumer", c.Name))
	err = c.Handler(ctx, facts)
	end(err)
	if err != nil {
		return 0, fmt.Errorf("handler: %w", err)
	}
	next := facts[len(facts)-1].Position
	// The batch is handled: record that even if we are being stopped, so a
	// clean shutdown does not replay it.
	saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.Store.SetCheckpoint(saveCtx, c.Name, next); err != nil {
		return 0, fmt.Errorf("save checkpoint: %w", err)
	}
	*pos = next
	return len(facts), nil
}

func (c *Consumer) observe(ctx context.Context, pos int64) {
	if c.Metrics == nil {
		return
	}
	c.Metrics.position.WithLabelValues(c.Name).Set(float64(pos))
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if head, err := c.Store.HeadPosition(hctx); err == nil {
		c.Metrics.lag.WithLabelValues(c.Name).Set(float64(head - pos))
	}
}

// retryStart calls fn until it succeeds, backing off between attempts; it
// reports false when ctx ended first.
func retryStart[T any](ctx context.Context, c *Consumer, log *slog.Logger, b *backoff, what string,
	fn func(context.Context) (T, error)) (T, bool) {
	for {
		v, err := fn(ctx)
		if err == nil {
			return v, true
		}
		if ctx.Err() != nil {
			return v, false
		}
		d := b.next()
		log.Warn("stream consumer cannot start; retrying", "step", what, "retry_in", d, "err", err)
		if !sleep(ctx, d) {
			return v, false
		}
	}
}

type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{} }

func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = 100 * time.Millisecond
	} else if b.d < 30*time.Second {
		b.d *= 2
	}
	return b.d
}

func (b *backoff) reset() { b.d = 0 }

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
