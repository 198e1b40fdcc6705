package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/tracing"
)

// commitBatch bounds the outcomes recorded in one transaction.
const commitBatch = 512

// deliverer claims due deliveries, makes the attempts and records their
// outcomes. One goroutine (dispatch) claims; each claimed delivery runs in
// its own goroutine; one more (complete) commits outcomes in batches.
type deliverer struct {
	s *Service

	mu          sync.Mutex
	inflight    int
	perEndpoint map[string]int
	sems        map[string]chan struct{}

	// hint and lastFull steer claims past finished rows (dispatch
	// goroutine only).
	hint     int64
	lastFull time.Time

	freed   chan struct{} // capacity came back
	kick    chan struct{} // re-plan the next wake-up
	retries retryTimes    // retries this process scheduled, not yet claimed at
	changes chan *pendingChange
	seq     atomic.Int64

	// hardCtx is cancelled when a stop runs out of time: attempts in
	// flight are cut short and commits give up.
	hardCtx    context.Context
	hardCancel context.CancelFunc
	attempts   sync.WaitGroup

	// msgs caches decoded delivery settings by their JSON (deliveries of
	// one config version share them).
	msgMu sync.Mutex
	msgs  map[string]*deliveryMessage

	// onClaim, when set (tests), runs after every claim pass with the
	// clock time it claimed at (ms) and the number of rows claimed.
	onClaim func(at int64, n int)
}

// pendingChange is an outcome waiting to be recorded; after runs, on the
// committer's goroutine, once it is (or failed to be).
type pendingChange struct {
	change store.OutboxChange
	after  func(err error)
}

func newDeliverer(s *Service) *deliverer {
	d := &deliverer{
		s:           s,
		perEndpoint: map[string]int{},
		sems:        map[string]chan struct{}{},
		freed:       make(chan struct{}, 1),
		kick:        make(chan struct{}, 1),
		changes:     make(chan *pendingChange, 4*commitBatch),
		msgs:        map[string]*deliveryMessage{},
	}
	d.hardCtx, d.hardCancel = context.WithCancel(context.Background())
	return d
}

// abort cuts attempts in flight short (Stop ran out of time).
func (d *deliverer) abort() { d.hardCancel() }

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run dispatches until ctx ends, then waits for the attempts in flight and
// their commits.
func (d *deliverer) run(ctx context.Context) {
	completed := make(chan struct{})
	go func() {
		d.complete()
		close(completed)
	}()
	d.dispatch(ctx)
	d.attempts.Wait()
	close(d.changes)
	<-completed
}

