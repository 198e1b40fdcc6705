package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/idempotency"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestFingerprint(t *testing.T) {
	t.Parallel()
	fp := func(scope, body string) string {
		return idempotency.Fingerprint("POST", "/v1/facts", scope, []byte(body))
	}
	for _, tc := range []struct {
		name     string
		a, b     [2]string // scope, body
		wantSame bool
	}{
		{"key order and whitespace", [2]string{"", `{"a":1,"b":[1,2]}`}, [2]string{"", "{ \"b\": [1, 2],\n\"a\": 1 }"}, true},
		{"integers beyond a float64", [2]string{"", `{"max":9007199254740993}`}, [2]string{"", `{"max":9007199254740992}`}, false},
		{"decimals beyond a float64", [2]string{"", `{"amount":0.1}`}, [2]string{"", `{"amount":0.1000000000000000000001}`}, false},
		{"the same numbers", [2]string{"", `{"amount":0.1,"n":12}`}, [2]string{"", `{"n":12,"amount":0.1}`}, true},
		{"scope with key order", [2]string{"entity_type=account", `{"version":5,"name":"Acme"}`}, [2]string{"entity_type=account", `{"name":"Acme","version":5}`}, true},
		{"another scope", [2]string{"acct-1", `{}`}, [2]string{"acct-2", `{}`}, false},
		{"scope or none", [2]string{"", `{}`}, [2]string{"x", `{}`}, false},
		{"trailing data is kept as sent", [2]string{"", `{"a":1} {"b":2}`}, [2]string{"", `{"a":1}{"b":2}`}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if same := fp(tc.a[0], tc.a[1]) == fp(tc.b[0], tc.b[1]); same != tc.wantSame {
				t.Fatalf("same fingerprint %v, want %v", same, tc.wantSame)
			}
		})
	}
}

// newKeeper is a Keeper on st, stopped when the test ends.
func newKeeper(t *testing.T, st store.IdempotencyStore) *idempotency.Keeper {
	t.Helper()
	k := idempotency.New(st)
	t.Cleanup(func() {
		if err := k.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return k
}

// failingOutcomes is a real store whose writes of an idempotency
// record's outcome fail, as with the database down, until healed.
type failingOutcomes struct {
	store.IdempotencyStore
	down     atomic.Bool
	attempts atomic.Int64
}

var errDown = fmt.Errorf("test: %w", store.ErrUnavailable)

func (f *failingOutcomes) CompleteIdempotency(ctx context.Context, k store.IdemKey, status int, body []byte, headers json.RawMessage) error {
	f.attempts.Add(1)
	if f.down.Load() {
		return errDown
	}
	return f.IdempotencyStore.CompleteIdempotency(ctx, k, status, body, headers)
}

func (f *failingOutcomes) ReleaseIdempotency(ctx context.Context, k store.IdemKey, lockedUntil int64) (bool, error) {
	f.attempts.Add(1)
	if f.down.Load() {
		return false, errDown
	}
	return f.IdempotencyStore.ReleaseIdempotency(ctx, k, lockedUntil)
}

// lostClaims is a real store whose claims of a key are stored but
// answered with an error while lose is set, as when the connection fails
// after the database committed the claim (the Postgres store then says
// store.ErrOutcomeUnknown).
type lostClaims struct {
	store.IdempotencyStore
	lose atomic.Bool
}

func (l *lostClaims) BeginIdempotency(ctx context.Context, b store.IdemBegin) (*store.IdemRecord, bool, error) {
	rec, claimed, err := l.IdempotencyStore.BeginIdempotency(ctx, b)
	if err == nil && l.lose.Load() {
		return nil, false, fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, errDown)
	}
	return rec, claimed, err
}

// A claim whose answer was lost is released, so the key is not held for
// the lock's minute for an operation that never ran; an operation whose
// commit went unanswered (store.ErrOutcomeUnknown) may have happened, so
// its key is kept in doubt: a retry is a 409 that says so and does not
// run the operation again, now or after the lock would have passed.
func TestClaimsAndOutcomesInDoubt(t *testing.T) {
	t.Parallel()
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			st := &lostClaims{IdempotencyStore: teststore.Open(t, backend)}
			k := newKeeper(t, st)
			ctx := context.Background()
			fp := idempotency.Fingerprint("POST", "/v1/facts", "", []byte(`{"a":1}`))
			var runs atomic.Int64
			ok := func() (idempotency.Response, error) {
				runs.Add(1)
				return idempotency.Response{Status: 201, Body: []byte(`{}`)}, nil
			}

			lost := store.IdemKey{TenantID: "t1", Scope: "tenant", Key: "lost-claim"}
			st.lose.Store(true)
			_, _, err := k.Do(ctx, lost, fp, ok)
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Kind != problem.Unavailable || !strings.Contains(pe.Detail, "nothing was written") {
				t.Fatalf("claim with a lost answer: %v, want a 503 saying nothing was written", err)
			}
			st.lose.Store(false)
			if _, replayed, err := k.Do(ctx, lost, fp, ok); err != nil || replayed || runs.Load() != 1 {
				t.Fatalf("retry after a lost claim: replayed %v, %v, %d runs; want it to run at once", replayed, err, runs.Load())
			}

			doubt := store.IdemKey{TenantID: "t1", Scope: "tenant", Key: "in-doubt"}
			unknown := fmt.Errorf("commit: %w: %w", store.ErrOutcomeUnknown, errDown)
			if _, _, err := k.Do(ctx, doubt, fp, func() (idempotency.Response, error) { return idempotency.Response{}, unknown }); !errors.Is(err, store.ErrOutcomeUnknown) {
				t.Fatalf("operation in doubt: %v", err)
			}
			// A Keeper whose clock is past the claim's lock, as a retry a
			// few minutes later.
			later := newKeeper(t, st)
			idempotency.SetNow(later, func() time.Time { return time.Now().Add(2 * idempotency.DefaultLock) })
			for _, kp := range []*idempotency.Keeper{k, later} {
				_, _, err := kp.Do(ctx, doubt, fp, ok)
				var pe *problem.Error
				if !errors.As(err, &pe) || pe.Kind != problem.Conflict || !strings.Contains(pe.Detail, "may or may not have been stored") {
					t.Fatalf("retry of an operation in doubt: %v, want a 409 saying it may have been stored", err)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("operations ran %d times, want once (the lost claim's retry)", n)
			}
		})
	}
}

