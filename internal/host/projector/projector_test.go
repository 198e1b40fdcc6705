package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/clock/clocktest"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/host/projection"
	"github.com/factline/factline/internal/host/projector"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const tenant = "t1"

// hour0 is 2024-01-15T10:00:00Z.
const hour0 = int64(1705312800000)

const settings = `{"source": "contact", "factTypes": ["call"], "timeWindow": "minute", "groupBy": ["data.channel"],
 "aggregations": [{"field": "count", "function": "count"}, {"field": "data.duration", "function": "sum"},
  {"field": "data.who", "function": "count_distinct"}],
 "materialize": true, "storageVersion": %d}`

func redisState(t *testing.T) projection.CachedState {
	t.Helper()
	opt, err := redis.ParseURL(testutil.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return projection.NewRedisState(rdb).WithPrefix("test:")
}

// stateFor gives each backend a real cached state: in process beside
// SQLite, Redis beside Postgres, as the product pairs them.
func stateFor(t *testing.T, backend string) projection.CachedState {
	if backend == "postgres" {
		return redisState(t)
	}
	return projection.NewMemoryState()
}

func newService(t *testing.T, st store.Store, state projection.CachedState) *projector.Service {
	t.Helper()
	s, err := projector.New(projector.Options{Store: st, State: state, SyncInterval: 50 * time.Millisecond, SweepInterval: 200 * time.Millisecond, RetireGrace: 300 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, BatchSize: 64, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	return s
}

func createContact(t *testing.T, st store.Store, id string) {
	t.Helper()
	err := st.CreateEntity(context.Background(), &store.Entity{TenantID: tenant, ID: id, Type: "contact", Data: json.RawMessage(`{}`), CreatedAt: hour0, UpdatedAt: hour0})
	if err != nil {
		t.Fatal(err)
	}
}

var factSeq struct {
	sync.Mutex
	n int
}

// factsSoFar is the number of call facts appendCalls has made, the base
// of the next ones' sequence numbers.
func factsSoFar() int {
	factSeq.Lock()
	defer factSeq.Unlock()
	return factSeq.n
}

// appendCalls appends n call facts to c1, spread over 90 minutes, two
// channels and 7 callers; every fifth is of another type.
func appendCalls(t *testing.T, st store.Store, n int) {
	t.Helper()
	items := make([]store.Append, 0, n)
	factSeq.Lock()
	for i := 0; i < n; i++ {
		factSeq.n++
		k := factSeq.n
		typ := "call"
		if k%5 == 0 {
			typ = "note"
		}
		data := fmt.Sprintf(`{"channel": %q, "duration": %d.%d, "who": "p%d"}`, []string{"phone", "video"}[k%2], k%40, k%10, k%7)
		items = append(items, store.Append{Fact: store.Fact{ID: fmt.Sprintf("fct_%08d", k), TenantID: tenant, EntityID: "c1", Type: typ,
			Timestamp: hour0 + int64(k*7919%90)*60_000, Data: json.RawMessage(data), CreatedAt: hour0}})
	}
	factSeq.Unlock()
	for len(items) > 0 {
		m := min(len(items), 100)
		res, err := st.AppendFacts(context.Background(), items[:m])
		if err != nil {
			t.Error(err)
			return
		}
		for _, r := range res {
			if r.Err != nil {
				t.Error(r.Err)
			}
		}
		items = items[m:]
	}
}

func createConfig(t *testing.T, st store.Store, id string, storageVersion int) {
	t.Helper()
	createNamedConfig(t, st, id, "calls", storageVersion)
}

func createNamedConfig(t *testing.T, st store.Store, id, name string, storageVersion int) {
	t.Helper()
	err := st.CreateConfig(context.Background(), &store.Config{TenantID: tenant, ID: id, Version: 1, Type: projector.ConfigType, Name: name,
		ScopeType: projector.ScopePlatform, Settings: json.RawMessage(fmt.Sprintf(settings, storageVersion)), Status: store.ConfigActive,
		EffectiveAt: hour0, CreatedAt: time.Now().UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
}

// putVersion stores the next version of cfg_calls with the given
// settings and returns it.
func putVersion(t *testing.T, st store.Store, settingsJSON string) store.Config {
	t.Helper()
	cur, err := st.GetConfig(context.Background(), tenant, "cfg_calls")
	if err != nil {
		t.Fatal(err)
	}
	next := *cur
	next.Version++
	next.Settings = json.RawMessage(settingsJSON)
	next.CreatedAt = time.Now().UnixMilli()
	if err := st.PutConfigVersion(context.Background(), &next); err != nil {
		t.Fatal(err)
	}
	return next
}

// answer is a query's rows and meta.
type answer struct {
	rows []any
	meta map[string]any
}

func query(t *testing.T, s *projector.Service, mode string, aggregate bool) answer {
	t.Helper()
	return queryNamed(t, s, "calls", mode, aggregate)
}

func queryNamed(t *testing.T, s *projector.Service, name, mode string, aggregate bool) answer {
	t.Helper()
	rows, meta, err := s.Query(context.Background(), tenant, name, map[string]any{"mode": mode, "aggregate": aggregate})
	if err != nil {
		t.Fatalf("query %s: %v", mode, err)
	}
	return answer{rows, meta}
}

// waitConsistent waits until the materialized rows equal the rows
// computed from the facts (the stream is asynchronous) and the
// aggregated count is want.
func waitConsistent(t *testing.T, s *projector.Service, want int) answer {
	t.Helper()
	return waitConsistentNamed(t, s, "calls", want)
}

func waitConsistentNamed(t *testing.T, s *projector.Service, name string, want int) answer {
	t.Helper()
	var mat answer
	testutil.EventuallyNil(t, 60*time.Second, func() error {
		var comp answer
		mat, comp = queryNamed(t, s, name, "materialized", false), queryNamed(t, s, name, "compute", false)
		agg := queryNamed(t, s, name, "materialized", true)
		count := fmt.Sprint(agg.rows[0].(map[string]any)["count"])
		if reflect.DeepEqual(mat.rows, comp.rows) && count == fmt.Sprint(want) && mat.meta["ready"] == true {
			return nil
		}
		return fmt.Errorf("materialized results do not match the facts: aggregated count %s, want %d\nmaterialized %v\ncomputed %v", count, want, mat.rows, comp.rows)
	})
	return mat
}

// stop stops s and fails t when it does not stop cleanly.
func stop(t *testing.T, s *projector.Service) {
	t.Helper()
	if err := s.Stop(context.Background()); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// waitCheckpoints waits until the store holds n consumer checkpoints. A
// runtime saves its checkpoint after applying a batch, so results can be
// consistent a moment before the checkpoint is written.
func waitCheckpoints(t *testing.T, st store.Store, n int) map[string]int64 {
	t.Helper()
	var cps map[string]int64
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		var err error
		if cps, err = st.ListCheckpoints(context.Background()); err != nil {
			return err
		}
		if len(cps) != n {
			return fmt.Errorf("checkpoints: %v, want %d", cps, n)
		}
		return nil
	})
	return cps
}

// calls counts the call facts among the first n appended by appendCalls
// from a fresh start of factSeq at base.
func calls(base, n int) int {
	c := 0
	for k := base + 1; k <= base+n; k++ {
		if k%5 != 0 {
			c++
		}
	}
	return c
}

// TestBackfillStreamRestartExactlyOnce: a projection created after facts
// exist backfills them, facts appended while it runs stream in, and after
// a restart whose checkpoint went back (a crash between handling a batch
// and saving its checkpoint) the replayed facts count once: materialized
// results equal results computed from the facts, on both stores.
func TestBackfillStreamRestartExactlyOnce(t *testing.T) {
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			loc := teststore.Location(t, backend)
			st := teststore.OpenAt(t, backend, loc)
			defer st.Close()
			state := stateFor(t, backend)
			createContact(t, st, "c1")
			base := factsSoFar()

			appendCalls(t, st, 600)
			createConfig(t, st, "cfg_calls", 2)
			s := newService(t, st, state)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // writers keep going while it backfills
				defer wg.Done()
				appendCalls(t, st, 200)
			}()
			wg.Wait()
			waitConsistent(t, s, calls(base, 800))
			stop(t, s)

			appendCalls(t, st, 100)
			cps, err := st.ListCheckpoints(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var consumer string
			for name := range cps {
				consumer = name
			}
			if len(cps) != 1 || cps[consumer] < 500 {
				t.Fatalf("checkpoints: %v", cps)
			}
			if err := st.SetCheckpoint(context.Background(), consumer, cps[consumer]-400); err != nil {
				t.Fatal(err)
			}
			st2 := teststore.OpenAt(t, backend, loc)
			defer st2.Close()
			s2 := newService(t, st2, state)
			waitConsistent(t, s2, calls(base, 900))
		})
	}
}

// TestTwoProcessesOneState: two projector services on two connections to
// one Postgres and one Redis run the same projection side by side while
// facts arrive; each fact counts once.
func TestTwoProcessesOneState(t *testing.T) {
	loc := teststore.Location(t, "postgres")
	st1, st2 := teststore.OpenAt(t, "postgres", loc), teststore.OpenAt(t, "postgres", loc)
	defer st1.Close()
	defer st2.Close()
	state := redisState(t)
	createContact(t, st1, "c1")
	base := factsSoFar()
	createConfig(t, st1, "cfg_calls", 2)
	s1, s2 := newService(t, st1, state), newService(t, st2, state)
	var wg sync.WaitGroup
	for _, st := range []store.Store{st1, st2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				appendCalls(t, st, 60)
			}
		}()
	}
	wg.Wait()
	want := calls(base, 600)
	a1, a2 := waitConsistent(t, s1, want), waitConsistent(t, s2, want)
	if !reflect.DeepEqual(a1.rows, a2.rows) {
		t.Errorf("the two processes answer differently:\n%v\n%v", a1.rows, a2.rows)
	}
}

