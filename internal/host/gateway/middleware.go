package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/tracing"
)

// Locals keys.
const (
	localRequestID = "factline.request_id"
	localPrincipal = "factline.principal"
	localTraceID   = "factline.trace_id"
)

// HeaderTraceparent is the W3C trace context header.
const HeaderTraceparent = "traceparent"

// HeaderRequestID carries the request id both ways.
const HeaderRequestID = "X-Request-Id"

// HeaderAPIKey carries the API key.
const HeaderAPIKey = "X-API-Key"

// uploadPrefix is where bodies up to UploadLimit are accepted.
const uploadPrefix = "/v1/admin/plugins/"

// consoleUpload is the console's plugin upload form, which hands its
// module to the plugin endpoint: the same limit and time apply to it.
const consoleUpload = "/console/plugins/upload"

func isUpload(path string) bool {
	return strings.HasPrefix(path, uploadPrefix) || path == consoleUpload
}

var requestIDRe = regexp.MustCompile(`^[A-Za-z0-9_.:\-]{1,128}$`)

type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	inflight prometheus.Gauge
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "factline_http_requests_total",
			Help: "HTTP requests served, by method, route pattern and status.",
		}, []string{"method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "factline_http_request_duration_seconds",
			Help:    "HTTP request latency, by method and route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "factline_http_requests_in_flight",
			Help: "HTTP requests being served.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.inflight} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("gateway: register metrics: %w", err)
		}
	}
	return m, nil
}

// observe is the outermost middleware: it assigns the request id, gives
// the request a context with a deadline, turns panics and errors into
// problems, and logs and counts the outcome.
func (s *Server) observe(c *fiber.Ctx) error { return s.observed(c, c.Next) }

