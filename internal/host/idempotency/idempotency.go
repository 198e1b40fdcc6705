// Package idempotency makes a write safe to retry with an Idempotency-Key,
// as the IETF "The Idempotency-Key HTTP Header Field" draft describes: the
// first request with a key runs and its response is stored; a repeat with
// the same key and body gets that response again without running; the same
// key with a different body is refused (422); a repeat while the first is
// still running is refused (409). Records live in the store, so the
// guarantee holds across processes and restarts.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
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

// inDoubt is the status recorded for a key whose operation may or may not
// have happened (store.ErrOutcomeUnknown); no response has status 0.
const inDoubt = 0

// inDoubtDetail answers a request whose key is in doubt.
const inDoubtDetail = "The first request with this Idempotency-Key may or may not have been stored: " +
	"the database did not confirm its commit. Check whether it was (read the entity, or its facts), " +
	"and if it was not, send it again with a new key"

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

	// Writes of a record's outcome the store refused (it was down) are
	// tried again in the background until they succeed or Stop.
	stop     chan struct{}
	stopOnce sync.Once
	settling sync.WaitGroup
}

// New returns a Keeper with the default TTL and lock.
func New(s store.IdempotencyStore) *Keeper {
	return &Keeper{store: s, ttl: DefaultTTL, lock: DefaultLock, now: time.Now, stop: make(chan struct{})}
}

// Stop ends the retries of outcome writes still failing, each after its
// current attempt, and waits for them until ctx ends. A record whose
// outcome was never written stays in flight until its lock passes.
func (k *Keeper) Stop(ctx context.Context) error {
	k.stopOnce.Do(func() { close(k.stop) })
	done := make(chan struct{})
	go func() { k.settling.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("idempotency: stop: %w", ctx.Err())
	}
}

// settle writes a record's outcome, and when the store refuses it, tries
// again in the background with a growing pause (at most 5 s) until it
// succeeds or the Keeper stops.
func (k *Keeper) settle(ctx context.Context, write func(context.Context) error) {
	k.settleUntil(ctx, time.Time{}, func(c context.Context) (bool, error) { return true, write(c) })
}

// settleUntil is settle for a write that may succeed without doing what
// it is for yet (write says whether it did): it is tried again until it
// does, or until the Keeper's clock passes until (zero: no such bound).
func (k *Keeper) settleUntil(ctx context.Context, until time.Time, write func(context.Context) (bool, error)) {
	// The first attempt runs while the client waits: bounded by 5 s, or
	// by 1 s when the request has already ended (its deadline passed, or
	// the client left), so that a stalled store does not hold a late
	// answer another 5 s; the background goes on trying.
	bound := 5 * time.Second
	if ctx.Err() != nil {
		bound = time.Second
	}
	attempt := func() bool {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
		defer cancel()
		done, err := write(c)
		return err == nil && done || !until.IsZero() && !k.now().Before(until)
	}
	if attempt() {
		return
	}
	bound = 5 * time.Second // no client waits for the background
	k.settling.Add(1)
	go func() {
		defer k.settling.Done()
		pause := 100 * time.Millisecond
		t := time.NewTimer(pause)
		defer t.Stop()
		for {
			select {
			case <-k.stop:
				return
			case <-t.C:
			}
			if attempt() {
				return
			}
			pause = min(2*pause, 5*time.Second)
			t.Reset(pause)
		}
	}()
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

// Fingerprint identifies a request: its method and path, a scope of
// what else selects the operation (a query, an entity id; empty for
// none) and its body. A JSON body is canonicalised first so key order and
// whitespace do not matter; its numbers keep their text, so two bodies
// whose numbers differ only beyond a float64's precision
// (9007199254740993 and ...992, 0.1 and 0.1000000000000000000001) are
// different requests, as the stores keep them apart.
func Fingerprint(method, path, scope string, body []byte) string {
	canon := body
	if v, ok := decodeJSON(body); ok {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", method, path)
	if scope != "" {
		fmt.Fprintf(h, "%s\n", scope)
	}
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil))
}

