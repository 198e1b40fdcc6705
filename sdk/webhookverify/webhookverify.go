// Package webhookverify verifies Factline webhook deliveries on the
// receiving side. It implements the recipient's four steps of the webhook
// contract:
//
//  1. read X-Svc-Signature and X-Svc-Timestamp;
//  2. reject a timestamp more than 300 seconds old;
//  3. recompute the signature, "sha256=" and the hex HMAC-SHA256 of
//     "<timestamp>.<body>" keyed with the secret, and compare in constant
//     time;
//  4. deduplicate on X-Svc-Delivery-Id: a duplicate is answered 200, an
//     invalid signature 401.
//
// [Verify] does steps 1 to 3 on a request's headers and body; a
// [Verifier]'s Handler wraps an http.Handler with all four. The package
// depends on the standard library only.
//
// The signature timestamp is fixed when a delivery is created and kept for
// its retries, so a retry made more than Tolerance after the first attempt
// fails step 2. Receivers that want late retries set a larger Tolerance
// (deduplication keeps that safe); replays always carry a fresh timestamp.
package webhookverify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header names of a delivery.
const (
	HeaderSignature     = "X-Svc-Signature"
	HeaderTimestamp     = "X-Svc-Timestamp"
	HeaderDeliveryID    = "X-Svc-Delivery-Id"
	HeaderConfigVersion = "X-Svc-Config-Version"
	HeaderAttempt       = "X-Svc-Attempt"
)

// DefaultTolerance is the contract's timestamp tolerance
// (internal/host/webhook/README.md).
const DefaultTolerance = 300 * time.Second

// DefaultRetention is how long delivery ids are remembered for
// deduplication (the contract lets them expire after 7 days).
const DefaultRetention = 7 * 24 * time.Hour

// DefaultMaxBody bounds the body a Handler reads.
const DefaultMaxBody = 1 << 20

// Verification errors; test with errors.Is.
var (
	ErrMissingHeader    = errors.New("webhookverify: missing signature or timestamp header")
	ErrBadTimestamp     = errors.New("webhookverify: timestamp is not Unix seconds")
	ErrTimestampTooOld  = errors.New("webhookverify: timestamp is too old")
	ErrTimestampFuture  = errors.New("webhookverify: timestamp is too far in the future")
	ErrInvalidSignature = errors.New("webhookverify: invalid signature")
)