// dispatch claims due deliveries whenever there is capacity and something
// may be due: on a fact notification (new deliveries, replays), when
// capacity frees up, at the earliest retry this process scheduled, and
// every PollInterval.
func (d *deliverer) dispatch(ctx context.Context) {
	log := d.s.log
	wake, err := d.s.st.SubscribeFacts(ctx)
	if err != nil {
		log.Warn("webhook: no fact notifications; polling only", "err", err)
	}
	var failures int
	for ctx.Err() == nil {
		at := d.s.clock.Now().UnixMilli()
		// Dropped before the claim: a retry scheduled after this, even
		// for a time the claim covers, stays noted and makes another pass.
		d.retries.claimedAt(at)
		n, asked, err := d.claimOnce(ctx, at)
		if d.onClaim != nil {
			d.onClaim(at, n)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			wait := min(time.Duration(1<<min(failures, 6))*100*time.Millisecond, 5*time.Second)
			log.Warn("webhook: claim failed; retrying", "retry_in", wait, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		failures = 0
		if n > 0 && n == asked {
			continue // more may be due
		}
		// With a backlog (the claim got all it asked for, or there was no
		// capacity), new facts do not make claiming sooner worth it: wait
		// until enough capacity is back, so claims stay few and large.
		backlogged := asked == 0 || n == asked
		wakeCh := wake
		if backlogged {
			wakeCh = nil
		}
		now := d.s.clock.Now()
		deadline := now.Add(d.s.opts.PollInterval)
		if due := d.retries.next(); due > 0 {
			if t := time.UnixMilli(due); t.Before(deadline) {
				deadline = t
			}
		}
		until, release := d.s.clock.Until(deadline)
		select {
		case <-ctx.Done():
		case <-wakeCh:
		case <-until:
		case <-d.freed:
		case <-d.kick:
		}
		release()
	}
}

// claimOnce leases as many due deliveries as there is capacity for and
// starts them. It returns how many it got and asked for.
func (d *deliverer) claimOnce(ctx context.Context, now int64) (got, asked int, err error) {
	opts := d.s.opts
	free, skip := d.capacity()
	if free <= 0 {
		return 0, 0, nil
	}
	asked = min(free, opts.ClaimBatch)
	req := store.ClaimRequest{
		Now:           now,
		Token:         d.s.runID + "." + strconv.FormatInt(d.seq.Add(1), 10),
		Limit:         asked,
		PerEndpoint:   opts.EndpointConcurrency,
		SkipEndpoints: skip,
		LeaseFactorMS: 2000,
		LeaseMarginMS: opts.LeaseMargin.Milliseconds(),
	}
	if opts.Lease > 0 {
		req.LeaseFactorMS, req.LeaseMarginMS = 0, opts.Lease.Milliseconds()
	}
	// Finished deliveries leave index entries behind until the next
	// vacuum, all before the oldest due row; a claim that starts at the
	// oldest row the last claim got skips them. A claim from the start
	// runs at least every second, and whenever the hinted one comes up
	// short, so rows passed over (per-endpoint limits) are not left behind.
	useHint := d.hint > 0 && time.Since(d.lastFull) < time.Second
	if useHint {
		req.DueFrom = d.hint
	}
	claims, err := d.s.st.ClaimOutbox(ctx, req)
	if err != nil {
		return 0, asked, err
	}
	d.startAll(claims, req.Token)
	got = len(claims)
	if useHint && got < asked {
		req.DueFrom, req.Limit = 0, asked-got
		_, req.SkipEndpoints = d.capacity()
		req.Token = d.s.runID + "." + strconv.FormatInt(d.seq.Add(1), 10)
		more, err := d.s.st.ClaimOutbox(ctx, req)
		if err != nil {
			return got, asked, err
		}
		d.startAll(more, req.Token)
		claims = append(claims, more...)
		got += len(more)
		useHint = false
	}
	if !useHint {
		d.lastFull = time.Now()
	}
	d.hint = 0
	for _, c := range claims {
		if d.hint == 0 || c.NextAttemptAt < d.hint {
			d.hint = c.NextAttemptAt
		}
	}
	return got, asked, nil
}

// capacity returns how many more deliveries this process may hold and the
// endpoints that have their share.
func (d *deliverer) capacity() (free int, full []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for ep, n := range d.perEndpoint {
		if n >= d.s.opts.EndpointConcurrency {
			full = append(full, ep)
		}
	}
	return d.s.opts.Workers - d.inflight, full
}

func (d *deliverer) startAll(claims []store.OutboxClaim, token string) {
	for _, c := range claims {
		d.start(c, token)
	}
}

func (d *deliverer) start(c store.OutboxClaim, token string) {
	d.mu.Lock()
	d.inflight++
	d.perEndpoint[c.Endpoint]++
	sem := d.sems[c.Endpoint]
	if sem == nil {
		sem = make(chan struct{}, d.s.opts.EndpointConcurrency)
		d.sems[c.Endpoint] = sem
	}
	d.mu.Unlock()
	d.attempts.Add(1)
	go func() {
		defer d.attempts.Done()
		// The delivery holds its capacity until its outcome is recorded
		// (finish hands the release to the committer), so a claimed row
		// never waits past its lease in a queue.
		if !d.process(c, token, sem) {
			d.release(c.Endpoint)
		}
	}()
}

func (d *deliverer) release(endpoint string) {
	d.mu.Lock()
	d.inflight--
	if d.perEndpoint[endpoint]--; d.perEndpoint[endpoint] <= 0 {
		delete(d.perEndpoint, endpoint)
		delete(d.sems, endpoint)
	}
	free := d.s.opts.Workers - d.inflight
	d.mu.Unlock()
	if free >= max(1, min(d.s.opts.ClaimBatch, d.s.opts.Workers/4)) {
		notify(d.freed)
	}
}

// process makes one attempt of a claimed delivery (or records the attempt
// an earlier claim left unfinished) and records the outcome.
func (d *deliverer) process(c store.OutboxClaim, token string, sem chan struct{}) (queued bool) {
	msg, err := d.message(c.Message)
	if err != nil {
		var r result
		r.fail(ErrorTerminal, CodeInvalidDelivery, "the stored delivery settings do not decode: "+err.Error())
		return d.finish(c, token, msg, r, c.AttemptStartedAt, false)
	}
	if c.Interrupted != 0 {
		var r result
		r.fail(ErrorTransient, CodeAttemptInterrupted, fmt.Sprintf("attempt %d started at %s was cut short: its worker stopped "+
			"before recording the outcome; the receiver may or may not have received it", c.Attempt, iso(time.UnixMilli(c.Interrupted))))
		return d.finish(c, token, msg, r, c.Interrupted, false)
	}
	var r result
	secret, err := d.s.secrets.get(d.hardCtx, c.TenantID, msg.SecretRef)
	switch {
	case errors.Is(err, errSecretNotFound) || errors.Is(err, errSecretExpired):
		r.fail(ErrorTerminal, CodeSecretNotFound, fmt.Sprintf("secret %s of config %s version %d: %v", msg.SecretRef, c.ConfigID, c.ConfigVersion, err))
		return d.finish(c, token, msg, r, c.AttemptStartedAt, false)
	case err != nil:
		if d.hardCtx.Err() != nil {
			return false
		}
		r.fail(ErrorTransient, CodeSecretUnavailable, "the secret could not be read: "+err.Error())
		return d.finish(c, token, msg, r, c.AttemptStartedAt, false)
	}
	select {
	case sem <- struct{}{}:
	case <-d.hardCtx.Done():
		return false
	}
	req := &deliveryRequest{url: msg.URL, body: c.Payload, secret: secret, deliveryID: c.DeliveryID, timestamp: c.SigTimestamp,
		version: c.ConfigVersion, attempt: c.Attempt, headers: msg.Headers, standard: msg.StandardWebhooks,
		timeout: time.Duration(c.TimeoutSeconds) * time.Second}
	sctx, span := tracing.Start(tracing.FactContext(d.hardCtx, msg.TraceID), d.s.tracer, "webhook.deliver", trace.WithSpanKind(trace.SpanKindClient))
	req.traceparent = tracing.Traceparent(sctx, msg.TraceID)
	r = send(d.s.client, d.hardCtx, req, d.s.clock.Now)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("factline.delivery_id", c.DeliveryID), attribute.String("factline.tenant", c.TenantID),
			attribute.Int("factline.attempt", c.Attempt), attribute.Int("http.response.status_code", r.status))
		if !r.success() {
			span.SetStatus(codes.Error, r.errType)
		}
	}
	span.End()
	<-sem
	if r.aborted {
		return false
	}
	return d.finish(c, token, msg, r, c.AttemptStartedAt, true)
}