// TestOlderVersionFromAnOverlappingSyncIsIgnored: a sync that listed the
// configs before a newer version was applied (the background sync beside
// a caller's Sync) does not put the older version back.
func TestOlderVersionFromAnOverlappingSyncIsIgnored(t *testing.T) {
	st := teststore.Open(t, "sqlite")
	createContact(t, st, "c1")
	base := factsSoFar()
	appendCalls(t, st, 20)
	createConfig(t, st, "cfg_calls", 1)
	first, err := st.GetConfig(context.Background(), tenant, "cfg_calls")
	if err != nil {
		t.Fatal(err)
	}
	s := newService(t, st, projection.NewMemoryState())
	waitConsistent(t, s, calls(base, 20))
	next := putVersion(t, st, fmt.Sprintf(settings, 2))
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.ApplyConfig(context.Background(), first)
	for _, st := range s.Statuses(tenant) {
		if st.Version != next.Version {
			t.Fatalf("after a stale apply of version %d: %+v, want version %d", first.Version, st, next.Version)
		}
	}
	if after := query(t, s, "materialized", false); fmt.Sprint(after.meta["config_version"]) != fmt.Sprint(next.Version) {
		t.Fatalf("after a stale apply of version %d: meta %v", first.Version, after.meta)
	}
}

