// Package idempotency makes a write safe to retry with an Idempotency-Key,
// as the IETF "The Idempotency-Key HTTP Header Field" draft describes: the
// first request with a key runs and its response is stored; a repeat with
// the same key and body gets that response again without running; the same
// key with a different body is refused (422); a repeat while the first is
// still running is refused (409). Records live in the store, so the
// guarantee holds across processes and restarts.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
)

// Defaults; see docs/decisions.md.
const (
	// DefaultTTL is how long a completed key is remembered.
	DefaultTTL = 24 * time.Hour
	// DefaultLock is how long an in-flight key is held before a crashed
	// first attempt is presumed dead and the key may be taken over.
	DefaultLock = time.Minute
	// MaxKeyLength bounds the header value.
	MaxKeyLength = 255
)

// Response is what a first request answered, replayed to repeats.
type Response struct {
	Status  int
	Body    []byte
	Headers map[string]string
}

// Keeper runs idempotent operations.
type Keeper struct {
	store store.IdempotencyStore
	ttl   time.Duration
	lock  time.Duration
	now   func() time.Time
}

// New returns a Keeper with the default TTL and lock.
func New(s store.IdempotencyStore) *Keeper {
	return &Keeper{store: s, ttl: DefaultTTL, lock: DefaultLock, now: time.Now}
}

// TTL returns how long completed keys are remembered.
func (k *Keeper) TTL() time.Duration { return k.ttl }

// ValidKey reports whether an Idempotency-Key value is acceptable.
func ValidKey(key string) bool {
	if key == "" || len(key) > MaxKeyLength {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// Fingerprint identifies a request body: JSON is canonicalised first so key
// order and whitespace do not matter.
func Fingerprint(method, path string, body []byte) string {
	canon := body
	var v any
	if json.Unmarshal(body, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", method, path)
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil))
}

// Do runs fn at most once per key. It returns the response and whether it
// was replayed from an earlier request. When fn fails, the key is released
// so the client may retry.
func (k *Keeper) Do(ctx context.Context, key store.IdemKey, fingerprint string, fn func() (Response, error)) (Response, bool, error) {
	now := k.now()
	rec, started, err := k.store.BeginIdempotency(ctx, store.IdemBegin{
		IdemKey:     key,
		RequestHash: fingerprint,
		Now:         now.UnixMilli(),
		LockedUntil: now.Add(k.lock).UnixMilli(),
		ExpiresAt:   now.Add(k.ttl).UnixMilli(),
	})
	if err != nil {
		return Response{}, false, fmt.Errorf("idempotency: begin: %w", err)
	}
	if !started {
		switch {
		case rec.RequestHash != fingerprint:
			return Response{}, false, problem.New(problem.Unprocessable, "This Idempotency-Key was already used with a different request")
		case rec.State != store.IdemDone:
			return Response{}, false, problem.New(problem.Conflict, "A request with this Idempotency-Key is still being processed; retry later")
		}
		resp := Response{Status: rec.StatusCode, Body: rec.Body}
		if len(rec.Headers) > 0 {
			_ = json.Unmarshal(rec.Headers, &resp.Headers)
		}
		return resp, true, nil
	}
	resp, err := fn()
	if err != nil {
		// Best effort: if the release fails the lock still expires.
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = k.store.ReleaseIdempotency(relCtx, key)
		cancel()
		return Response{}, false, err
	}
	var headers json.RawMessage
	if len(resp.Headers) > 0 {
		headers, _ = json.Marshal(resp.Headers)
	}
	// The operation happened: record it even if the client went away.
	doneCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := k.store.CompleteIdempotency(doneCtx, key, resp.Status, resp.Body, headers); err != nil {
		return Response{}, false, fmt.Errorf("idempotency: complete: %w", err)
	}
	return resp, false, nil
}

// Purge deletes expired records.
func (k *Keeper) Purge(ctx context.Context) (int64, error) {
	return k.store.PurgeIdempotency(ctx, k.now().UnixMilli())
}
