package projection

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

const migrateYAML = `
source: account
factTypes: [deposit]
timeWindow: minute
groupBy: [data.country]
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: sum}
  - {field: data.amount, function: min}
  - {field: data.user, function: count_distinct}
materialize: true
storageVersion: %d
rollup: {enabled: true}
`

// migrationFacts returns n facts in n distinct minutes (so n buckets) over
// two countries.
func migrationFacts(n int) []Fact {
	start := ms("2024-02-28T20:00:00Z")
	facts := make([]Fact, n)
	for i := range facts {
		facts[i] = fact(fmt.Sprintf("fct_%05d", i), "deposit", start+int64(i)*msMinute, map[string]any{
			"country": []string{"US", "DE"}[i%2], "amount": num(fmt.Sprintf("%d.%02d", i, i%100)), "user": fmt.Sprintf("u%d", i%37)})
	}
	return facts
}

// TestMigration migrates 1 to 2 (config change) and back (detected
// mismatch), with the three facts, on both states.
func TestMigration(t *testing.T) {
	t.Parallel()
	for _, kind := range stateKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := kind.new(t)
			facts := migrationFacts(300)
			clk := newClock(time.UnixMilli(facts[len(facts)-1].Timestamp + msHour))
			var ev1, ev2 emitted
			v1 := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, 1)), EngineOptions{State: st, Emitter: &ev1, Now: clk.Now, Source: SliceSource(facts)})
			v2 := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, 2)), EngineOptions{State: st, Emitter: &ev2, Now: clk.Now, Source: SliceSource(facts)})
			opts := &ProcessOptions{ProjectionKey: "m"}
			if _, err := v1.ProcessIncrementalBatch(ctx, facts[:299], opts); err != nil {
				t.Fatal(err)
			}
			before, err := v1.Query(ctx, "m", QueryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if keys, _ := st.Keys(ctx, "m"); len(keys) != 1 {
				t.Fatalf("format 1 keys: %v", keys)
			}

			// Processing with storageVersion 2 migrates first.
			if err := v2.ProcessIncremental(ctx, facts[299], opts); err != nil {
				t.Fatal(err)
			}
			if got := ev2.types(); !reflect.DeepEqual(got, []string{MigrationStarted, MigrationCompleted}) {
				t.Fatalf("facts emitted: %v", got)
			}
			done := ev2.facts[1].Data
			// 299 minute buckets plus the sealed hours and day.
			buckets, _ := done["bucket_count"].(int64)
			if _, ok := done["duration_ms"].(int64); !ok || buckets < 300 || done["from_version"] != int64(1) || done["to_version"] != int64(2) || done["projection_key"] != "m" {
				t.Fatalf("completed fact data: %v", done)
			}
			keys, _ := st.Keys(ctx, "m")
			keys = plainKeys(kind.name, keys)
			// The fact processed after the migration added one minute bucket.
			if len(keys) != int(buckets)+1 || !strings.Contains(strings.Join(keys, " "), "m:minute:2024-02-28T20:00:US") {
				t.Fatalf("format 2 keys (%d, want %d): %v", len(keys), buckets, keys[:min(5, len(keys))])
			}
			after, err := v2.Query(ctx, "m", QueryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			all, _ := v2.Process(facts, nil)
			if js(after) != js(all) {
				t.Fatalf("after migration:\n%s\nwant\n%s", js(after), js(all))
			}
			for k, v := range before {
				if k != "2024-02-29T00:59:DE" && js(after[k]) != js(v) {
					t.Fatalf("bucket %s changed: %s -> %s", k, js(v), js(after[k]))
				}
			}
			// Levels sealed after the migration take their sketches from
			// what the migration wrote for buckets not sealed yet.
			clk.Set(time.UnixMilli(facts[len(facts)-1].Timestamp).AddDate(0, 2, 0))
			if _, err := v2.Rollup(ctx, "m", nil); err != nil {
				t.Fatal(err)
			}
			for _, q := range []QueryOptions{{Aggregate: true}, {Aggregate: true, From: facts[100].Timestamp}} {
				if v, err := v2.Verify(ctx, "m", q); err != nil || !v.Consistent {
					t.Fatalf("verify %+v after sealing: %v %v", q, err, v.Drift)
				}
			}
			agg2, _ := v2.Query(ctx, "m", QueryOptions{Aggregate: true})

			// The format-1 engine finds format 2 stored and migrates back.
			back, err := v1.Query(ctx, "m", QueryOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if js(back) != js(all) {
				t.Fatalf("after migrating back:\n%s\nwant\n%s", js(back), js(all))
			}
			if got := ev1.types(); !reflect.DeepEqual(got, []string{MigrationStarted, MigrationCompleted}) {
				t.Fatalf("facts emitted by the format-1 engine: %v", got)
			}
			if v, _ := st.StorageVersion(ctx, "m"); v != 1 {
				t.Fatalf("storage version %d after migrating back", v)
			}
			if keys, _ := st.Keys(ctx, "m"); len(keys) != 1 {
				t.Fatalf("keys after migrating back: %d", len(keys))
			}
			agg1, _ := v1.Query(ctx, "m", QueryOptions{Aggregate: true})
			if js(agg1) != js(agg2) {
				t.Fatalf("aggregates differ across formats: %s vs %s", js(agg1), js(agg2))
			}
			// Dedupe records survive migrations.
			if n, err := v1.ProcessIncrementalBatch(ctx, facts, opts); err != nil || n != 0 {
				t.Fatalf("re-applied %d facts after migrations (%v)", n, err)
			}
			if v, err := v1.Verify(ctx, "m", QueryOptions{}); err != nil || !v.Consistent {
				t.Fatalf("verify: %v %v", err, v.Drift)
			}
		})
	}
}