// TestStorageVersionChangeMigrates: a new version that changes only
// storageVersion keeps the projection's cached state and migrates it (1 to
// 2 and back), recording the migration facts; results do not change.
func TestStorageVersionChangeMigrates(t *testing.T) {
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			st := teststore.Open(t, backend)
			state := stateFor(t, backend)
			createContact(t, st, "c1")
			base := factsSoFar()
			appendCalls(t, st, 300)
			createConfig(t, st, "cfg_calls", 1)
			s := newService(t, st, state)
			before := waitConsistent(t, s, calls(base, 300))

			for i, sv := range []int{2, 1} {
				next := putVersion(t, st, fmt.Sprintf(settings, sv))
				if err := s.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
				after := query(t, s, "materialized", false)
				if fmt.Sprint(after.meta["config_version"]) != fmt.Sprint(next.Version) || after.meta["ready"] != true {
					t.Fatalf("after version %d: meta %v", next.Version, after.meta)
				}
				if !reflect.DeepEqual(after.rows, before.rows) {
					t.Errorf("storageVersion %d: results changed:\n%v\n%v", sv, after.rows, before.rows)
				}
				// The migrating engine records its completion just after the
				// switch that lets the query through.
				testutil.EventuallyNil(t, 10*time.Second, func() error {
					var started, completed int
					err := st.ScanFacts(context.Background(), store.FactScan{TenantID: tenant, Types: projection.FactTypes()}, func(f *store.Fact) error {
						switch f.Type {
						case projection.MigrationStarted:
							started++
						case projection.MigrationCompleted:
							completed++
						}
						return nil
					})
					if err != nil {
						return err
					}
					if started != i+1 || completed != i+1 {
						return fmt.Errorf("after migration %d: %d started and %d completed facts", i+1, started, completed)
					}
					return nil
				})
			}
		})
	}
}

