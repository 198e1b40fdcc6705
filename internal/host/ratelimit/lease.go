package ratelimit

import (
	"context"
	"errors"
	"hash/maphash"
	"strings"
	"sync"
	"time"
)

// Leasing: for a large limit, one script call admits up to n requests at
// once (moving the TAT in Redis by n·T, exactly as n requests arriving
// together), and the process hands those n admissions out to its next
// requests for the key without asking Redis again. A process never admits
// more than Redis granted it, so the sustained rate stays at most rpm per
// minute. What changes:
//
//   - Admissions granted shortly before a window may be used inside it:
//     each process holds at most one lease per key, of at most
//     maxLease(rpm) ≤ rpm/leaseDivisor requests, so with P processes at
//     most P·(maxLease−1) requests beyond the GCRA bound pass in any
//     window.
//   - Leased admissions unused within leaseTTL are dropped; they count
//     against the limit as if used. The lease size adapts to the key's
//     traffic (it doubles while leases run out quickly and shrinks to what
//     was used when one expires), so little is dropped.
//   - RateLimit-Remaining and -Reset of a leased admission are what Redis
//     would have answered had the process's requests come one at a time,
//     with no other process's requests since the lease.
//
// A rejection is remembered until its RetryAfter: no request of the key
// can pass before then (rejected requests do not move the TAT, and no one
// else's can either), so until then the process rejects locally, with the
// same RetryAfter and Reset counted down.

const (
	// DefaultMaxLease is the most admissions one script call leases when
	// RedisOptions.MaxLease is zero.
	DefaultMaxLease = 64
	// leaseDivisor keeps a lease at most rpm/1000 admissions, so limits
	// below 2000 rpm are never leased: every request is one script call,
	// exactly as without leasing.
	leaseDivisor = 1000
	// leaseTTL is how long leased admissions may be handed out.
	leaseTTL = 100 * time.Millisecond
	// leaseSweepEvery is how often (at most) a shard of the lease table
	// drops keys with nothing leased.
	leaseSweepEvery = 10 * time.Second
)

// maxLease returns the largest lease for a limit; 1 means no leasing.
func (r *Redis) maxLease(rpm int) int {
	return max(1, min(r.leaseCap, rpm/leaseDivisor))
}

// leaseTable holds the lease state of the keys this process uses.
type leaseTable struct {
	seed   maphash.Seed
	shards [shardCount]leaseShard
}

type leaseShard struct {
	mu        sync.Mutex
	keys      map[string]*leaseKey
	nextSweep time.Time
	_         [40]byte
}

func newLeaseTable() *leaseTable {
	t := &leaseTable{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].keys = make(map[string]*leaseKey)
	}
	return t
}