var errInjected = errors.New("injected fault")

// TestMigrationFailure forces a failure in the middle of a migration (in
// both directions): the original stays readable and active (the engine
// that failed answers and writes from it), the partial copy is removed,
// projection.migration_failed is emitted once, the migration is not tried
// again before its wait, and then succeeds.
func TestMigrationFailure(t *testing.T) {
	t.Parallel()
	for _, kind := range stateKinds {
		for _, dir := range [][2]int{{1, 2}, {2, 1}} {
			t.Run(fmt.Sprintf("%s/%d-to-%d", kind.name, dir[0], dir[1]), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				st := kind.new(t)
				facts := migrationFacts(700) // several migration steps
				clk := newClock(time.UnixMilli(facts[0].Timestamp))
				from := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, dir[0])), EngineOptions{State: st, Now: clk.Now})
				var ev emitted
				to := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, dir[1])), EngineOptions{State: st, Now: clk.Now, Emitter: &ev})
				if _, err := from.ProcessIncrementalBatch(ctx, facts, &ProcessOptions{ProjectionKey: "f"}); err != nil {
					t.Fatal(err)
				}
				orig, _ := from.Query(ctx, "f", QueryOptions{})
				origKeys, _ := st.Keys(ctx, "f")
				var rawBefore []string
				if rs, ok := st.(*RedisState); ok {
					rawBefore = scanKeys(t, rs, "test:f*")
				}
				steps := 0
				to.faults = func(step int) error {
					steps++
					if step == 1 {
						return errInjected
					}
					return nil
				}
				served, err := to.Query(ctx, "f", QueryOptions{})
				if err != nil || js(served) != js(orig) {
					t.Fatalf("query during a failed migration: %v, %s", err, js(served))
				}
				if steps != 2 {
					t.Fatalf("fault hook ran %d times, want 2 (the failure is mid-migration)", steps)
				}
				if got := ev.types(); !reflect.DeepEqual(got, []string{MigrationStarted, MigrationFailed}) {
					t.Fatalf("facts emitted: %v", got)
				}
				if msg, _ := ev.facts[1].Data["error"].(string); !strings.Contains(msg, "injected fault") {
					t.Fatalf("failed fact data: %v", ev.facts[1].Data)
				}
				if v, _ := st.StorageVersion(ctx, "f"); v != dir[0] {
					t.Fatalf("storage version %d after a failed migration, want %d", v, dir[0])
				}
				if keys, _ := st.Keys(ctx, "f"); !reflect.DeepEqual(keys, origKeys) {
					t.Fatalf("keys changed by a failed migration: %d -> %d", len(origKeys), len(keys))
				}
				if rs, ok := st.(*RedisState); ok {
					// No partial copy is left behind: Redis holds exactly
					// the keys it held before.
					if after := scanKeys(t, rs, "test:f*"); !reflect.DeepEqual(after, rawBefore) {
						t.Fatalf("Redis keys changed by a failed migration: %d -> %d", len(rawBefore), len(after))
					}
				}
				still, err := from.Query(ctx, "f", QueryOptions{})
				if err != nil || js(still) != js(orig) {
					t.Fatalf("original not readable after the failure: %v", err)
				}
				// Until its wait is over, the engine does not try again: it
				// answers, and writes, in the stored format.
				to.faults = nil
				late := Fact{ID: "fct_late", Type: "deposit", Timestamp: facts[0].Timestamp, Data: map[string]any{"country": "US", "amount": num("1"), "user": "late"}}
				if err := to.ProcessIncremental(ctx, late, &ProcessOptions{ProjectionKey: "f"}); err != nil {
					t.Fatalf("write during the wait: %v", err)
				}
				if got := ev.types(); !reflect.DeepEqual(got, []string{MigrationStarted, MigrationFailed}) {
					t.Fatalf("tried again before the wait: %v", got)
				}
				if v, _ := st.StorageVersion(ctx, "f"); v != dir[0] {
					t.Fatalf("storage version %d during the wait, want %d", v, dir[0])
				}
				withLate, err := from.Query(ctx, "f", QueryOptions{})
				if err != nil || js(withLate) == js(orig) {
					t.Fatalf("the write during the wait is not in the stored format: %v", err)
				}
				// Migrate tries at once and reports the failure.
				to.faults = func(step int) error {
					if step == 1 {
						return errInjected
					}
					return nil
				}
				if err := to.Migrate(ctx, "f", nil); !errors.Is(err, ErrMigration) || !errors.Is(err, errInjected) {
					t.Fatalf("Migrate: got %v, want the injected fault wrapped in ErrMigration", err)
				}
				to.faults = nil
				// After the wait, without the fault, the migration succeeds.
				clk.mu.Lock()
				clk.now = clk.now.Add(migrationRetryMax)
				clk.mu.Unlock()
				got, err := to.Query(ctx, "f", QueryOptions{})
				if err != nil || js(got) != js(withLate) {
					t.Fatalf("migration after the failure: %v", err)
				}
				if types := ev.types(); !reflect.DeepEqual(types, []string{MigrationStarted, MigrationFailed, MigrationStarted, MigrationFailed, MigrationStarted, MigrationCompleted}) {
					t.Fatalf("facts emitted: %v", types)
				}
			})
		}
	}
}