// TestLeftOverStateIsSwept: a process that stops after a new version
// started backfilling, but before it retired the old version, leaves the
// old version's cached state and checkpoint behind; the next process
// deletes them once the new version is ready, and keeps its own.
func TestLeftOverStateIsSwept(t *testing.T) {
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			st := teststore.Open(t, backend)
			state := stateFor(t, backend)
			ctx := context.Background()
			createContact(t, st, "c1")
			base := factsSoFar()
			appendCalls(t, st, 100)
			createConfig(t, st, "cfg_calls", 2)
			s1 := newService(t, st, state)
			waitConsistent(t, s1, calls(base, 100))
			stop(t, s1)
			oldCPs, err := st.ListCheckpoints(ctx)
			if err != nil || len(oldCPs) != 1 {
				t.Fatalf("checkpoints after the first process: %v, %v", oldCPs, err)
			}
			var oldKey string
			for name := range oldCPs {
				oldKey = strings.TrimPrefix(name, "projection:")
			}
			if keys, err := state.Keys(ctx, oldKey); err != nil || len(keys) == 0 {
				t.Fatalf("cached state of the first version: %v, %v", keys, err)
			}

			// Version 2 aggregates differently: new state.
			putVersion(t, st, strings.Replace(fmt.Sprintf(settings, 2), `"minute"`, `"hour"`, 1))
			s2 := newService(t, st, state)
			waitConsistent(t, s2, calls(base, 100))
			testutil.EventuallyNil(t, 30*time.Second, func() error {
				cps, err := st.ListCheckpoints(ctx)
				if err != nil {
					return err
				}
				if _, oldThere := cps["projection:"+oldKey]; oldThere || len(cps) != 1 {
					return fmt.Errorf("left-over checkpoint not swept: %v", cps)
				}
				return nil
			})
			if v, err := state.StorageVersion(ctx, oldKey); err != nil || v != 0 {
				t.Errorf("left-over cached state: storage version %d, %v; want none", v, err)
			}
			if got := query(t, s2, "materialized", true); fmt.Sprint(got.rows[0].(map[string]any)["count"]) != fmt.Sprint(calls(base, 100)) {
				t.Errorf("the current version lost state in the sweep: %v", got.rows)
			}
		})
	}
}

