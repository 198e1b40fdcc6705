package projection

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/projection/internal/hll"
)

const distinctYAML = `
source: account
factTypes: [deposit]
timeWindow: hour
groupBy: [data.country]
aggregations:
  - {field: data.user, function: count_distinct}
materialize: true
storageVersion: %d
rollup: {enabled: true}
`

// TestDistinctIsExactInBaseBuckets counts hundreds of distinct values,
// sets a HyperLogLog miscounts, in base buckets and in aggregates of them:
// every count is exact, on every state, in both storage formats, after a
// migration either way, in compute mode, and verify finds no drift. Once
// the hours roll up into a day, the day bucket is the sketch's estimate.
func TestDistinctIsExactInBaseBuckets(t *testing.T) {
	t.Parallel()
	start := ms("2024-05-01T00:00:00Z")
	// Hour h, country c: users usr_<off>..usr_<off+n-1>, overlapping between
	// buckets so that unions differ from sums.
	type bucket struct {
		hour    int
		country string
		off, n  int
		key     string
	}
	buckets := []bucket{
		{0, "US", 0, 400, "2024-05-01T00:US"},
		{0, "DE", 300, 250, "2024-05-01T00:DE"},
		{1, "US", 100, 500, "2024-05-01T01:US"},
	}
	var facts []Fact
	union := map[string]bool{}
	for _, b := range buckets {
		for i := 0; i < b.n; i++ {
			u := fmt.Sprintf("usr_%d", b.off+i)
			union[u] = true
			facts = append(facts, fact(fmt.Sprintf("fct_%d_%s_%04d", b.hour, b.country, i), "deposit",
				start+int64(b.hour)*msHour+int64(i)*1000, map[string]any{"country": b.country, "user": u}))
		}
	}
	// The values are chosen so that a sketch miscounts them: otherwise
	// this test could not tell exact counts from estimates.
	for _, b := range append(buckets, bucket{off: 0, n: len(union)}) {
		var sk hll.Sketch
		for i := 0; i < b.n; i++ {
			sk.AddString(fmt.Sprintf("usr_%d", b.off+i))
		}
		if int(sk.Count()) == b.n {
			t.Fatalf("a sketch counts %d of these values exactly; choose others", b.n)
		}
	}

	want := func(t *testing.T, r Result, key string, n int) {
		t.Helper()
		b, ok := r[key].(map[string]any)
		if !ok {
			t.Fatalf("no bucket %s in %s", key, js(r))
		}
		if got := b["user_distinct"]; got != int64(n) {
			t.Fatalf("%s: user_distinct %v, want %d", key, got, n)
		}
	}
	check := func(t *testing.T, ctx context.Context, e *Engine, mode QueryMode, aggregates bool) {
		t.Helper()
		r, err := e.Query(ctx, "d", QueryOptions{Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range buckets {
			want(t, r, b.key, b.n)
		}
		if !aggregates {
			return
		}
		r, err = e.Query(ctx, "d", QueryOptions{Mode: mode, Aggregate: true})
		if err != nil {
			t.Fatal(err)
		}
		want(t, r, "aggregated", len(union))
		if est := Estimated(r); est != nil {
			t.Fatalf("exact counts listed as estimates: %v", est)
		}
		r, err = e.Query(ctx, "d", QueryOptions{Mode: mode, Aggregate: true, Groups: map[string]string{"data.country": "US"}})
		if err != nil {
			t.Fatal(err)
		}
		want(t, r, "aggregated", 600)
	}

	for _, kind := range stateKinds {
		for _, version := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/v%d", kind.name, version), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				st := kind.new(t)
				// The clock stays in the hours' day: nothing rolls up yet.
				clk := newClock(time.UnixMilli(start + 2*msHour))
				other := 3 - version
				e := mustEngine(t, mustConfig(t, fmt.Sprintf(distinctYAML, version)), EngineOptions{State: st, Now: clk.Now, Source: SliceSource(facts)})
				if _, err := e.ProcessIncrementalBatch(ctx, facts[:len(facts)/2], &ProcessOptions{ProjectionKey: "d"}); err != nil {
					t.Fatal(err)
				}
				for _, f := range facts[len(facts)/2:] {
					if err := e.ProcessIncremental(ctx, f, &ProcessOptions{ProjectionKey: "d"}); err != nil {
						t.Fatal(err)
					}
				}
				check(t, ctx, e, ModeMaterialized, true)
				check(t, ctx, e, ModeCompute, true)
				rep, err := e.Verify(ctx, "d", QueryOptions{Aggregate: true})
				if err != nil {
					t.Fatal(err)
				}
				if !rep.Consistent {
					t.Fatalf("verify: %v", rep.Drift)
				}

				// Migrating to the other format and back keeps the values.
				e2 := mustEngine(t, mustConfig(t, fmt.Sprintf(distinctYAML, other)), EngineOptions{State: st, Now: clk.Now, Source: SliceSource(facts)})
				check(t, ctx, e2, ModeMaterialized, true)
				check(t, ctx, e, ModeMaterialized, true)

				// Rolled up, the day is the sketch's estimate of the union,
				// the hours stay exact.
				clk.mu.Lock()
				clk.now = time.UnixMilli(start + 2*msDay)
				clk.mu.Unlock()
				if _, err := e.Rollup(ctx, "d", nil); err != nil {
					t.Fatal(err)
				}
				check(t, ctx, e, ModeMaterialized, false)
				r, err := e.Query(ctx, "d", QueryOptions{Aggregate: true, From: start, To: start + msDay - 1})
				if err != nil {
					t.Fatal(err)
				}
				var day hll.Sketch
				for u := range union {
					day.AddString(u)
				}
				if got := r["aggregated"].(map[string]any)["user_distinct"]; got != int64(day.Count()) {
					t.Fatalf("day from its rollup: %v, the sketch of its values says %d", got, day.Count())
				}
				if est := Estimated(r); !reflect.DeepEqual(est, []string{"user_distinct"}) {
					t.Fatalf("estimates of the day from its rollup: %v", est)
				}
				rep, err = e.Verify(ctx, "d", QueryOptions{Aggregate: true, From: start, To: start + msDay - 1})
				if err != nil {
					t.Fatal(err)
				}
				if !rep.Consistent {
					t.Fatalf("verify of the day: %v", rep.Drift)
				}
				if est := Estimated(rep.Materialized); !reflect.DeepEqual(est, []string{"user_distinct"}) {
					t.Fatalf("estimates verify reports for the day: %v", est)
				}
			})
		}
	}
}