// get returns the state of key, created on first use.
func (t *leaseTable) get(key string, now time.Time) *leaseKey {
	s := &t.shards[maphash.String(t.seed, key)%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.After(s.nextSweep) {
		for k, lk := range s.keys {
			if lk.idle(now) {
				delete(s.keys, k)
			}
		}
		s.nextSweep = now.Add(leaseSweepEvery)
	}
	lk := s.keys[key]
	if lk == nil {
		lk = &leaseKey{size: 1}
		s.keys[strings.Clone(key)] = lk
	}
	return lk
}

// leaseKey is one key's lease and remembered rejection. Times are on the
// limiter's local clock; µs figures are as Redis answered at grantAt.
type leaseKey struct {
	mu sync.Mutex

	rpm     int   // the limit the state below was granted under
	tokens  int   // leased admissions not yet handed out
	granted int   // admissions in the current lease
	reset   int64 // µs: the key's ResetAfter with the whole lease counted
	grantAt time.Time
	lastAt  time.Time // of the last admission handed out
	size    int       // the next lease to ask for
	expired bool      // the current lease expired before it ran out

	// A remembered rejection: until rejectUntil nothing passes.
	rejectUntil     time.Time
	rejRetry, rejRe int64 // µs: its RetryAfter and ResetAfter at grantAt

	refill *refillCall // the script call in flight, nil when none
}

// refillCall is a script call other requests for the key wait on.
type refillCall struct {
	done chan struct{}
	err  error
}

// idle reports whether the key holds nothing worth keeping; lk.mu is not
// held (a key in use is kept).
func (lk *leaseKey) idle(now time.Time) bool {
	if !lk.mu.TryLock() {
		return false
	}
	defer lk.mu.Unlock()
	return lk.refill == nil && now.Sub(lk.lastAt) > leaseSweepEvery &&
		(lk.tokens == 0 || now.Sub(lk.grantAt) >= leaseTTL) && !now.Before(lk.rejectUntil)
}

// take hands out a leased admission or repeats a remembered rejection;
// ok is false when Redis must be asked. lk.mu is held.
func (lk *leaseKey) take(now time.Time, rpm int) (d Decision, ok bool) {
	if lk.rpm != rpm {
		// The route's limit changed: what was granted under the old one
		// is forgotten (and counted as used).
		lk.tokens, lk.granted, lk.rejectUntil, lk.size, lk.rpm = 0, 0, time.Time{}, 1, rpm
		return Decision{}, false
	}
	elapsed := now.Sub(lk.grantAt).Microseconds()
	if lk.tokens > 0 {
		if now.Sub(lk.grantAt) < leaseTTL {
			lk.lastAt = now
			return lk.admit(rpm, elapsed), true
		}
		// Expired: what was not used is dropped, and the next lease is
		// no larger than what was.
		lk.size = max(1, lk.granted-lk.tokens)
		lk.tokens, lk.expired = 0, true
	}
	if now.Before(lk.rejectUntil) {
		return Decision{Limit: rpm, RetryAfter: micros(lk.rejRetry - elapsed), ResetAfter: micros(max(0, lk.rejRe-elapsed))}, true
	}
	return Decision{}, false
}

// admit hands out one leased admission, elapsed µs after the grant; the
// lease has one. lk.mu is held.
func (lk *leaseKey) admit(rpm int, elapsed int64) Decision {
	t := interval(rpm)
	limit := t * int64(rpm)
	lk.tokens--
	// This admission's TAT leaves out the ones still leased.
	reset := max(t, lk.reset-int64(lk.tokens)*t-elapsed)
	remaining := max(0, min(int64(rpm-1), (limit-reset)/t))
	return Decision{Allowed: true, Limit: rpm, Remaining: int(remaining), ResetAfter: micros(reset)}
}

// nextSize is the lease to ask for: twice the last one when it ran out
// within half its lifetime. lk.mu is held.
func (lk *leaseKey) nextSize(most int) int {
	if lk.granted > 0 && !lk.expired && lk.lastAt.Sub(lk.grantAt) < leaseTTL/2 {
		lk.size *= 2
	}
	lk.size = max(1, min(lk.size, most))
	return lk.size
}

// allowLeased is Allow for a key (without the prefix) whose limit is
// leased.
func (r *Redis) allowLeased(ctx context.Context, key string, rpm, most int) (Decision, error) {
	now := r.clock()
	lk := r.leases.get(key, now)
	for first := true; ; first = false {
		if !first {
			now = r.clock()
		}
		lk.mu.Lock()
		if d, ok := lk.take(now, rpm); ok {
			lk.mu.Unlock()
			return d, nil
		}
		if call := lk.refill; call != nil {
			// Another request is asking Redis: wait for its lease.
			lk.mu.Unlock()
			select {
			case <-call.done:
			case <-ctx.Done():
				return Decision{}, ctx.Err()
			}
			if call.err != nil && !errors.Is(call.err, context.Canceled) && !errors.Is(call.err, context.DeadlineExceeded) {
				// Redis failed; the requests that waited fail with it
				// rather than each waiting for it in turn.
				return Decision{}, call.err
			}
			continue
		}
		n := lk.nextSize(most)
		call := &refillCall{done: make(chan struct{})}
		lk.refill = call
		lk.mu.Unlock()

		// Redis decides between sending and answering; counting from
		// the send errs toward asking it again rather than refusing a
		// request it would admit.
		sent := r.clock()
		res, err := r.script(ctx, r.prefix+key, rpm, n)
		lk.mu.Lock()
		lk.refill = nil
		if err != nil {
			call.err = err
			close(call.done)
			lk.mu.Unlock()
			return Decision{}, err
		}
		if lk.rpm != rpm {
			// The limit changed meanwhile: the grant is dropped (and
			// counted as used).
			close(call.done)
			lk.mu.Unlock()
			continue
		}
		// The asking request gets Redis' own answer: a refusal as
		// Redis gave it, or the lease's first admission, however long
		// the answer took.
		var d Decision
		lk.grantAt, lk.lastAt, lk.expired = sent, r.clock(), false
		if res.admitted == 0 {
			lk.tokens, lk.granted = 0, 0
			lk.rejectUntil = sent.Add(micros(res.retryAfter))
			lk.rejRetry, lk.rejRe = res.retryAfter, res.resetAfter
			d = Decision{Limit: rpm, RetryAfter: micros(res.retryAfter), ResetAfter: micros(res.resetAfter)}
		} else {
			lk.tokens, lk.granted = res.admitted, res.admitted
			lk.reset = res.resetAfter
			lk.rejectUntil = time.Time{}
			d = lk.admit(rpm, 0)
		}
		close(call.done)
		lk.mu.Unlock()
		return d, nil
	}
}