// TestStateDown: with the cached state unreachable, a materialized query is
// a 503 problem that says what still works, and compute mode answers.
func TestStateDown(t *testing.T) {
	st := teststore.Open(t, "sqlite")
	createContact(t, st, "c1")
	appendCalls(t, st, 20)
	createConfig(t, st, "cfg_calls", 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	s, err := projector.New(projector.Options{Store: st, State: projection.NewRedisState(rdb), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	_, _, err = s.Query(context.Background(), tenant, "calls", map[string]any{"mode": "verify"})
	var perr *problem.Error
	if !errors.As(err, &perr) || perr.Kind != problem.Unavailable || !strings.Contains(perr.Detail, "mode compute") {
		t.Fatalf("query with the state down: %v; want a 503 problem pointing to compute mode", err)
	}
	rows, meta, err := s.Query(context.Background(), tenant, "calls", map[string]any{"mode": "compute", "aggregate": true})
	if err != nil || meta["mode"] != "compute" || len(rows) != 1 {
		t.Fatalf("compute query with the state down: %v %v %v", rows, meta, err)
	}
}

// TestSupersededStateKeptForGrace: when a new version has caught up, the
// old version's cached state stays readable for the grace period (other
// processes may still serve it), then goes with its checkpoint.
func TestSupersededStateKeptForGrace(t *testing.T) {
	st := teststore.Open(t, "sqlite")
	state := projection.NewMemoryState()
	ctx := context.Background()
	createContact(t, st, "c1")
	base := factsSoFar()
	appendCalls(t, st, 50)
	createConfig(t, st, "cfg_calls", 2)
	const grace = 3 * time.Second
	s, err := projector.New(projector.Options{Store: st, State: state, SyncInterval: 50 * time.Millisecond, RetireGrace: grace,
		PollInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	waitConsistent(t, s, calls(base, 50))
	cps := waitCheckpoints(t, st, 1)
	var oldConsumer string
	for name := range cps {
		oldConsumer = name
	}
	oldKey := strings.TrimPrefix(oldConsumer, "projection:")

	putVersion(t, st, strings.Replace(fmt.Sprintf(settings, 2), `"minute"`, `"day"`, 1))
	var tookOver time.Time
	testutil.Eventually(t, 30*time.Second, "version 2 to take over", func() bool {
		a := query(t, s, "materialized", false)
		return fmt.Sprint(a.meta["config_version"]) == "2" && a.meta["ready"] == true
	})
	tookOver = time.Now()
	if keys, err := state.Keys(ctx, oldKey); err != nil || len(keys) == 0 {
		t.Fatalf("the superseded state went at once: %v %v", keys, err)
	}
	testutil.EventuallyNil(t, 30*time.Second, func() error {
		cps, err := st.ListCheckpoints(ctx)
		if err != nil {
			return err
		}
		if _, ok := cps[oldConsumer]; ok {
			return fmt.Errorf("the superseded checkpoint is still there: %v", cps)
		}
		return nil
	})
	if waited := time.Since(tookOver); waited < grace-time.Second {
		t.Errorf("the superseded state went %v after the take-over; the grace is %v", waited, grace)
	}
	if v, err := state.StorageVersion(ctx, oldKey); err != nil || v != 0 {
		t.Errorf("superseded state left: version %d, %v", v, err)
	}
}

// TestRollupTimerSealsQuietHours: with rollups on and no facts arriving,
// the runtime's timer seals a finished hour once the clock has passed it.
func TestRollupTimerSealsQuietHours(t *testing.T) {
	st := teststore.Open(t, "sqlite")
	state := projection.NewMemoryState()
	ctx := context.Background()
	clk := clocktest.New(time.UnixMilli(hour0 + 30*60_000).UTC())
	createContact(t, st, "c1")
	items := make([]store.Append, 0, 20)
	for i := range 20 {
		items = append(items, store.Append{Fact: store.Fact{ID: fmt.Sprintf("fct_roll_%02d", i), TenantID: tenant, EntityID: "c1", Type: "call",
			Timestamp: hour0 + int64(i)*60_000, Data: json.RawMessage(`{"channel": "phone", "duration": 1, "who": "p"}`), CreatedAt: hour0}})
	}
	if _, err := st.AppendFacts(ctx, items); err != nil {
		t.Fatal(err)
	}
	rollup := strings.Replace(fmt.Sprintf(settings, 2), `"materialize"`, `"rollup": {"enabled": true, "retention": {"minute": 0, "hour": 0, "day": 0, "month": 0}}, "materialize"`, 1)
	err := st.CreateConfig(ctx, &store.Config{TenantID: tenant, ID: "cfg_roll", Version: 1, Type: projector.ConfigType, Name: "calls",
		ScopeType: projector.ScopePlatform, Settings: json.RawMessage(rollup), Status: store.ConfigActive, EffectiveAt: hour0, CreatedAt: hour0})
	if err != nil {
		t.Fatal(err)
	}
	s, err := projector.New(projector.Options{Store: st, State: state, SyncInterval: 50 * time.Millisecond, RollupInterval: 50 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	waitConsistent(t, s, 20)
	cps := waitCheckpoints(t, st, 1)
	var key string
	for name := range cps {
		key = strings.TrimPrefix(name, "projection:")
	}
	hourKeys := func() int {
		keys, err := state.Keys(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range keys {
			if strings.Contains(k, ":hour:") {
				n++
			}
		}
		return n
	}
	// tick moves the clock and waits until the timer has sealed and set
	// itself again.
	tick := func(to time.Time) {
		t.Helper()
		rearmed := clk.Waiting()
		clk.Set(to)
		select {
		case <-rearmed:
		case <-time.After(30 * time.Second):
			t.Fatal("the rollup timer did not run after the clock moved")
		}
	}
	testutil.Eventually(t, 30*time.Second, "the rollup timer", func() bool { return clk.Waiters() == 1 })
	for i := 1; i <= 3; i++ { // timer ticks inside the hour
		tick(clk.Now().Add(50 * time.Millisecond))
		if n := hourKeys(); n != 0 {
			t.Fatalf("%d hour buckets sealed before the hour ended", n)
		}
	}
	tick(time.UnixMilli(hour0 + 2*3_600_000))
	if hourKeys() == 0 {
		t.Fatal("the finished hour was not sealed by the timer")
	}
	waitConsistent(t, s, 20)
	// The sealed hour answers the aggregate: its distinct count is the
	// sketch's, and the meta says so.
	if est := fmt.Sprint(query(t, s, "materialized", true).meta["estimated"]); est != "[who_distinct]" {
		t.Fatalf("estimates of an aggregate read from the sealed hour: %s", est)
	}
	if est, ok := query(t, s, "materialized", false).meta["estimated"]; ok {
		t.Fatalf("estimates of the minute buckets: %v", est)
	}
}

// TestQueriesFollowAcknowledgedConfigChanges: a query answers as the
// store's config says, not as the background sync last saw it. With a
// sync that would not come for an hour, a new version answers at once
// and an archived projection is not found at once (it had answered for
// up to a second after its DELETE was acknowledged).
func TestQueriesFollowAcknowledgedConfigChanges(t *testing.T) {
	st := teststore.Open(t, "sqlite")
	createContact(t, st, "c1")
	appendCalls(t, st, 10)
	createConfig(t, st, "cfg_calls", 1)
	s, err := projector.New(projector.Options{Store: st, State: projection.NewMemoryState(), SyncInterval: time.Hour,
		PollInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	query(t, s, "compute", true)

	next := putVersion(t, st, fmt.Sprintf(settings, 2))
	if got := query(t, s, "compute", true); fmt.Sprint(got.meta["config_version"]) != fmt.Sprint(next.Version) {
		t.Fatalf("after a new version: meta %v, want version %d", got.meta, next.Version)
	}

	// Renamed: the old name is not found at once, the new one is.
	cur, err := st.GetConfig(context.Background(), tenant, "cfg_calls")
	if err != nil {
		t.Fatal(err)
	}
	renamed := *cur
	renamed.Version++
	renamed.Name = "renamed"
	renamed.CreatedAt = time.Now().UnixMilli()
	if err := st.PutConfigVersion(context.Background(), &renamed); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Query(context.Background(), tenant, "calls", map[string]any{"mode": "compute"}); !strings.Contains(fmt.Sprint(err), "not found") {
		t.Fatalf("query by the old name after a rename: %v, want not found", err)
	}
	queryNamed(t, s, "renamed", "compute", true)

	if _, err := st.ArchiveConfig(context.Background(), tenant, "cfg_calls", time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"renamed", "cfg_calls"} {
		_, _, err := s.Query(context.Background(), tenant, ref, map[string]any{"mode": "compute"})
		var pe *problem.Error
		if !errors.As(err, &pe) || pe.Kind.Status != 404 {
			t.Fatalf("query %s of an archived projection: %v, want a 404", ref, err)
		}
	}
}