// TestLongDistinctValuesAreKeptByHash: a base bucket's set holds at most
// 64 bytes per value, whatever the values' length, and still tells
// values apart.
func TestLongDistinctValuesAreKeptByHash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redisClient(t)
	st := NewRedisState(rdb).WithPrefix("long:")
	e := mustEngine(t, mustConfig(t, cfgYAML("day", "", "  - {field: data.user, function: count_distinct}\n")), EngineOptions{State: st})
	day := ms("2024-03-01T00:00:00Z")
	long := strings.Repeat("x", 10_000)
	users := []any{long + "1", long + "2", long + "1", strings.Repeat("y", 64), "\x00" + strings.Repeat("y", 63), map[string]any{"k": long}}
	for i, u := range users {
		if err := e.ProcessIncremental(ctx, fact(fmt.Sprintf("f%d", i), "deposit", day, map[string]any{"user": u}), &ProcessOptions{ProjectionKey: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := e.Query(ctx, "d", QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r["2024-03-01"].(map[string]any)["user_distinct"]; got != int64(5) {
		t.Fatalf("user_distinct %v, want 5", got)
	}
	members, err := rdb.SMembers(ctx, st.keys("d").distinct("user", Day, "2024-03-01")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 5 {
		t.Fatalf("set members: %q", members)
	}
	for _, m := range members {
		if len(m) > distinctKeep {
			t.Fatalf("a member of %d bytes is kept: %.80q", len(m), m)
		}
	}
}