// TestWritesWaitForMigration holds a migration in the middle and checks
// that a writer in another engine waits for it, then applies its fact in
// the new format.
func TestWritesWaitForMigration(t *testing.T) {
	t.Parallel()
	for _, kind := range stateKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := kind.new(t)
			facts := migrationFacts(600)
			v1 := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, 1)), EngineOptions{State: st})
			if _, err := v1.ProcessIncrementalBatch(ctx, facts[:599], &ProcessOptions{ProjectionKey: "w"}); err != nil {
				t.Fatal(err)
			}
			migrator := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, 2)), EngineOptions{State: st})
			writer := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, 2)), EngineOptions{State: st})
			inside, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			migrator.faults = func(step int) error {
				once.Do(func() { close(inside); <-release })
				return nil
			}
			var wg sync.WaitGroup
			wg.Add(2)
			var migErr, writeErr error
			go func() { defer wg.Done(); migErr = migrator.Migrate(ctx, "w", nil) }()
			<-inside
			wrote := make(chan struct{})
			go func() {
				defer wg.Done()
				writeErr = writer.ProcessIncremental(ctx, facts[599], &ProcessOptions{ProjectionKey: "w"})
				close(wrote)
			}()
			select {
			case <-wrote:
				t.Fatalf("the write finished during the migration (%v)", writeErr)
			case <-time.After(100 * time.Millisecond):
			}
			close(release)
			wg.Wait()
			if migErr != nil || writeErr != nil {
				t.Fatalf("migrate: %v, write: %v", migErr, writeErr)
			}
			got, _ := writer.Query(ctx, "w", QueryOptions{Aggregate: true})
			if got["aggregated"].(map[string]any)["count"] != int64(600) {
				t.Fatalf("after the migration: %s", js(got))
			}
		})
	}
}