// Sign returns the signature a delivery of body at timestamp carries:
// "sha256=" and the lowercase hex HMAC-SHA256 of "<timestamp>.<body>".
func Sign(secret []byte, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(timestamp, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a delivery's headers and exact body against each of the
// secrets (several during a rotation) at time now: the timestamp must be
// at most tolerance old (and not more than tolerance ahead: clocks
// disagree, but not by that much), and the signature must match one
// secret. tolerance <= 0 means DefaultTolerance. It returns the delivery's
// timestamp.
func Verify(h http.Header, body []byte, now time.Time, tolerance time.Duration, secrets ...[]byte) (int64, error) {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sig, tsText := h.Get(HeaderSignature), h.Get(HeaderTimestamp)
	if sig == "" || tsText == "" {
		return 0, ErrMissingHeader
	}
	ts, err := strconv.ParseInt(strings.TrimSpace(tsText), 10, 64)
	if err != nil || ts <= 0 {
		return 0, ErrBadTimestamp
	}
	age := now.Unix() - ts
	if age > int64(tolerance/time.Second) {
		return ts, fmt.Errorf("%w: %d s old, tolerance %v", ErrTimestampTooOld, age, tolerance)
	}
	if -age > int64(tolerance/time.Second) {
		return ts, fmt.Errorf("%w: %d s ahead", ErrTimestampFuture, -age)
	}
	got := []byte(strings.TrimSpace(sig))
	matched := false
	for _, secret := range secrets {
		// hmac.Equal takes the same time whether or where the values
		// differ; every secret is tried.
		if hmac.Equal(got, []byte(Sign(secret, ts, body))) {
			matched = true
		}
	}
	if !matched {
		return ts, ErrInvalidSignature
	}
	return ts, nil
}

// Deduper remembers delivery ids.
type Deduper interface {
	// Seen reports whether id was marked and has not expired.
	Seen(id string, now time.Time) bool
	// Mark records id as handled.
	Mark(id string, now time.Time)
}

// MemoryDeduper keeps delivery ids in memory for a retention period. It is
// safe for concurrent use. A receiver with several processes should use a
// shared store (a database table keyed by delivery id) instead.
type MemoryDeduper struct {
	retention time.Duration
	mu        sync.Mutex
	seen      map[string]time.Time // id -> expiry
	sweepAt   time.Time
}

// NewMemoryDeduper returns a deduper that forgets ids after retention
// (<= 0: DefaultRetention).
func NewMemoryDeduper(retention time.Duration) *MemoryDeduper {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return &MemoryDeduper{retention: retention, seen: map[string]time.Time{}}
}

// Seen reports whether id was marked within the retention period.
func (d *MemoryDeduper) Seen(id string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	exp, ok := d.seen[id]
	return ok && now.Before(exp)
}

// Mark records id.
func (d *MemoryDeduper) Mark(id string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen[id] = now.Add(d.retention)
	if now.After(d.sweepAt) {
		for k, exp := range d.seen {
			if !now.Before(exp) {
				delete(d.seen, k)
			}
		}
		d.sweepAt = now.Add(time.Minute)
	}
}

// Verifier verifies deliveries for an http.Handler.
type Verifier struct {
	// Secrets are the signing secrets accepted (the current one, and the
	// previous one during a rotation). At least one is required.
	Secrets [][]byte
	// Tolerance is the largest accepted timestamp age (default 300 s).
	Tolerance time.Duration
	// Dedup remembers handled delivery ids (default an in-memory deduper
	// with a 7-day retention, made on first use).
	Dedup Deduper
	// MaxBody bounds the body read (default 1 MiB); a larger one is a 413.
	MaxBody int64
	// Now returns the current time (default time.Now).
	Now func() time.Time

	once sync.Once
}

func (v *Verifier) init() {
	v.once.Do(func() {
		if v.Dedup == nil {
			v.Dedup = NewMemoryDeduper(0)
		}
		if v.MaxBody <= 0 {
			v.MaxBody = DefaultMaxBody
		}
		if v.Now == nil {
			v.Now = time.Now
		}
	})
}

// Delivery is a verified delivery, handed to the wrapped handler through
// the request's context (see FromContext); the request's Body holds the
// same bytes.
type Delivery struct {
	ID        string
	Timestamp int64
	Attempt   int
	Body      []byte
}

type ctxKey struct{}

// FromContext returns the verified delivery of a request passed on by
// Handler.
func FromContext(ctx context.Context) (*Delivery, bool) {
	d, ok := ctx.Value(ctxKey{}).(*Delivery)
	return d, ok
}

// Handler verifies each request and passes the verified ones to next:
// missing headers, a stale timestamp or a wrong signature are answered 401
// (next is not called); a delivery id already handled is answered 200
// without calling next. A delivery counts as handled once next answers it
// with a 2xx, so a delivery next failed is processed again when it is
// retried.
func (v *Verifier) Handler(next http.Handler) http.Handler {
	v.init()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, v.MaxBody+1))
		if err != nil {
			http.Error(w, "cannot read body", http.StatusBadRequest)
			return
		}
		if int64(len(body)) > v.MaxBody {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		now := v.Now()
		ts, err := Verify(r.Header, body, now, v.Tolerance, v.Secrets...)
		if err != nil {
			http.Error(w, "invalid webhook signature", http.StatusUnauthorized)
			return
		}
		id := r.Header.Get(HeaderDeliveryID)
		if id != "" && v.Dedup.Seen(id, now) {
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "duplicate delivery; already handled\n")
			return
		}
		attempt, _ := strconv.Atoi(r.Header.Get(HeaderAttempt))
		d := &Delivery{ID: id, Timestamp: ts, Attempt: attempt, Body: body}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, d))
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		if id != "" && rec.status >= 200 && rec.status < 300 {
			v.Dedup.Mark(id, v.Now())
		}
	})
}

// statusRecorder notes the status a handler answers with.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