// message decodes a delivery's settings, through the cache.
func (d *deliverer) message(raw []byte) (deliveryMessage, error) {
	d.msgMu.Lock()
	m, ok := d.msgs[string(raw)]
	d.msgMu.Unlock()
	if ok {
		return *m, nil
	}
	var msg deliveryMessage
	if err := json.Unmarshal(raw, &msg); err != nil {
		return msg, err
	}
	d.msgMu.Lock()
	if len(d.msgs) >= 4096 {
		clear(d.msgs)
	}
	d.msgs[string(raw)] = &msg
	d.msgMu.Unlock()
	return msg, nil
}

// sentData is the data of a webhook.sent fact: every field of the
// contract's table for the record's case, and the fields the contract gives
// both audit facts that have no fact column.
type sentData struct {
	DeliveryID         string             `json:"delivery_id"`
	URL                string             `json:"url"`
	Success            bool               `json:"success"`
	StatusCode         int                `json:"status_code"`
	Attempt            int                `json:"attempt"`
	MaxAttempts        int                `json:"max_attempts"`
	ResponseTimeMS     *float64           `json:"response_time_ms,omitempty"`
	ResponseHeaders    *map[string]string `json:"response_headers,omitempty"`
	ResponseBody       *string            `json:"response_body,omitempty"`
	SignatureAlgorithm string             `json:"signature_algorithm"`
	TimestampHeader    string             `json:"timestamp_header"`
	ErrorType          string             `json:"error_type,omitempty"`
	ErrorCode          string             `json:"error_code,omitempty"`
	ErrorMessage       string             `json:"error_message,omitempty"`
	WillRetry          *bool              `json:"will_retry,omitempty"`
	NextRetryAt        *int64             `json:"next_retry_at,omitempty"`
	BackoffSeconds     *float64           `json:"backoff_seconds,omitempty"`
	SentToDLQ          *bool              `json:"sent_to_dlq,omitempty"`
	DLQMessageID       string             `json:"dlq_message_id,omitempty"`
	DLQTimestamp       *int64             `json:"dlq_timestamp,omitempty"`
	FirstAttemptAt     *int64             `json:"first_attempt_at,omitempty"`
	TotalDurationMS    *float64           `json:"total_duration_ms,omitempty"`
	ConfigID           string             `json:"config_id"`
	ConfigVersion      int64              `json:"config_version"`
	CampaignID         string             `json:"campaign_id,omitempty"`
}

