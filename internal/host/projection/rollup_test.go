package projection

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/projection/internal/hll"
	"github.com/factline/factline/internal/testutil"
)

// levelResult reads every bucket of one level of the cached state.
func levelResult(t *testing.T, e *Engine, st CachedState, key string, level int) string {
	t.Helper()
	ctx := context.Background()
	v, err := st.StorageVersion(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	ld, _, err := st.load(ctx, key, e.s, v, func(stateMeta) []planRange {
		return []planRange{{level, minTime, maxTime + 1}}
	}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return js(e.s.renderLoaded(ld, false))
}

func at(s string) time.Time { return time.UnixMilli(ms(s)) }

// TestRollupAndRetention walks a projection through the rollup triggers
// (an hour once it has ended, a day at the day boundary, a month at the
// month boundary), late facts (every sealed level updated at once) and
// retention, on a controllable clock, for both states and both formats.
func TestRollupAndRetention(t *testing.T) {
	t.Parallel()
	y := `
source: account
factTypes: [deposit]
timeWindow: minute
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: sum}
  - {field: data.amount, function: avg}
  - {field: data.amount, function: min}
  - {field: data.amount, function: max}
  - {field: data.user, function: count_distinct}
materialize: true
storageVersion: %d
rollup:
  enabled: true
  retention: {minute: 1, hour: 3, day: 0, month: 0}
`
	for _, kind := range stateKinds {
		for _, sv := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/v%d", kind.name, sv), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				st := kind.new(t)
				clk := newClock(at("2024-01-31T22:50:00Z"))
				var all []Fact
				e := mustEngine(t, mustConfig(t, fmt.Sprintf(y, sv)), EngineOptions{State: st, Now: clk.Now})
				opts := &ProcessOptions{ProjectionKey: "r"}
				add := func(id, when, amount, user string) {
					t.Helper()
					f := fact(id, "deposit", ms(when), map[string]any{"amount": num(amount), "user": user})
					all = append(all, f)
					if err := e.ProcessIncremental(ctx, f, opts); err != nil {
						t.Fatal(err)
					}
				}
				rollup := func(now string) RollupReport {
					t.Helper()
					clk.Set(at(now))
					rep, err := e.Rollup(ctx, "r", nil)
					if err != nil {
						t.Fatal(err)
					}
					return rep
				}
				expect := func(level int, want string) {
					t.Helper()
					if got := levelResult(t, e, st, "r", level); got != want {
						t.Fatalf("level %d:\ngot  %s\nwant %s", level, got, want)
					}
				}
				add("f1", "2024-01-31T22:05:00Z", "10", "a")
				add("f2", "2024-01-31T22:05:30Z", "2.5", "b")
				add("f3", "2024-01-31T22:40:00Z", "-1", "a")
				rollup("2024-01-31T22:59:59.999Z")
				expect(1, `{}`) // the hour has not ended

				if rep := rollup("2024-01-31T23:00:00Z"); rep.Sealed != 1 {
					t.Fatalf("rollup at the end of the hour: %+v", rep)
				}
				expect(1, `{"2024-01-31T22":{"amount_avg":3.8333333333333333,"amount_max":10,"amount_min":-1,"amount_sum":11.5,"count":3,"user_distinct":2}}`)
				expect(2, `{}`)

				clk.Set(at("2024-01-31T23:15:00Z"))
				add("f4", "2024-01-31T23:10:00Z", "100", "c")
				add("f5", "2024-01-31T22:30:00Z", "1", "d") // late: minute and sealed hour at once
				expect(1, `{"2024-01-31T22":{"amount_avg":3.125,"amount_max":10,"amount_min":-1,"amount_sum":12.5,"count":4,"user_distinct":3}}`)

				rollup("2024-02-01T00:00:00Z") // day and month boundary at once
				expect(2, `{"2024-01-31":{"amount_avg":22.5,"amount_max":100,"amount_min":-1,"amount_sum":112.5,"count":5,"user_distinct":4}}`)
				expect(3, `{"2024-01":{"amount_avg":22.5,"amount_max":100,"amount_min":-1,"amount_sum":112.5,"count":5,"user_distinct":4}}`)

				clk.Set(at("2024-02-01T00:30:00Z"))
				add("f6", "2024-01-31T10:00:00Z", "0.5", "a") // late: all four levels at once
				expect(1, `{"2024-01-31T10":{"amount_avg":0.5,"amount_max":0.5,"amount_min":0.5,"amount_sum":0.5,"count":1,"user_distinct":1},`+
					`"2024-01-31T22":{"amount_avg":3.125,"amount_max":10,"amount_min":-1,"amount_sum":12.5,"count":4,"user_distinct":3},`+
					`"2024-01-31T23":{"amount_avg":100,"amount_max":100,"amount_min":100,"amount_sum":100,"count":1,"user_distinct":1}}`)
				expect(3, `{"2024-01":{"amount_avg":18.8333333333333333,"amount_max":100,"amount_min":-1,"amount_sum":113,"count":6,"user_distinct":4}}`)

				// A day later the minutes of January 31 go (retention 1 day).
				if rep := rollup("2024-02-02T00:30:00Z"); rep.Deleted != 5 {
					t.Fatalf("retention deleted %d buckets, want the 5 minutes of January 31", rep.Deleted)
				}
				expect(0, `{}`)
				r, err := e.Query(ctx, "r", QueryOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprint(keysOf(r)); got != "[2024-01-31T10 2024-01-31T22 2024-01-31T23]" {
					t.Fatalf("after minute retention the query answers from hours: %v", got)
				}
				if est := fmt.Sprint(Estimated(r)); est != "[user_distinct]" {
					t.Fatalf("distinct counts from hours are estimates: %s", est)
				}
				e2 := mustEngine(t, e.cfg, EngineOptions{State: st, Now: clk.Now, Source: SliceSource(all)})
				if v, err := e2.Verify(ctx, "r", QueryOptions{}); err != nil || !v.Consistent {
					t.Fatalf("verify after retention: %v %v", err, v.Drift)
				}

				// A late fact for a deleted minute updates the levels kept.
				add("f7", "2024-01-31T22:41:00Z", "2", "e")
				expect(0, `{}`)
				e2 = mustEngine(t, e.cfg, EngineOptions{State: st, Now: clk.Now, Source: SliceSource(all)})
				for _, q := range []QueryOptions{{}, {Aggregate: true}, {Aggregate: true, From: ms("2024-01-31T22:00:00Z")}} {
					if v, err := e2.Verify(ctx, "r", q); err != nil || !v.Consistent {
						t.Fatalf("verify %+v: %v %v", q, err, v.Drift)
					}
					if q.Aggregate {
						m, _ := e2.Query(ctx, "r", q)
						q.Mode = ModeCompute
						c, _ := e2.Query(ctx, "r", q)
						if js(exactView(m)) != js(c) {
							t.Fatalf("aggregate %+v: %s, compute %s", q, js(m), js(c))
						}
					}
				}

				// Three days on, the hours go too; days and months stay
				// (retention 0).
				rollup("2024-02-05T00:00:00Z")
				expect(1, `{}`)
				r, _ = e.Query(ctx, "r", QueryOptions{})
				if got := js(r); got != `{"2024-01-31":{"amount_avg":16.4285714285714286,"amount_max":100,"amount_min":-1,"amount_sum":115,"count":7,"user_distinct":5},"_meta":{"estimated":["user_distinct"]}}` {
					t.Fatalf("after hour retention: %s", got)
				}
				rollup("2030-01-01T00:00:00Z")
				expect(3, `{"2024-01":{"amount_avg":16.4285714285714286,"amount_max":100,"amount_min":-1,"amount_sum":115,"count":7,"user_distinct":5}}`)
			})
		}
	}
}

