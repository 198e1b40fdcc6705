package projector_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/projection"
	"github.com/factline/factline/internal/host/projector"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// lostState is a cached state and its marker that can be lost the way
// they are in production: a Redis flushed (or replaced), or in-process
// state gone with its process.
type lostState struct {
	state  projection.CachedState
	marker projector.Marker
	lose   func(t *testing.T) lostState
}

func lostStateFor(t *testing.T, backend string) lostState {
	if backend == "sqlite" {
		var mem func(*testing.T) lostState
		mem = func(*testing.T) lostState {
			return lostState{projection.NewMemoryState(), projector.NewMemoryMarker(), mem}
		}
		return mem(t)
	}
	opt, err := redis.ParseURL(testutil.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	var flush func(*testing.T) lostState
	ls := lostState{projection.NewRedisState(rdb).WithPrefix("test:"), projector.NewRedisMarker(rdb, "test-marker:"), nil}
	flush = func(t *testing.T) lostState {
		// FLUSHDB: the test's own logical database of the shared server.
		if err := rdb.FlushDB(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		return ls
	}
	ls.lose = flush
	return ls
}

func newMarkedService(t *testing.T, st store.Store, ls lostState) *projector.Service {
	t.Helper()
	return newMarkedServiceWatching(t, st, ls, 0)
}

// newMarkedServiceWatching is newMarkedService checking the marks every
// markInterval (0: the default).
func newMarkedServiceWatching(t *testing.T, st store.Store, ls lostState, markInterval time.Duration) *projector.Service {
	t.Helper()
	s, err := projector.New(projector.Options{Store: st, State: ls.state, Marker: ls.marker, SyncInterval: 50 * time.Millisecond,
		MarkInterval: markInterval, PollInterval: 100 * time.Millisecond, BatchSize: 64, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	return s
}

// TestLostStateRebuildsFromFirstFact: when the cached state is lost while
// the projection's checkpoint survives in the store (Redis flushed, or
// in-process state gone with a restart), the next start notices the
// missing mark and rebuilds from position 0, so materialized answers match
// the facts again without anyone deleting checkpoints by hand.
func TestLostStateRebuildsFromFirstFact(t *testing.T) {
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			loc := teststore.Location(t, backend)
			st := teststore.OpenAt(t, backend, loc)
			defer st.Close()
			ls := lostStateFor(t, backend)
			createContact(t, st, "c1")
			base := factsSoFar()
			appendCalls(t, st, 300)
			createConfig(t, st, "cfg_calls", 2)
			s := newMarkedService(t, st, ls)
			before := waitConsistent(t, s, calls(base, 300))
			stop(t, s)
			cps := waitCheckpoints(t, st, 1)
			for name, cp := range cps {
				if cp == 0 {
					t.Fatalf("checkpoint %s is 0: nothing to lose", name)
				}
			}

			ls = ls.lose(t)
			st2 := teststore.OpenAt(t, backend, loc)
			defer st2.Close()
			s2 := newMarkedService(t, st2, ls)
			after := waitConsistent(t, s2, calls(base, 300))
			if len(after.rows) != len(before.rows) {
				t.Fatalf("rebuilt rows: %d, before the loss %d", len(after.rows), len(before.rows))
			}
			appendCalls(t, st2, 50) // and it streams on from there
			waitConsistent(t, s2, calls(base, 350))
		})
	}
}

// TestStateLostWhileRunningRebuilds: a Redis that restarts empty (or is
// flushed) under a running projection loses the state and its mark
// together. The runtime notices the missing mark, stops answering from
// what it holds since (not ready) and reads again from the first fact,
// so materialized answers match the facts again without a restart.
func TestStateLostWhileRunningRebuilds(t *testing.T) {
	st, rdb, s, base := projectedOnRedis(t, 50*time.Millisecond)
	if err := rdb.FlushDB(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	appendCalls(t, st, 20) // applied to what is left: nothing
	waitConsistent(t, s, calls(base, 320))
}

// redisLostState is the cached state and marker of a projection kept in
// rdb.
func redisLostState(rdb *redis.Client) lostState {
	return lostState{state: projection.NewRedisState(rdb).WithPrefix("test:"), marker: projector.NewRedisMarker(rdb, "test-marker:")}
}

// projectedOnRedis starts a service checking its marks every markInterval over
// 300 calls projected into a Redis database of the test's own, and
// returns once its answers are consistent.
func projectedOnRedis(t *testing.T, markInterval time.Duration) (store.Store, *redis.Client, *projector.Service, int) {
	t.Helper()
	st := teststore.Open(t, "sqlite")
	opt, err := redis.ParseURL(testutil.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	createContact(t, st, "c1")
	base := factsSoFar()
	appendCalls(t, st, 300)
	createConfig(t, st, "cfg_calls", 2)
	s := newMarkedServiceWatching(t, st, redisLostState(rdb), markInterval)
	waitConsistent(t, s, calls(base, 300))
	return st, rdb, s, base
}

// redisSnapshot keeps every key of the test's database, as a snapshot
// (RDB) does; restore replaces the database with it, as a Redis
// restarted from that snapshot would.
func redisSnapshot(t *testing.T, rdb *redis.Client) (restore func()) {
	t.Helper()
	restoreVia := snapshotOf(t, rdb)
	return func() {
		t.Helper()
		if err := restoreVia(rdb); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshotOf keeps every key of rdb's database; restoreVia replaces the
// database with them through the client given, in one transaction (a
// Redis loads its snapshot before it serves).
func snapshotOf(t *testing.T, rdb *redis.Client) (restoreVia func(*redis.Client) error) {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	dumps := map[string]string{}
	for _, k := range keys {
		d, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		dumps[k] = d
	}
	return func(via *redis.Client) error {
		_, err := via.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.FlushDB(ctx)
			for k, d := range dumps {
				pipe.RestoreReplace(ctx, k, 0, d)
			}
			return nil
		})
		return err
	}
}

// TestStateRestoredFromAnOlderSnapshotCatchesUp: a Redis restarted from
// an older snapshot keeps the mark but not the facts applied after the
// snapshot, while the checkpoints in the store have passed them. A running
// runtime sees the state's newest fact go back and reads again from it; a
// process started on such a state does the same; either way materialized
// answers match the facts again.
func TestStateRestoredFromAnOlderSnapshotCatchesUp(t *testing.T) {
	for _, when := range []string{"while running", "with facts arriving", "at start"} {
		t.Run(when, func(t *testing.T) {
			// With facts arriving, the mark checks are an hour apart: the
			// next batch must notice before its facts hide the loss.
			markInterval := 50 * time.Millisecond
			if when == "with facts arriving" {
				markInterval = time.Hour
			}
			st, rdb, s, base := projectedOnRedis(t, markInterval)
			restore := redisSnapshot(t, rdb)
			appendCalls(t, st, 40)
			waitConsistent(t, s, calls(base, 340))
			switch when {
			case "while running":
				restore()
				waitConsistent(t, s, calls(base, 340))
				appendCalls(t, st, 10)
				waitConsistent(t, s, calls(base, 350))
				return
			case "with facts arriving":
				restore()
				appendCalls(t, st, 10)
				waitConsistent(t, s, calls(base, 350))
				return
			}
			head, err := st.HeadPosition(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			testutil.EventuallyNil(t, 30*time.Second, func() error {
				cps, err := st.ListCheckpoints(context.Background())
				if err != nil {
					return err
				}
				for name, cp := range cps {
					if cp < head {
						return fmt.Errorf("checkpoint %s at %d, head %d", name, cp, head)
					}
				}
				return nil
			})
			stop(t, s)
			restore()
			s2 := newMarkedService(t, st, redisLostState(rdb))
			waitConsistent(t, s2, calls(base, 340))
		})
	}
}

// restoreBeforeNextApply arms rdb so that the next pipeline it sends (the
// engine's apply calls travel in pipelines; the runtime's check of the
// state before a batch does not) first replaces the test's database with
// the keys it holds now: a Redis restarted from a snapshot while the
// apply call was on its way, after the runtime had checked the state.
func restoreBeforeNextApply(t *testing.T, rdb *redis.Client) (armed *atomic.Bool, fired <-chan struct{}) {
	t.Helper()
	restoreVia := snapshotOf(t, rdb)
	// A client of its own: the hook does not see its calls.
	other := redis.NewClient(rdb.Options())
	t.Cleanup(func() { other.Close() })
	armed = &atomic.Bool{}
	done := make(chan struct{})
	rdb.AddHook(restoreHook{before: func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		defer close(done)
		if err := restoreVia(other); err != nil {
			t.Errorf("restore: %v", err)
		}
	}})
	return armed, done
}

type restoreHook struct{ before func() }

func (h restoreHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h restoreHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h restoreHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.before()
		return next(ctx, cmds)
	}
}

// TestStateRestoredUnderAnApplyInFlight: the state goes back to an older
// snapshot after the runtime checked it before a batch and before the
// batch's apply reached Redis (a Redis down for a few seconds holds the
// call in the client's retries, then restarts from its snapshot and takes
// it). The apply must not land on the older state: its newest fact would
// move factsThroughId past the facts the state lost and hide the loss
// from every later check, in every process, for good.
func TestStateRestoredUnderAnApplyInFlight(t *testing.T) {
	st, rdb, s, base := projectedOnRedis(t, time.Hour)
	armed, fired := restoreBeforeNextApply(t, rdb) // holds 300 calls
	appendCalls(t, st, 40)
	waitConsistent(t, s, calls(base, 340))
	armed.Store(true)
	appendCalls(t, st, 10)
	select {
	case <-fired:
	case <-time.After(30 * time.Second):
		t.Fatal("no apply after the facts were appended")
	}
	waitConsistent(t, s, calls(base, 350))
}
