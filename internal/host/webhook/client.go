package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on what is read of a receiver's response.
const (
	// maxResponseRead is the most of a response body read; a longer body
	// is not drained (the connection is closed instead of reused).
	maxResponseRead = 64 << 10
	// maxRecordedBody is the most of the body kept in the webhook.sent
	// fact.
	maxRecordedBody = 4 << 10
	// maxRecordedHeaders and maxHeaderValue bound the recorded headers.
	maxRecordedHeaders = 50
	maxHeaderValue     = 512
)

// sessionCacheSize bounds the TLS sessions kept for resumption, one per
// endpoint host (its tickets included).
const sessionCacheSize = 4096

// Error codes recorded in webhook.sent facts and dead letters, beyond the
// contract's SERVICE_UNAVAILABLE, MAX_RETRIES_EXCEEDED and UNKNOWN.
const (
	CodeServiceUnavailable  = "SERVICE_UNAVAILABLE"
	CodeMaxRetriesExceeded  = "MAX_RETRIES_EXCEEDED"
	CodeUnknown             = "UNKNOWN"
	CodeTimeout             = "TIMEOUT"
	CodeRateLimited         = "RATE_LIMITED"
	CodeConnectionFailed    = "CONNECTION_FAILED"
	CodeTLSError            = "TLS_ERROR"
	CodeDestinationBlocked  = "DESTINATION_BLOCKED"
	CodeRedirectNotFollowed = "REDIRECT_NOT_FOLLOWED"
	CodeGone                = "GONE"
	CodeSecretNotFound      = "SECRET_NOT_FOUND"
	CodeSecretUnavailable   = "SECRET_UNAVAILABLE"
	CodeAttemptInterrupted  = "ATTEMPT_INTERRUPTED"
	CodeInvalidDelivery     = "INVALID_DELIVERY"
)

// Error types of the contract.
const (
	ErrorTransient = "transient"
	ErrorTerminal  = "terminal"
)

// statusCodes names the error codes of statuses that are not plain
// HTTP_<status>.
var statusCodes = map[int]string{
	http.StatusTooManyRequests:     CodeRateLimited,
	http.StatusInternalServerError: "INTERNAL_SERVER_ERROR",
	http.StatusBadGateway:          "BAD_GATEWAY",
	http.StatusServiceUnavailable:  CodeServiceUnavailable,
	http.StatusGatewayTimeout:      "GATEWAY_TIMEOUT",
	http.StatusBadRequest:          "BAD_REQUEST",
	http.StatusUnauthorized:        "UNAUTHORIZED",
	http.StatusForbidden:           "FORBIDDEN",
	http.StatusNotFound:            "NOT_FOUND",
	http.StatusGone:                CodeGone,
}

// result is the outcome of one attempt.
type result struct {
	status   int // 0 when no response
	headers  map[string]string
	body     string
	elapsed  time.Duration
	errType  string // "" on success
	errCode  string
	errMsg   string
	retryAft time.Duration // Retry-After of a 429 or 503
	gone     bool          // 410: pause the config
	// aborted: the service is stopping and cut the attempt short; its
	// outcome is not recorded (the lease runs out and the next claim
	// records it as interrupted).
	aborted bool
}

func (r *result) success() bool { return r.errType == "" }

func (r *result) fail(typ, code, msg string) {
	// msg may quote the receiver (a Location header, a status text).
	r.errType, r.errCode, r.errMsg = typ, code, recordable(msg)
}