func keysOf(r Result) []string {
	var out []string
	for k := range r {
		if k != "_meta" {
			out = append(out, k)
		}
	}
	sortStrings(out)
	return out
}

// TestRetentionZeroKeepsForever checks that retention 0 deletes nothing.
func TestRetentionZeroKeepsForever(t *testing.T) {
	t.Parallel()
	for _, kind := range stateKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			clk := newClock(at("2024-01-01T00:00:00Z"))
			e := mustEngine(t, mustConfig(t, cfgYAML("minute", "", "  - {field: count, function: count}\n")+"rollup: {enabled: true, retention: {minute: 0}}\n"),
				EngineOptions{State: kind.new(t), Now: clk.Now})
			if err := e.ProcessIncremental(ctx, fact("a", "deposit", ms("2024-01-01T00:00:10Z"), nil), &ProcessOptions{ProjectionKey: "k"}); err != nil {
				t.Fatal(err)
			}
			clk.Set(at("2034-01-01T00:00:00Z"))
			if rep, err := e.Rollup(ctx, "k", nil); err != nil || rep.Deleted != 0 || rep.Sealed != 3 {
				t.Fatalf("%+v %v", rep, err)
			}
			if got := levelResult(t, e, e.opts.State, "k", 0); got != `{"2024-01-01T00:00":{"count":1}}` {
				t.Fatalf("minute level: %s", got)
			}
		})
	}
}