// DeadLetter is the contract's dead-letter message.
type DeadLetter struct {
	DeliveryID           string          `json:"delivery_id"`
	TriggeredFactID      string          `json:"triggered_fact_id"`
	WebhookConfigID      string          `json:"webhook_config_id"`
	WebhookConfigVersion int64           `json:"webhook_config_version"`
	URL                  string          `json:"url"`
	Payload              json.RawMessage `json:"payload"`
	Error                DeadLetterError `json:"error"`
	Attempts             int             `json:"attempts"`
	FirstAttemptAt       int64           `json:"first_attempt_at"`
	LastAttemptAt        int64           `json:"last_attempt_at"`
	SentToDLQAt          int64           `json:"sent_to_dlq_at"`
	Metadata             DeadMetadata    `json:"metadata"`
}

// DeadLetterError is a dead letter's error.
type DeadLetterError struct {
	Code           string `json:"code"`
	Message        string `json:"message"`
	Stack          string `json:"stack,omitempty"`
	LastStatusCode int    `json:"last_status_code,omitempty"`
}

// DeadMetadata is a dead letter's metadata.
type DeadMetadata struct {
	TenantID   string `json:"tenant_id"`
	CampaignID string `json:"campaign_id,omitempty"`
	ContactID  string `json:"contact_id,omitempty"`
	DealID     string `json:"deal_id,omitempty"`
}

// backoff is the delay before the next attempt after failed attempt n:
// min(base * multiplier^(n-1), max) plus jitter of 0 to 50 percent of that,
// or a longer Retry-After, capped at max.
func backoff(r RetrySettings, n int, jitter float64, retryAfter time.Duration) time.Duration {
	capped := math.Min(float64(r.BackoffBaseSeconds)*math.Pow(r.BackoffMultiplier, float64(n-1)), float64(r.BackoffMaxSeconds))
	sec := capped + capped*0.5*jitter
	if ra := retryAfter.Seconds(); ra > sec {
		sec = math.Max(sec, math.Min(ra, float64(r.BackoffMaxSeconds)))
	}
	return time.Duration(math.Round(sec*1000)) * time.Millisecond
}