// newHTTPClient builds the delivery client: every connection goes through
// the address policy after DNS resolution, no proxy from the environment
// (it would bypass the policy), no redirects, HTTP/1.1 keep-alive with up
// to perHost idle connections per endpoint.
func newHTTPClient(policy addressPolicy, tlsConfig *tls.Config, perHost int) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: policy.control}
	var tc *tls.Config
	if tlsConfig != nil {
		tc = tlsConfig.Clone()
	} else {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if tc.ClientSessionCache == nil {
		// A connection after the first to an endpoint resumes its TLS
		// session: no certificate is sent, signed or verified again. Under
		// fan-out every endpoint gets up to perHost connections, and full
		// handshakes were most of the CPU the receivers spent.
		tc.ClientSessionCache = tls.NewLRUClientSessionCache(sessionCacheSize)
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   perHost,
		MaxConnsPerHost:       0,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: 0,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// endpointOf is the scheme://host:port a URL connects to.
func endpointOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return strings.ToLower(u.Scheme + "://" + u.Hostname() + ":" + port)
}

// deliveryRequest is what one attempt sends.
type deliveryRequest struct {
	url        string
	body       []byte
	secret     string
	deliveryID string
	timestamp  int64
	version    int64
	attempt    int
	headers    map[string]string
	standard   bool
	timeout    time.Duration
	// traceparent continues the trace of the fact that caused the
	// delivery; "" when it has none.
	traceparent string
}

// header builds the request headers: the config's custom headers, then the
// contract's (which custom headers may not override).
func (d *deliveryRequest) header() http.Header {
	h := make(http.Header, len(d.headers)+8)
	for k, v := range d.headers {
		h.Set(k, v)
	}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", UserAgent)
	h.Set(HeaderSignature, Sign([]byte(d.secret), d.timestamp, d.body))
	h.Set(HeaderTimestamp, strconv.FormatInt(d.timestamp, 10))
	h.Set(HeaderDeliveryID, d.deliveryID)
	h.Set(HeaderConfigVersion, strconv.FormatInt(d.version, 10))
	h.Set(HeaderAttempt, strconv.Itoa(d.attempt))
	if d.traceparent != "" {
		h["Traceparent"] = []string{d.traceparent}
	}
	if d.standard {
		h[HeaderStandardID] = []string{d.deliveryID}
		h[HeaderStandardTimestamp] = []string{strconv.FormatInt(d.timestamp, 10)}
		h[HeaderStandardSignature] = []string{SignStandard(d.secret, d.deliveryID, d.timestamp, d.body)}
	}
	return h
}

// send makes one attempt. stopping is done when the service is stopping
// hard: an attempt cut short by it is marked aborted, not failed.
func send(client *http.Client, stopping context.Context, d *deliveryRequest, now func() time.Time) result {
	ctx, cancel := context.WithTimeout(stopping, d.timeout)
	defer cancel()
	var r result
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(d.body))
	if err != nil {
		r.fail(ErrorTerminal, CodeInvalidDelivery, "cannot build the request: "+err.Error())
		return r
	}
	req.Header = d.header()
	req.ContentLength = int64(len(d.body))
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		r.elapsed = time.Since(start)
		classifyTransportError(&r, stopping, ctx, err, d.timeout)
		return r
	}
	defer resp.Body.Close()
	buf, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseRead))
	r.elapsed = time.Since(start)
	r.status = resp.StatusCode
	r.headers = recordHeaders(resp.Header)
	r.body = recordBody(buf)
	if readErr != nil && stopping.Err() != nil {
		r.aborted = true
		return r
	}
	if readErr != nil && (errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(readErr)) {
		// The contract counts an attempt whose timeout runs out as a
		// timeout, also while the response's body is still arriving.
		r.fail(ErrorTransient, CodeTimeout, "the response did not end within "+d.timeout.String()+"; the request was aborted")
		return r
	}
	classifyStatus(&r, resp, now())
	return r
}

func classifyTransportError(r *result, stopping, ctx context.Context, err error, timeout time.Duration) {
	var blocked *BlockedAddressError
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case stopping.Err() != nil:
		r.aborted = true
	case errors.As(err, &blocked):
		r.fail(ErrorTerminal, CodeDestinationBlocked, blocked.Error())
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(err):
		r.fail(ErrorTransient, CodeTimeout, "no response within "+timeout.String()+"; the request was aborted")
	case errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalid):
		r.fail(ErrorTerminal, CodeTLSError, "TLS: "+errText(err))
	default:
		r.fail(ErrorTransient, CodeConnectionFailed, errText(err))
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// errText is an error's message without the url.Error wrapper's method
// and URL, which the fact records separately.
func errText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func classifyStatus(r *result, resp *http.Response, now time.Time) {
	code := resp.StatusCode
	msg := strconv.Itoa(code) + " " + http.StatusText(code)
	switch {
	case code >= 200 && code < 300:
		return
	case code == 429 || code == 500 || code == 502 || code == 503 || code == 504:
		r.fail(ErrorTransient, statusCode(code), msg)
		if code == 429 || code == 503 {
			r.retryAft = parseRetryAfter(resp.Header.Get("Retry-After"), now)
		}
	case code == http.StatusGone:
		r.fail(ErrorTerminal, CodeGone, msg+": the endpoint is gone; deliveries of this config are paused until an operator resumes it")
		r.gone = true
	case code >= 400 && code < 500:
		r.fail(ErrorTerminal, statusCode(code), msg)
	case code >= 300 && code < 400:
		where := resp.Header.Get("Location")
		r.fail(ErrorTerminal, CodeRedirectNotFollowed, msg+": redirects are not followed (Location: "+truncate(where, 200)+")")
	case code >= 500 && code < 600:
		r.fail(ErrorTerminal, statusCode(code), msg)
	default:
		r.fail(ErrorTerminal, CodeUnknown, "unexpected status "+msg)
	}
}

func statusCode(code int) string {
	if c, ok := statusCodes[code]; ok {
		return c
	}
	return "HTTP_" + strconv.Itoa(code)
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP
// date; 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, 1<<31)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func recordHeaders(h http.Header) map[string]string {
	out := make(map[string]string, min(len(h), maxRecordedHeaders))
	for _, k := range sortedKeys(h) {
		if len(out) == maxRecordedHeaders {
			break
		}
		out[recordable(k)] = recordable(truncate(strings.Join(h[k], ", "), maxHeaderValue))
	}
	return out
}

func recordBody(b []byte) string {
	if len(b) > maxRecordedBody {
		b = b[:maxRecordedBody]
	}
	return recordable(string(b))
}

// recordable is a receiver's text as the webhook.sent fact can store it:
// invalid UTF-8 and NUL characters, which no stored string may hold, are
// replaced by U+FFFD. A NUL in a 2xx body had made the outcome
// unrecordable, failing every outcome committed with it.
func recordable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) && len(s) > 0 {
		s = s[:len(s)-1]
	}
	return s
}