// decodeJSON reads one JSON value, numbers as their text.
func decodeJSON(body []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// Do runs fn at most once per key. It returns the response and whether it
// was replayed from an earlier request. When fn fails, the key is released
// so the client may retry. Once fn has succeeded its response is
// returned even when the store cannot record it yet (see settle).
func (k *Keeper) Do(ctx context.Context, key store.IdemKey, fingerprint string, fn func() (Response, error)) (Response, bool, error) {
	now := k.now()
	claim := store.IdemBegin{
		IdemKey:     key,
		RequestHash: fingerprint,
		Now:         now.UnixMilli(),
		LockedUntil: now.Add(k.lock).UnixMilli(),
		ExpiresAt:   now.Add(k.ttl).UnixMilli(),
	}
	release := func(c context.Context) error {
		_, err := k.store.ReleaseIdempotency(c, key, claim.LockedUntil)
		return err
	}
	rec, started, err := k.store.BeginIdempotency(ctx, claim)
	if errors.Is(err, store.ErrOutcomeUnknown) {
		// The claim's statement went unanswered, so it may be stored (a
		// connection that failed on the way back, a database that froze
		// and came back, a commit still waiting for a standby): release
		// it, or the key would be held for the lock's length for an
		// operation that never ran. Whether it was stored cannot be
		// told (a commit not finished is not seen yet), so the release
		// is tried until it deletes the claim or the lock passes. It
		// names this claim, so it cannot free another's.
		k.settleUntil(ctx, time.UnixMilli(claim.LockedUntil), func(c context.Context) (bool, error) {
			return k.store.ReleaseIdempotency(c, key, claim.LockedUntil)
		})
		// Nothing of the request itself ran.
		kind, detail := problem.Unavailable, "The database did not answer; nothing was written, retry in a few seconds"
		if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, store.ErrUnavailable) {
			kind, detail = problem.Timeout, "The request took too long and was abandoned; nothing was written"
		}
		return Response{}, false, problem.Wrap(kind, detail, fmt.Errorf("idempotency: begin: %w", err))
	}
	if err != nil {
		return Response{}, false, fmt.Errorf("idempotency: begin: %w", err)
	}
	if !started {
		switch {
		case rec.RequestHash != fingerprint:
			return Response{}, false, problem.New(problem.Unprocessable, "This Idempotency-Key was already used with a different request")
		case rec.State != store.IdemDone:
			return Response{}, false, problem.New(problem.Conflict, "A request with this Idempotency-Key is still being processed; retry later")
		case rec.StatusCode == inDoubt:
			return Response{}, false, problem.New(problem.Conflict, inDoubtDetail)
		}
		resp := Response{Status: rec.StatusCode, Body: rec.Body}
		if len(rec.Headers) > 0 {
			_ = json.Unmarshal(rec.Headers, &resp.Headers)
		}
		return resp, true, nil
	}
	resp, err := fn()
	if errors.Is(err, store.ErrOutcomeUnknown) {
		// The operation may have happened: running it again on a retry
		// could do it twice, and replaying a failure could hide that it
		// was done. The key is kept, as in doubt, until it expires.
		k.settle(ctx, func(c context.Context) error { return k.store.CompleteIdempotency(c, key, inDoubt, nil, nil) })
		return Response{}, false, err
	}
	if err != nil {
		// The key is released so the client may retry at once; if the
		// store refuses that too, the release is tried again until it
		// succeeds (meanwhile a retry is a 409, as for a key in flight).
		k.settle(ctx, release)
		return Response{}, false, err
	}
	var headers json.RawMessage
	if len(resp.Headers) > 0 {
		headers, _ = json.Marshal(resp.Headers)
	}
	// The operation happened, so the client gets its answer whether or
	// not the record is written now: an error here would have it retry
	// an operation already done, which would run again once the key's
	// lock passed. The record is written even if the client went away,
	// and written again until the store takes it; until then a retry is
	// a 409 (in flight).
	k.settle(ctx, func(c context.Context) error {
		return k.store.CompleteIdempotency(c, key, resp.Status, resp.Body, headers)
	})
	return resp, false, nil
}

// Purge deletes expired records.
func (k *Keeper) Purge(ctx context.Context) (int64, error) {
	return k.store.PurgeIdempotency(ctx, k.now().UnixMilli())
}