// observed runs next as observe runs the rest of the chain; the transport
// guard also answers through it, for requests fiber cannot route.
func (s *Server) observed(c *fiber.Ctx, next func() error) (err error) {
	start := time.Now()
	// The request id is always the server's: the contract has it unique
	// per request and the problem's instance is /errors/<request_id>,
	// neither of which a client's X-Request-Id can promise (two requests
	// may send the same; "conflict" would name a problem type's page). A
	// client's id is kept in the log line beside it, for correlation.
	rid := id.New(id.Request)
	var clientRID string
	if v := c.Get(HeaderRequestID); v != "" && requestIDRe.MatchString(v) {
		clientRID = string([]byte(v)) // header memory is reused by fasthttp
	}
	c.Locals(localRequestID, rid)
	c.Set(HeaderRequestID, rid)
	timeout := s.cfg.RequestTimeout
	if isUpload(c.Path()) {
		// Installing a plugin compiles it: seconds, more on a busy host.
		timeout = max(timeout, 5*time.Minute)
	}
	ctx := newRequestContext(timeout)
	ctx.stopping = s.stopping
	defer ctx.cancel()
	var span trace.Span
	if tp := c.Request().Header.Peek(HeaderTraceparent); len(tp) > 0 || s.tracer != nil {
		span = s.startSpan(c, ctx, string(tp))
	}
	c.SetUserContext(ctx)
	s.metrics.inflight.Inc()
	defer s.metrics.inflight.Dec()

	func() {
		defer func() {
			if r := recover(); r != nil {
				err = &problem.Error{Kind: problem.Internal, Detail: "An internal error occurred; quote the trace_id when reporting it",
					Err: fmt.Errorf("panic: %v\n%s", r, debug.Stack())}
			}
		}()
		// The raw body: fiber's c.Body() inflates a compressed one whole,
		// before any limit (300 KB of gzip became a gigabyte).
		raw := c.Request().Body()
		if err = refuseContentEncoding(c, len(raw)); err != nil {
			return
		}
		if err = refuseDifferingContentTypes(c, len(raw)); err != nil {
			return
		}
		if len(raw) > s.cfg.BodyLimit && !isUpload(c.Path()) {
			err = problem.Newf(problem.PayloadTooLarge, "Request body exceeds the limit of %d bytes", s.cfg.BodyLimit)
			return
		}
		err = next()
	}()
	if err != nil {
		if herr := s.handleError(c, err); herr != nil {
			c.Status(fiber.StatusInternalServerError)
		}
	}

	status := c.Response().StatusCode()
	// Label values outlive the request: routeLabel's are route patterns
	// and methodLabel's constants, never fasthttp's reused memory.
	route := routeLabel(c)
	method := methodLabel(c.Method())
	end := time.Now()
	elapsed := end.Sub(start)
	s.metrics.requests.WithLabelValues(method, route, statusLabel(status)).Inc()
	s.metrics.latency.WithLabelValues(method, route).Observe(elapsed.Seconds())
	if span != nil {
		endSpan(c, span, method, route, status, err)
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	// The record goes to the handler directly: Logger.LogAttrs would also
	// capture the caller's stack for a source the handler does not print.
	h := s.log.Handler()
	if !h.Enabled(ctx, level) {
		return nil
	}
	rec := slog.NewRecord(end, level, "request", 0)
	// One AddAttrs call: the record keeps five attributes inline and
	// grows its spill slice once per call.
	attrs := [...]slog.Attr{
		slog.String("request_id", rid),
		slog.String("method", method),
		slog.String("route", route),
		slog.String("path", c.Path()),
		slog.Int("status", status),
		slog.Float64("latency_ms", float64(elapsed.Microseconds())/1000),
		{}, {}, {},
	}
	n := 6
	if clientRID != "" {
		attrs[n] = slog.String("client_request_id", clientRID)
		n++
	}
	if p := principal(c); p != nil {
		attrs[n] = slog.String("tenant", p.TenantID)
		n++
	}
	if status >= 500 {
		var pe *problem.Error
		if errors.As(err, &pe) && pe.Err != nil {
			attrs[n] = slog.String("err", pe.Err.Error())
			n++
		} else if err != nil {
			attrs[n] = slog.String("err", err.Error())
			n++
		}
	}
	rec.AddAttrs(attrs[:n]...)
	_ = h.Handle(ctx, rec)
	return nil
}

// methodLabel returns the constant spelling of a standard method; any
// other is "other", so clients cannot grow the metrics' label sets.
func methodLabel(m string) string {
	for _, std := range []string{fiber.MethodGet, fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch, fiber.MethodDelete,
		fiber.MethodHead, fiber.MethodOptions, fiber.MethodConnect, fiber.MethodTrace} {
		if m == std {
			return std
		}
	}
	return "other"
}

// statusLabels are the status label values, made once.
var statusLabels = func() []string {
	l := make([]string, 600)
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func statusLabel(status int) string {
	if status >= 0 && status < len(statusLabels) {
		return statusLabels[status]
	}
	return strconv.Itoa(status)
}

// routeLabel is the matched route pattern, bounded in cardinality.
func routeLabel(c *fiber.Ctx) string {
	if p, ok := c.Locals(localRoutePattern).(string); ok {
		return p
	}
	r := c.Route()
	if r == nil || r.Path == "" || (r.Path == "/" && c.Path() != "/") {
		return "unmatched"
	}
	return r.Path
}

// startSpan notes the W3C trace id of traceparent, when valid, as the
// request's trace id and, with tracing on, starts the request's span as
// its child (a root span without one) and puts it in ctx.
func (s *Server) startSpan(c *fiber.Ctx, ctx *requestContext, traceparent string) trace.Span {
	if tid := tracing.IncomingTraceID(traceparent); tid != "" {
		c.Locals(localTraceID, tid)
	}
	if s.tracer == nil {
		return nil
	}
	// Named by route once routed; the method alone until then.
	sctx, span := s.tracer.Start(tracing.Extract(context.Background(), traceparent), methodLabel(c.Method()),
		trace.WithSpanKind(trace.SpanKindServer))
	ctx.values = sctx
	return span
}

func endSpan(c *fiber.Ctx, span trace.Span, method, route string, status int, err error) {
	span.SetName(method + " " + route)
	span.SetAttributes(attribute.String("http.request.method", method), attribute.String("http.route", route),
		attribute.Int("http.response.status_code", status))
	if p := principal(c); p != nil {
		span.SetAttributes(attribute.String("factline.tenant", p.TenantID))
	}
	if status >= 500 {
		msg := http.StatusText(status)
		if err != nil {
			msg = err.Error()
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}

// traceID is the trace id the request's facts record: the W3C trace id of
// its traceparent, else (the contract's default) the request id.
func traceID(c *fiber.Ctx) string {
	if v, ok := c.Locals(localTraceID).(string); ok {
		return v
	}
	return requestID(c)
}

func requestID(c *fiber.Ctx) string {
	if v, ok := c.Locals(localRequestID).(string); ok {
		return v
	}
	return ""
}

func principal(c *fiber.Ctx) *auth.Principal {
	p, _ := c.Locals(localPrincipal).(*auth.Principal)
	return p
}

// requireKey authenticates X-API-Key; the contract fixes the 401 body.
func (s *Server) requireKey(c *fiber.Ctx) error {
	if err := s.authenticate(c); err != nil {
		return err
	}
	return c.Next()
}

// authenticate checks the request's X-API-Key and notes its principal.
// A request carrying the header more than once is refused like a bad key:
// which of the keys (possibly of different tenants) it meant cannot be
// told.
func (s *Server) authenticate(c *fiber.Ctx) error {
	key := c.Get(HeaderAPIKey)
	if len(c.Request().Header.PeekAll(HeaderAPIKey)) > 1 {
		key = ""
	}
	p, err := s.auth.Authenticate(c.UserContext(), key)
	if err != nil {
		if errors.Is(err, auth.ErrInvalidKey) {
			return problem.New(problem.Unauthorized, "Invalid or missing API key")
		}
		return problem.Wrap(problem.Unavailable, "Authentication is temporarily unavailable", err)
	}
	c.Locals(localPrincipal, p)
	return nil
}

// requireAdmin lets only admin keys through.
func requireAdmin(c *fiber.Ctx) error {
	if !principal(c).IsAdmin() {
		return problem.New(problem.Forbidden, "This endpoint requires an admin API key")
	}
	return c.Next()
}

// ctx returns the request's context.
func ctx(c *fiber.Ctx) context.Context { return c.UserContext() }

// tenant returns the authenticated tenant.
func tenant(c *fiber.Ctx) string { return principal(c).TenantID }

// refuseContentEncoding answers 415 (RFC 7694) for a body sent with a
// content coding: bodies are read as sent, and a compressed one would
// be inflated whole before the body limit could hold it.
// Every value of every Content-Encoding header counts: fiber inflates by
// one of them, whichever this would read.
func refuseContentEncoding(c *fiber.Ctx, bodyLen int) error {
	if bodyLen == 0 {
		return nil
	}
	for _, h := range c.Request().Header.PeekAll(fiber.HeaderContentEncoding) {
		for _, ce := range strings.Split(string(h), ",") {
			if ce = strings.TrimSpace(ce); ce != "" && !strings.EqualFold(ce, "identity") {
				pe := problem.Newf(problem.UnsupportedMediaType, "Content-Encoding %s is not accepted: send the request body uncompressed", ce)
				pe.Headers = map[string]string{fiber.HeaderAcceptEncoding: "identity"}
				return pe
			}
		}
	}
	return nil
}