// An operation that succeeded while its record could not be written
// answers its response (a 503 told the client to retry an operation
// already done, and the retry ran it again once the key's lock passed);
// the record is written once the store takes it, and a retry then gets
// the response replayed. A failed operation's key is released the same
// way.
func TestOutcomesTheStoreRefusedAreWrittenLater(t *testing.T) {
	t.Parallel()
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			st := &failingOutcomes{IdempotencyStore: teststore.Open(t, backend)}
			k := newKeeper(t, st)
			ctx := context.Background()
			key := store.IdemKey{TenantID: "t1", Scope: "tenant", Key: "k1"}
			fp := idempotency.Fingerprint("POST", "/v1/facts", "", []byte(`{"a":1}`))
			var runs atomic.Int64
			op := func() (idempotency.Response, error) {
				runs.Add(1)
				return idempotency.Response{Status: 201, Body: []byte(`{"data":{"id":"f1"}}`)}, nil
			}

			st.down.Store(true)
			resp, replayed, err := k.Do(ctx, key, fp, op)
			if err != nil || replayed || resp.Status != 201 {
				t.Fatalf("first request with the record unwritable: %+v %v %v, want its 201", resp, replayed, err)
			}
			// Written in the background: tried again while refused.
			testutil.Eventually(t, 10*time.Second, "retries of the refused outcome", func() bool { return st.attempts.Load() >= 3 })
			_, _, err = k.Do(ctx, key, fp, op)
			var pe *problem.Error
			if !errors.As(err, &pe) || pe.Kind != problem.Conflict {
				t.Fatalf("retry before the record is written: %v, want a 409 (in flight)", err)
			}
			st.down.Store(false)
			testutil.EventuallyNil(t, 15*time.Second, func() error {
				resp, replayed, err := k.Do(ctx, key, fp, op)
				if err != nil {
					return err
				}
				if !replayed || resp.Status != 201 || string(resp.Body) != `{"data":{"id":"f1"}}` {
					return fmt.Errorf("retry once written: %+v replayed %v, want the first response replayed", resp, replayed)
				}
				return nil
			})
			if n := runs.Load(); n != 1 {
				t.Fatalf("the operation ran %d times, want once", n)
			}

			// A failed operation: its key is released once the store
			// takes the release, and a retry then runs.
			key2 := store.IdemKey{TenantID: "t1", Scope: "tenant", Key: "k2"}
			st.down.Store(true)
			if _, _, err := k.Do(ctx, key2, fp, func() (idempotency.Response, error) { return idempotency.Response{}, errDown }); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("failed operation: %v", err)
			}
			st.down.Store(false)
			testutil.EventuallyNil(t, 15*time.Second, func() error {
				_, replayed, err := k.Do(ctx, key2, fp, func() (idempotency.Response, error) {
					return idempotency.Response{Status: 201}, nil
				})
				if err != nil {
					return err
				}
				if replayed {
					return errors.New("replayed a response the failed operation never had")
				}
				return nil
			})
		})
	}
}

// deadlineOutcomes is a real store whose writes of an outcome fail, as a
// stalled database's do, recording how long the first write was given.
type deadlineOutcomes struct {
	store.IdempotencyStore
	first atomic.Int64 // ms the first write's context had left, +1
}

func (d *deadlineOutcomes) CompleteIdempotency(ctx context.Context, k store.IdemKey, status int, body []byte, headers json.RawMessage) error {
	if dl, ok := ctx.Deadline(); ok {
		d.first.CompareAndSwap(0, time.Until(dl).Milliseconds()+1)
	}
	return errDown
}

// The outcome of a request whose context ended while it ran (its deadline
// passed during a stall) is written first with a 1 s bound, not 5 s: the
// late answer waited another 5 s on a stalled store, 35 s in all against
// the 30 s request deadline. A request still within its deadline keeps
// the 5 s. Either way the write goes on in the background.
func TestLateOutcomesWaitLittleForTheStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		ended    bool
		min, max int64 // ms the first write was given, +1
	}{
		{"request ended", true, 1, 1001},
		{"request within its deadline", false, 1001, 5001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &deadlineOutcomes{IdempotencyStore: teststore.Open(t, "sqlite")}
			k := newKeeper(t, st)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			key := store.IdemKey{TenantID: "t1", Scope: "tenant", Key: "late"}
			resp, _, err := k.Do(ctx, key, "fp", func() (idempotency.Response, error) {
				if tc.ended {
					cancel()
				}
				return idempotency.Response{Status: 201}, nil
			})
			if err != nil || resp.Status != 201 {
				t.Fatalf("%+v %v, want the operation's 201", resp, err)
			}
			if got := st.first.Load(); got < tc.min || got > tc.max {
				t.Fatalf("the first write of the outcome was given %d ms, want %d to %d", got-1, tc.min-1, tc.max-1)
			}
		})
	}
}