// finish decides the delivery's next state from the attempt's result and
// queues it, with its webhook.sent fact, for the committer, which records
// both in one transaction. sent says the request went out (for the
// duration and size metrics).
func (d *deliverer) finish(c store.OutboxClaim, token string, msg deliveryMessage, r result, startedMS int64, sent bool) bool {
	now := d.s.clock.Now()
	nowMS := now.UnixMilli()
	row := c.OutboxRow
	row.ClaimToken, row.ClaimedUntil, row.AttemptStartedAt = "", 0, 0
	if row.FirstAttemptAt == 0 {
		row.FirstAttemptAt = startedMS
	}
	row.LastAttemptAt = startedMS
	row.LastStatusCode = r.status
	row.UpdatedAt = nowMS
	data := sentData{
		DeliveryID: c.DeliveryID, URL: msg.URL, Success: r.success(), StatusCode: r.status, Attempt: c.Attempt,
		MaxAttempts: c.MaxAttempts, SignatureAlgorithm: "sha256", TimestampHeader: strconv.FormatInt(c.SigTimestamp, 10),
		ConfigID: c.ConfigID, ConfigVersion: c.ConfigVersion, CampaignID: c.CampaignID,
	}
	var (
		pause *store.WebhookPause
		final bool
		dead  bool
	)
	switch {
	case r.success():
		row.Status = store.OutboxSent
		final = true
		ms := float64(r.elapsed.Microseconds()) / 1000
		headers, body := r.headers, r.body
		if headers == nil {
			headers = map[string]string{}
		}
		data.ResponseTimeMS, data.ResponseHeaders, data.ResponseBody = &ms, &headers, &body
	case r.errType == ErrorTransient && c.Attempt < c.MaxAttempts:
		delay := backoff(msg.Retry, c.Attempt, d.s.jitter(), r.retryAft)
		next := now.Add(delay).UnixMilli()
		row.Status, row.Attempt, row.NextAttemptAt = store.OutboxPending, c.Attempt+1, next
		secs := float64(delay.Milliseconds()) / 1000 // to the millisecond, as next_retry_at: 2.756, not 2.7560000000000002
		data.ErrorType, data.ErrorCode, data.ErrorMessage = r.errType, r.errCode, r.errMsg
		data.WillRetry, data.NextRetryAt, data.BackoffSeconds = ptr(true), &next, &secs
	default:
		final, dead = true, true
		code, message := r.errCode, r.errMsg
		if r.errType == ErrorTransient {
			code = CodeMaxRetriesExceeded
			message = fmt.Sprintf("all %d attempts failed; the last: %s (%s)", c.MaxAttempts, r.errMsg, r.errCode)
		}
		dlqID := newDLQMessageID(now)
		dl := DeadLetter{
			DeliveryID: c.DeliveryID, TriggeredFactID: c.TriggeredFactID, WebhookConfigID: c.ConfigID,
			WebhookConfigVersion: c.ConfigVersion, URL: msg.URL, Payload: json.RawMessage(c.Payload),
			Error:    DeadLetterError{Code: code, Message: message, LastStatusCode: r.status},
			Attempts: c.Attempt, FirstAttemptAt: row.FirstAttemptAt, LastAttemptAt: startedMS, SentToDLQAt: nowMS,
			Metadata: DeadMetadata{TenantID: c.TenantID, CampaignID: c.CampaignID, ContactID: msg.ContactID, DealID: msg.DealID},
		}
		if !json.Valid(dl.Payload) {
			dl.Payload = json.RawMessage("null")
		}
		dlJSON, _ := json.Marshal(dl)
		row.Status, row.DeadLetter, row.DLQMessageID, row.DeadAt = store.OutboxDead, dlJSON, dlqID, nowMS
		first := row.FirstAttemptAt
		total := float64(nowMS - first)
		data.ErrorType, data.ErrorCode, data.ErrorMessage = r.errType, code, message
		// sent_to_dlq marks the dead letter of exhausted retries, true only
		// on attempt max_attempts (the contract's invariant 5); a terminal
		// failure before that is dead-lettered all the same, with its
		// dlq_message_id.
		data.WillRetry, data.SentToDLQ = ptr(false), ptr(c.Attempt == c.MaxAttempts)
		data.DLQMessageID, data.DLQTimestamp, data.FirstAttemptAt, data.TotalDurationMS = dlqID, &nowMS, &first, &total
		if r.gone {
			pause = &store.WebhookPause{TenantID: c.TenantID, ConfigID: c.ConfigID, DeliveryID: c.DeliveryID,
				Reason: fmt.Sprintf("%d %s from %s", r.status, "Gone", msg.URL), PausedAt: nowMS}
		}
	}
	factData, err := json.Marshal(data)
	if err != nil {
		d.s.log.Error("webhook: encode webhook.sent", "delivery_id", c.DeliveryID, "err", err)
		return false
	}
	fact := store.Fact{ID: newFactID(now), TenantID: c.TenantID, Type: ConfigType, Subtype: "sent", SourceID: c.TriggeredFactID,
		TraceID: msg.TraceID, Timestamp: nowMS, Data: factData, CreatedAt: nowMS}
	change := store.OutboxChange{Row: row, ClaimToken: token, Facts: []store.Fact{fact}, Pause: pause}
	// The outcome is recorded asynchronously: the attempt's capacity is
	// free now, and the delivery stays leased to this claim until the
	// committer records it.
	d.submit(change, func(err error) {
		d.recorded(c, r, row, data, pause, sent, final, dead, err)
		d.release(c.Endpoint)
	})
	return true
}