func scanKeys(t *testing.T, rs *RedisState, pattern string) []string {
	t.Helper()
	keys, err := rs.rdb.Keys(context.Background(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return keys
}

// TestFailedMigrationDoneElsewhere: an engine whose migration failed
// reports no failure once another engine has migrated the state, and uses
// the new format.
func TestFailedMigrationDoneElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := NewMemoryState()
	facts := migrationFacts(50)
	v1 := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, 1)), EngineOptions{State: st})
	if _, err := v1.ProcessIncrementalBatch(ctx, facts, &ProcessOptions{ProjectionKey: "e"}); err != nil {
		t.Fatal(err)
	}
	failing := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, 2)), EngineOptions{State: st})
	failing.faults = func(int) error { return errInjected }
	if err := failing.Migrate(ctx, "e", nil); !errors.Is(err, ErrMigration) {
		t.Fatalf("failing migration: %v", err)
	}
	other := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, 2)), EngineOptions{State: st})
	if err := other.Migrate(ctx, "e", nil); err != nil {
		t.Fatalf("the other engine's migration: %v", err)
	}
	if err := failing.Migrate(ctx, "e", nil); err != nil {
		t.Fatalf("after the other engine migrated: %v", err)
	}
	if v, _ := st.StorageVersion(ctx, "e"); v != 2 {
		t.Fatalf("storage version %d, want 2", v)
	}
}

// TestRetryOfAFailedMigrationHoldsNoReader: while one caller tries a
// failed migration again, another query of the same engine answers from
// the original at once instead of waiting for the attempt.
func TestRetryOfAFailedMigrationHoldsNoReader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := NewMemoryState()
	facts := migrationFacts(50)
	clk := newClock(time.UnixMilli(facts[0].Timestamp))
	v1 := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, 1)), EngineOptions{State: st, Now: clk.Now})
	if _, err := v1.ProcessIncrementalBatch(ctx, facts, &ProcessOptions{ProjectionKey: "r"}); err != nil {
		t.Fatal(err)
	}
	orig, err := v1.Query(ctx, "r", QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, mustConfig(t, fmt.Sprintf(migrateYAML, 2)), EngineOptions{State: st, Now: clk.Now})
	e.faults = func(int) error { return errInjected }
	if err := e.Migrate(ctx, "r", nil); !errors.Is(err, ErrMigration) {
		t.Fatalf("first attempt: %v", err)
	}
	// The retry is due; the attempt holds in its first step until released.
	clk.mu.Lock()
	clk.now = clk.now.Add(migrationRetryMax)
	clk.mu.Unlock()
	entered, release := make(chan struct{}), make(chan struct{})
	e.faults = func(step int) error {
		if step == 0 {
			close(entered)
			<-release
		}
		return errInjected
	}
	retried := make(chan error, 1)
	go func() {
		_, err := e.Query(ctx, "r", QueryOptions{})
		retried <- err
	}()
	<-entered
	answered := make(chan error, 1)
	go func() {
		got, err := e.Query(ctx, "r", QueryOptions{})
		if err == nil && js(got) != js(orig) {
			err = fmt.Errorf("answered %s, want %s", js(got), js(orig))
		}
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("query during the retry: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a query waited for the retry of a failed migration")
	}
	close(release)
	if err := <-retried; err != nil {
		t.Fatalf("the retrying query: %v", err)
	}
}
