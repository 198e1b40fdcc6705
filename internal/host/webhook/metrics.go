package webhook

import "github.com/prometheus/client_golang/prometheus"

// Metric names of the contract.
const (
	MetricTriggered     = "webhooks_triggered_total"
	MetricSent          = "webhooks_sent_total"
	MetricSucceeded     = "webhooks_succeeded_total"
	MetricFailed        = "webhooks_failed_total"
	MetricDLQ           = "webhooks_dlq_total"
	MetricDuration      = "webhook_delivery_duration_ms"
	MetricRetryAttempts = "webhook_retry_attempts"
	MetricPayloadSize   = "webhook_payload_size_bytes"
	MetricQueueDepth    = "webhook_queue_depth"
	MetricDLQDepth      = "webhook_dlq_depth"
)

// metrics are the webhook service's collectors. Counters and histograms
// count what this process did; the depth gauges are read from the outbox
// (every process reports the same totals).
type metrics struct {
	triggered, sent, succeeded, failed, dlq prometheus.Counter
	duration, attempts, payloadSize         prometheus.Histogram
	queueDepth, dlqDepth                    prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		triggered: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricTriggered,
			Help: "Deliveries created: webhook.triggered facts recorded with a pending outbox row."}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricSent,
			Help: "Delivery attempts recorded (each has a webhook.sent fact), successful or not."}),
		succeeded: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricSucceeded,
			Help: "Attempts answered with a 2xx."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricFailed,
			Help: "Attempts that failed (retryable or terminal, interrupted ones included)."}),
		dlq: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricDLQ,
			Help: "Deliveries moved to the dead-letter queue."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricDuration,
			Help:    "Time from sending an attempt to its response (or failure), in milliseconds.",
			Buckets: []float64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 60000, 120000, 300000}}),
		attempts: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricRetryAttempts,
			Help:    "Attempts a delivery took when it finished (sent or dead).",
			Buckets: []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20}}),
		payloadSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricPayloadSize,
			Help:    "Size of delivered bodies in bytes, per attempt.",
			Buckets: prometheus.ExponentialBuckets(256, 2, 12)}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricQueueDepth,
			Help: "Deliveries pending in the outbox (waiting, leased or paused)."}),
		dlqDepth: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricDLQDepth,
			Help: "Deliveries in the dead-letter queue (status dead)."}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.triggered, m.sent, m.succeeded, m.failed, m.dlq,
		m.duration, m.attempts, m.payloadSize, m.queueDepth, m.dlqDepth}
}