// recorded runs after an attempt's outcome was committed (or not).
func (d *deliverer) recorded(c store.OutboxClaim, r result, row store.OutboxRow, data sentData, pause *store.WebhookPause, sent, final, dead bool, err error) {
	switch {
	case errors.Is(err, store.ErrVersionConflict):
		d.s.log.Warn("webhook: lease lost before the outcome was recorded; another worker took the delivery",
			"delivery_id", c.DeliveryID, "attempt", c.Attempt)
		return
	case err != nil:
		d.s.log.Error("webhook: record attempt outcome", "delivery_id", c.DeliveryID, "attempt", c.Attempt, "err", err)
		return
	}
	m := d.s.metrics
	m.sent.Inc()
	if r.success() {
		m.succeeded.Inc()
	} else {
		m.failed.Inc()
	}
	if sent {
		m.duration.Observe(float64(r.elapsed.Microseconds()) / 1000)
		m.payloadSize.Observe(float64(len(c.Payload)))
	}
	if final {
		m.attempts.Observe(float64(c.Attempt))
	}
	if row.Status == store.OutboxPending {
		d.scheduled(row.NextAttemptAt)
	}
	if dead {
		m.dlq.Inc()
		d.s.log.Warn("webhook delivery sent to the dead-letter queue", "alert", "WebhookDeadLettered", "severity", "warning",
			"tenant", c.TenantID, "delivery_id", c.DeliveryID, "config_id", c.ConfigID, "config_version", c.ConfigVersion,
			"attempt", c.Attempt, "error_code", data.ErrorCode, "error", data.ErrorMessage, "dlq_message_id", row.DLQMessageID)
		if pause != nil {
			d.s.log.Warn("webhook config paused: the endpoint answered 410 Gone; resume it after fixing the URL",
				"tenant", c.TenantID, "config_id", c.ConfigID, "delivery_id", c.DeliveryID)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// scheduled notes a retry time so the dispatcher wakes for it.
func (d *deliverer) scheduled(at int64) {
	if d.retries.add(at) {
		notify(d.kick)
	}
}

// submit queues a change for the committer (waiting only while the queue
// is full).
func (d *deliverer) submit(c store.OutboxChange, after func(error)) {
	d.changes <- &pendingChange{change: c, after: after}
}

// complete commits queued changes, as many as are waiting (up to
// commitBatch) per transaction, until the queue is closed.
func (d *deliverer) complete() {
	for first := range d.changes {
		batch := []*pendingChange{first}
	fill:
		for len(batch) < commitBatch {
			select {
			case p, ok := <-d.changes:
				if !ok {
					break fill
				}
				batch = append(batch, p)
			default:
				break fill
			}
		}
		d.commit(batch)
	}
}

func (d *deliverer) commit(batch []*pendingChange) {
	changes := make([]store.OutboxChange, len(batch))
	for i, p := range batch {
		changes[i] = p.change
	}
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(d.hardCtx, 30*time.Second)
		errs, err := d.s.st.ChangeOutbox(ctx, changes)
		cancel()
		if err == nil {
			for i, p := range batch {
				p.after(errs[i])
			}
			return
		}
		if errors.Is(err, store.ErrInvalidInput) {
			// The store refused a change's content: no retry makes it
			// pass, and in a batch it fails the others with it. Alone,
			// each change commits or fails by itself.
			if len(batch) > 1 {
				for _, p := range batch {
					d.commit([]*pendingChange{p})
				}
				return
			}
			batch[0].after(err)
			return
		}
		if d.hardCtx.Err() != nil || try >= 8 {
			for _, p := range batch {
				p.after(err)
			}
			return
		}
		wait := time.Duration(1<<try) * 100 * time.Millisecond
		d.s.log.Warn("webhook: recording outcomes failed; retrying", "count", len(batch), "retry_in", wait, "err", err)
		select {
		case <-d.hardCtx.Done():
		case <-time.After(wait):
		}
	}
}