// TestCoarsestCover checks that an aggregated long range is planned from
// the coarsest buckets that cover it exactly, so its cost does not grow
// with its length.
func TestCoarsestCover(t *testing.T) {
	t.Parallel()
	e := mustEngine(t, mustConfig(t, cfgYAML("minute", "", "  - {field: count, function: count}\n")+"rollup: {enabled: true}\n"), EngineOptions{})
	s := e.s
	sealed := ms("2030-01-01T00:00:00Z")
	wm := []int64{noTime, sealed, sealed, sealed}
	del := []int64{noTime, noTime, noTime, noTime}
	type r struct {
		w      Window
		lo, hi string
	}
	plan := func(from, to string) []r {
		a, b := dataRange(s, ms(from), ms(to))
		var out []r
		for _, p := range makePlan(s, wm, del, a, b, true) {
			f := func(v int64) string { return time.UnixMilli(v).UTC().Format("2006-01-02T15:04") }
			out = append(out, r{s.levels[p.level], f(p.lo), f(p.hi)})
		}
		return out
	}
	got := plan("2023-01-15T10:29:30Z", "2024-11-20T05:10:00Z")
	want := []r{
		{Minute, "2023-01-15T10:30", "2023-01-15T11:00"},
		{Hour, "2023-01-15T11:00", "2023-01-16T00:00"},
		{Day, "2023-01-16T00:00", "2023-02-01T00:00"},
		{Month, "2023-02-01T00:00", "2024-11-01T00:00"},
		{Day, "2024-11-01T00:00", "2024-11-20T00:00"},
		{Hour, "2024-11-20T00:00", "2024-11-20T05:00"},
		{Minute, "2024-11-20T05:00", "2024-11-20T05:11"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan:\n%v\nwant\n%v", got, want)
	}
	if long := plan("2003-01-15T10:29:30Z", "2024-11-20T05:10:00Z"); len(long) != len(want) {
		t.Fatalf("a 20-year range takes %d ranges", len(long))
	}
	// Only sealed buckets are used: with hours sealed up to 2024-11-20T03:00
	// and days and months not at all, the range ends in minutes.
	wm = []int64{noTime, ms("2024-11-20T03:00:00Z"), noTime, noTime}
	got = plan("2024-11-19T22:30:00Z", "2024-11-20T05:10:00Z")
	want = []r{
		{Minute, "2024-11-19T22:30", "2024-11-19T23:00"},
		{Hour, "2024-11-19T23:00", "2024-11-20T03:00"},
		{Minute, "2024-11-20T03:00", "2024-11-20T05:11"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan with partial seals:\n%v\nwant\n%v", got, want)
	}
}

// TestDistinctMillion counts 1,000,000 distinct values in one day bucket:
// exactly in the base bucket and in an aggregate of base buckets, and in
// the month bucket they roll up to within the stated error bound (2.5%)
// and equal to the Go sketch of the same values; in memory through the
// engine and in Redis with the values written in pipelined batches into
// the bucket's set. The million is counted by the non-race run make test
// also makes; the race run counts 100,000.
func TestDistinctMillion(t *testing.T) {
	t.Parallel()
	n := 1_000_000
	if testutil.Race {
		n = 100_000
	}
	value := func(i int) string { return fmt.Sprintf("user-%07d", i) }
	var ref hll.Sketch
	for i := 0; i < n; i++ {
		ref.AddString(value(i))
	}
	exact := func(name string, got any) {
		t.Helper()
		if got != int64(n) {
			t.Fatalf("%s: %v distinct values, want %d", name, got, n)
		}
	}
	within := func(name string, got any) {
		t.Helper()
		g, _ := got.(int64)
		if e := math.Abs(float64(g)-float64(n)) / float64(n); e > 0.025 {
			t.Fatalf("%s: %v for %d distinct values, error %.2f%% > 2.5%%", name, got, n, 100*e)
		}
		if g != int64(ref.Count()) {
			t.Fatalf("%s: %d, the Go sketch of the same values says %d", name, g, ref.Count())
		}
	}
	// The distinct values are the fact ids: no data maps to build. Days
	// roll up to months.
	y := cfgYAML("day", "", "  - {field: id, function: count_distinct}\nrollup: {enabled: true}\n")
	day := ms("2024-03-01T00:00:00Z")
	sealed := func() time.Time { return time.UnixMilli(ms("2024-04-01T00:00:00Z")) }
	query := func(ctx context.Context, e *Engine, opts QueryOptions) map[string]any {
		t.Helper()
		r, err := e.Query(ctx, "d", opts)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	check := func(ctx context.Context, name string, e *Engine) {
		t.Helper()
		exact(name+" bucket", query(ctx, e, QueryOptions{})["2024-03-01"].(map[string]any)["id_distinct"])
		exact(name+" aggregate of days", query(ctx, e, QueryOptions{Aggregate: true, From: day, To: day + msDay - 1})["aggregated"].(map[string]any)["id_distinct"])
		if _, err := e.Rollup(ctx, "d", nil); err != nil {
			t.Fatal(err)
		}
		within(name+" month", query(ctx, e, QueryOptions{Aggregate: true})["aggregated"].(map[string]any)["id_distinct"])
	}

	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		e := mustEngine(t, mustConfig(t, y), EngineOptions{State: NewMemoryState(), Now: sealed})
		facts := make([]Fact, n)
		for i := range facts {
			facts[i] = Fact{ID: value(i), Type: "deposit", Timestamp: day + int64(i%86_400_000)}
		}
		r, err := e.Process(facts, nil)
		if err != nil {
			t.Fatal(err)
		}
		exact("process", r["2024-03-01"].(map[string]any)["id_distinct"])
		if _, err := e.ProcessIncrementalBatch(ctx, facts, &ProcessOptions{ProjectionKey: "d"}); err != nil {
			t.Fatal(err)
		}
		check(ctx, "memory", e)
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		rdb := redisClient(t)
		st := NewRedisState(rdb).WithPrefix("distinct:")
		e := mustEngine(t, mustConfig(t, y), EngineOptions{State: st, Now: func() time.Time { return time.UnixMilli(day) }})
		if err := e.ProcessIncremental(ctx, Fact{ID: value(0), Type: "deposit", Timestamp: day}, &ProcessOptions{ProjectionKey: "d"}); err != nil {
			t.Fatal(err)
		}
		key := st.keys("d").distinct("id", Day, "2024-03-01")
		const batch = 10_000
		args := make([]any, 0, batch)
		pipe := rdb.Pipeline()
		for i := 0; i < n; i++ {
			args = append(args, value(i))
			if len(args) == batch {
				pipe.SAdd(ctx, key, args...)
				args = make([]any, 0, batch)
			}
			if pipe.Len() == 10 {
				if _, err := pipe.Exec(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		e = mustEngine(t, mustConfig(t, y), EngineOptions{State: st, Now: sealed})
		check(ctx, "redis", e)
	})
}
