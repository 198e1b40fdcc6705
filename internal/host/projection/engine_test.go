package projection

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func cfgYAML(window, groupBy, aggs string) string {
	y := "source: account\nfactTypes: [deposit]\nmaterialize: true\nstorageVersion: 2\naggregations:\n" + aggs
	if window != "" {
		y += "timeWindow: " + window + "\n"
	}
	if groupBy != "" {
		y += "groupBy: " + groupBy + "\n"
	}
	return y
}

const allAggs = `  - {field: count, function: count}
  - {field: data.payment.amount, function: sum}
  - {field: data.payment.amount, function: avg}
  - {field: data.payment.amount, function: min}
  - {field: data.payment.amount, function: max}
  - {field: data.user, function: count_distinct}
`

func pay(amount any) map[string]any {
	return map[string]any{"payment": map[string]any{"amount": amount}}
}

// TestFunctions checks every aggregation function and result key, with
// exact decimals and the documented treatment of missing and non-numeric
// values.
func TestFunctions(t *testing.T) {
	t.Parallel()
	e := mustEngine(t, mustConfig(t, cfgYAML("", "", allAggs)), EngineOptions{})
	ts := ms("2024-01-01T00:00:00Z")
	for _, tc := range []struct {
		name  string
		facts []Fact
		want  string
	}{
		{"no facts", nil,
			`{"count":0,"payment_amount_avg":null,"payment_amount_max":null,"payment_amount_min":null,"payment_amount_sum":0,"user_distinct":0}`},
		{"exact decimals", []Fact{
			fact("1", "deposit", ts, map[string]any{"payment": map[string]any{"amount": num("0.1")}, "user": "a"}),
			fact("2", "deposit", ts, map[string]any{"payment": map[string]any{"amount": num("0.2")}, "user": "b"}),
			fact("3", "deposit", ts, map[string]any{"payment": map[string]any{"amount": num("0.30")}, "user": "a"}),
		}, `{"count":3,"payment_amount_avg":0.2,"payment_amount_max":0.3,"payment_amount_min":0.1,"payment_amount_sum":0.6,"user_distinct":2}`},
		{"avg rounds to 16 places", []Fact{
			fact("1", "deposit", ts, pay(num("1"))), fact("2", "deposit", ts, pay(num("1"))), fact("3", "deposit", ts, pay(num("2"))),
		}, `{"count":3,"payment_amount_avg":1.3333333333333333,"payment_amount_max":2,"payment_amount_min":1,"payment_amount_sum":4,"user_distinct":0}`},
		{"negative, exponent and numeric string", []Fact{
			fact("1", "deposit", ts, pay(num("-2.5"))), fact("2", "deposit", ts, pay(num("1e3"))), fact("3", "deposit", ts, pay("12.50")),
		}, `{"count":3,"payment_amount_avg":336.6666666666666667,"payment_amount_max":1000,"payment_amount_min":-2.5,"payment_amount_sum":1010,"user_distinct":0}`},
		{"missing and non-numeric values count only in count", []Fact{
			fact("1", "deposit", ts, pay(num("10"))),
			fact("2", "deposit", ts, nil),
			fact("3", "deposit", ts, pay("ten")),
			fact("4", "deposit", ts, pay(true)),
			fact("5", "deposit", ts, pay(nil)),
			fact("6", "deposit", ts, map[string]any{"payment": "flat"}),
		}, `{"count":6,"payment_amount_avg":10,"payment_amount_max":10,"payment_amount_min":10,"payment_amount_sum":10,"user_distinct":0}`},
		{"beyond 64 digits is not a number", []Fact{
			fact("1", "deposit", ts, pay(num("1e70"))), fact("2", "deposit", ts, pay(num("1e-70"))), fact("3", "deposit", ts, pay(num("5"))),
		}, `{"count":3,"payment_amount_avg":5,"payment_amount_max":5,"payment_amount_min":5,"payment_amount_sum":5,"user_distinct":0}`},
		{"big exact sums", []Fact{
			fact("1", "deposit", ts, pay(num("99999999999999999999999999.999999999"))),
			fact("2", "deposit", ts, pay(num("0.000000001"))),
		}, `{"count":2,"payment_amount_avg":50000000000000000000000000,"payment_amount_max":99999999999999999999999999.999999999,"payment_amount_min":0.000000001,"payment_amount_sum":100000000000000000000000000,"user_distinct":0}`},
		{"distinct values by text", []Fact{
			fact("1", "deposit", ts, map[string]any{"user": "7"}),
			fact("2", "deposit", ts, map[string]any{"user": num("7.0")}),
			fact("3", "deposit", ts, map[string]any{"user": int64(7)}),
			fact("4", "deposit", ts, map[string]any{"user": "x"}),
			fact("5", "deposit", ts, map[string]any{"user": nil}),
			fact("6", "deposit", ts, map[string]any{}),
			fact("7", "deposit", ts, map[string]any{"user": map[string]any{"b": 1, "a": 2}}),
		}, `{"count":7,"payment_amount_avg":null,"payment_amount_max":null,"payment_amount_min":null,"payment_amount_sum":0,"user_distinct":3}`},
		{"long distinct values are kept by their hash", []Fact{
			fact("1", "deposit", ts, map[string]any{"user": strings.Repeat("a", 64) + "1"}),
			fact("2", "deposit", ts, map[string]any{"user": strings.Repeat("a", 64) + "2"}),
			fact("3", "deposit", ts, map[string]any{"user": strings.Repeat("a", 64) + "1"}),
			fact("4", "deposit", ts, map[string]any{"user": strings.Repeat("a", 64)}),
			fact("5", "deposit", ts, map[string]any{"user": "\x00" + strings.Repeat("a", 64)}),
			fact("6", "deposit", ts, map[string]any{"user": map[string]any{"k": strings.Repeat("b", 80)}}),
			fact("7", "deposit", ts, map[string]any{"user": map[string]any{"k": strings.Repeat("b", 80)}}),
		}, `{"count":7,"payment_amount_avg":null,"payment_amount_max":null,"payment_amount_min":null,"payment_amount_sum":0,"user_distinct":5}`},
		{"other types and repeated ids are ignored", []Fact{
			fact("1", "deposit", ts, pay(num("1"))), fact("1", "deposit", ts, pay(num("1"))),
			fact("2", "withdrawal", ts, pay(num("100"))),
		}, `{"count":1,"payment_amount_avg":1,"payment_amount_max":1,"payment_amount_min":1,"payment_amount_sum":1,"user_distinct":0}`},
		{"go numbers", []Fact{
			fact("1", "deposit", ts, pay(0.1)), fact("2", "deposit", ts, pay(2)), fact("3", "deposit", ts, pay(int64(3))),
		}, `{"count":3,"payment_amount_avg":1.7,"payment_amount_max":3,"payment_amount_min":0.1,"payment_amount_sum":5.1,"user_distinct":0}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := e.Process(tc.facts, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := js(r); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestWindows checks every window's bucket format at UTC boundaries: month
// ends, the leap day 2024-02-29, a year end, and times before 1970.
func TestWindows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		window string
		at     string
		want   string
	}{
		{"minute", "2024-02-29T23:59:59.999Z", "2024-02-29T23:59"},
		{"minute", "2024-03-01T00:00:00Z", "2024-03-01T00:00"},
		{"hour", "2024-02-29T23:30:00Z", "2024-02-29T23"},
		{"hour", "2023-12-31T23:59:59.999Z", "2023-12-31T23"},
		{"hour", "2024-01-01T00:00:00Z", "2024-01-01T00"},
		{"day", "2024-02-29T12:00:00Z", "2024-02-29"},
		{"day", "2023-02-28T23:59:59.999Z", "2023-02-28"},
		{"day", "2023-03-01T00:00:00Z", "2023-03-01"},
		{"day", "1969-12-31T23:59:59.999Z", "1969-12-31"},
		{"month", "2024-02-29T23:59:59.999Z", "2024-02"},
		{"month", "2024-03-01T00:00:00Z", "2024-03"},
		{"month", "2023-12-31T23:59:59.999Z", "2023-12"},
		{"month", "2024-01-01T00:00:00Z", "2024-01"},
		{"month", "2000-02-29T00:00:00Z", "2000-02"},
		{"minute", "1900-03-01T00:00:00Z", "1900-03-01T00:00"},
	} {
		t.Run(tc.window+" "+tc.at, func(t *testing.T) {
			e := mustEngine(t, mustConfig(t, cfgYAML(tc.window, "", "  - {field: count, function: count}\n")), EngineOptions{})
			r, err := e.Process([]Fact{fact("a", "deposit", ms(tc.at), nil)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := js(r), fmt.Sprintf(`{%q:{"count":1}}`, tc.want); got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
}

// TestWindowMath checks bucket starts, next buckets and keys against the
// time package over a wide range of days.
func TestWindowMath(t *testing.T) {
	t.Parallel()
	for d := int64(-719_000); d <= 2_932_000; d += 97 { // years 1 to 9999
		ts := d*msDay + (d%24)*msHour + 17*msMinute + 3
		tm := time.UnixMilli(ts).UTC()
		ms := time.Date(tm.Year(), tm.Month(), 1, 0, 0, 0, 0, time.UTC)
		if got := Month.start(ts); got != ms.UnixMilli() {
			t.Fatalf("month start of %v: %d, want %d", tm, got, ms.UnixMilli())
		}
		if got := Month.next(ms.UnixMilli()); got != ms.AddDate(0, 1, 0).UnixMilli() {
			t.Fatalf("next month after %v", ms)
		}
		for w, layout := range map[Window]string{Minute: "2006-01-02T15:04", Hour: "2006-01-02T15", Day: "2006-01-02", Month: "2006-01"} {
			if got, want := w.key(w.start(ts)), tm.Format(layout); got != want {
				t.Fatalf("%s key of %v: %s, want %s", w, tm, got, want)
			}
		}
	}
}

// TestResultShapes checks the shape of results with and without window
// and groupBy, group values joined by ':' in groupBy order, and the
// escaping of ':' and '%' inside group values.
func TestResultShapes(t *testing.T) {
	t.Parallel()
	ts := ms("2024-05-01T10:15:00Z")
	facts := []Fact{
		{ID: "1", Type: "deposit", Subtype: "manual", Timestamp: ts, Data: map[string]any{"country": "US", "tier": num("2.0")}},
		{ID: "2", Type: "deposit", Subtype: "auto", Timestamp: ts + msHour, Data: map[string]any{"country": "US"}},
		{ID: "3", Type: "deposit", Timestamp: ts, Data: map[string]any{"country": "a:b%", "tier": true}},
	}
	count := "  - {field: count, function: count}\n"
	for _, tc := range []struct {
		name, window, groupBy, want string
	}{
		{"flat", "", "", `{"count":3}`},
		{"window", "hour", "", `{"2024-05-01T10":{"count":2},"2024-05-01T11":{"count":1}}`},
		{"groupBy", "", "[data.country]", `{"US":{"count":2},"a%3Ab%25":{"count":1}}`},
		{"window and groupBy", "hour", "[data.country]", `{"2024-05-01T10:US":{"count":1},"2024-05-01T10:a%3Ab%25":{"count":1},"2024-05-01T11:US":{"count":1}}`},
		{"two groupBy fields", "day", "[data.country, subtype]", `{"2024-05-01:US:auto":{"count":1},"2024-05-01:US:manual":{"count":1},"2024-05-01:a%3Ab%25:":{"count":1}}`},
		{"group values: numbers canonical, booleans, missing", "", "[data.tier]", `{"":{"count":1},"2":{"count":1},"true":{"count":1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, mustConfig(t, cfgYAML(tc.window, tc.groupBy, count)), EngineOptions{})
			r, err := e.Process(facts, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := js(r); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	if UnescapeGroup("a%3Ab%25") != "a:b%" {
		t.Fatal("UnescapeGroup")
	}
}

// TestQuery checks ranges (inclusive, by bucket start), aggregation
// (weighted averages), group filters and modes on both states and both
// formats.
func TestQuery(t *testing.T) {
	t.Parallel()
	for _, kind := range stateKinds {
		for _, sv := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/v%d", kind.name, sv), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				y := strings.Replace(cfgYAML("hour", "[data.country]", allAggs), "storageVersion: 2", fmt.Sprintf("storageVersion: %d", sv), 1)
				h := ms("2024-12-31T22:00:00Z")
				facts := []Fact{
					fact("1", "deposit", h, map[string]any{"country": "US", "payment": map[string]any{"amount": num("10")}, "user": "a"}),
					fact("2", "deposit", h+5*msMinute, map[string]any{"country": "US", "payment": map[string]any{"amount": num("20")}, "user": "b"}),
					fact("3", "deposit", h+msHour, map[string]any{"country": "DE", "payment": map[string]any{"amount": num("60")}, "user": "a"}),
					fact("4", "deposit", h+2*msHour+1, map[string]any{"country": "US", "payment": map[string]any{"amount": num("1.5")}, "user": "c"}),
				}
				e := mustEngine(t, mustConfig(t, y), EngineOptions{State: kind.new(t), Source: SliceSource(facts)})
				for _, f := range facts {
					if err := e.ProcessIncremental(ctx, f, &ProcessOptions{ProjectionKey: "q"}); err != nil {
						t.Fatal(err)
					}
				}
				for _, tc := range []struct {
					name string
					q    QueryOptions
					want string
				}{
					{"all", QueryOptions{}, `{"2024-12-31T22:US":{"count":2,"payment_amount_avg":15,"payment_amount_max":20,"payment_amount_min":10,"payment_amount_sum":30,"user_distinct":2},` +
						`"2024-12-31T23:DE":{"count":1,"payment_amount_avg":60,"payment_amount_max":60,"payment_amount_min":60,"payment_amount_sum":60,"user_distinct":1},` +
						`"2025-01-01T00:US":{"count":1,"payment_amount_avg":1.5,"payment_amount_max":1.5,"payment_amount_min":1.5,"payment_amount_sum":1.5,"user_distinct":1}}`},
					{"from is inclusive", QueryOptions{From: h + msHour, To: h + msHour},
						`{"2024-12-31T23:DE":{"count":1,"payment_amount_avg":60,"payment_amount_max":60,"payment_amount_min":60,"payment_amount_sum":60,"user_distinct":1}}`},
					{"a bucket is in range by its start", QueryOptions{From: h + 1, To: h + 2*msHour - 1},
						`{"2024-12-31T23:DE":{"count":1,"payment_amount_avg":60,"payment_amount_max":60,"payment_amount_min":60,"payment_amount_sum":60,"user_distinct":1}}`},
					{"open start", QueryOptions{To: h}, `{"2024-12-31T22:US":{"count":2,"payment_amount_avg":15,"payment_amount_max":20,"payment_amount_min":10,"payment_amount_sum":30,"user_distinct":2}}`},
					{"open end", QueryOptions{From: h + 2*msHour}, `{"2025-01-01T00:US":{"count":1,"payment_amount_avg":1.5,"payment_amount_max":1.5,"payment_amount_min":1.5,"payment_amount_sum":1.5,"user_distinct":1}}`},
					{"empty range", QueryOptions{From: h + 10*msHour}, `{}`},
					{"aggregate weights averages", QueryOptions{Aggregate: true},
						`{"aggregated":{"count":4,"payment_amount_avg":22.875,"payment_amount_max":60,"payment_amount_min":1.5,"payment_amount_sum":91.5,"user_distinct":3}}`},
					{"aggregate of a range", QueryOptions{Aggregate: true, From: h + msHour},
						`{"aggregated":{"count":2,"payment_amount_avg":30.75,"payment_amount_max":60,"payment_amount_min":1.5,"payment_amount_sum":61.5,"user_distinct":2}}`},
					{"aggregate of nothing", QueryOptions{Aggregate: true, From: h + 10*msHour},
						`{"aggregated":{"count":0,"payment_amount_avg":null,"payment_amount_max":null,"payment_amount_min":null,"payment_amount_sum":0,"user_distinct":0}}`},
					{"group filter", QueryOptions{Aggregate: true, Groups: map[string]string{"data.country": "US"}},
						`{"aggregated":{"count":3,"payment_amount_avg":10.5,"payment_amount_max":20,"payment_amount_min":1.5,"payment_amount_sum":31.5,"user_distinct":3}}`},
				} {
					for _, mode := range []QueryMode{ModeMaterialized, ModeCompute} {
						q := tc.q
						q.Mode = mode
						r, err := e.Query(ctx, "q", q)
						if err != nil {
							t.Fatalf("%s %s: %v", tc.name, mode, err)
						}
						if got := js(r); got != tc.want {
							t.Fatalf("%s %s:\ngot  %s\nwant %s", tc.name, mode, got, tc.want)
						}
					}
				}
				// Verify finds no drift, then finds a fact the source lacks.
				v, err := e.Verify(ctx, "q", QueryOptions{})
				if err != nil || !v.Consistent {
					t.Fatalf("verify: %v %+v", err, v)
				}
				extra := fact("5", "deposit", h+30*msMinute, map[string]any{"country": "US", "payment": map[string]any{"amount": num("1")}})
				if err := e.ProcessIncremental(ctx, extra, &ProcessOptions{ProjectionKey: "q"}); err != nil {
					t.Fatal(err)
				}
				r, err := e.Query(ctx, "q", QueryOptions{Mode: ModeVerify, From: h, To: h})
				if err != nil {
					t.Fatal(err)
				}
				drift := js(r["drift"])
				if r["consistent"] != false || !strings.Contains(drift, `{"bucket":"2024-12-31T22:US","computed":2,"key":"count","materialized":3}`) ||
					!strings.Contains(drift, `"key":"payment_amount_sum","materialized":31}`) {
					t.Fatalf("verify did not report the drift: %s", js(r))
				}
			})
		}
	}
}

func TestQueryErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	flat := mustEngine(t, mustConfig(t, cfgYAML("", "", "  - {field: count, function: count}\n")), EngineOptions{State: NewMemoryState()})
	if _, err := flat.Query(ctx, "k", QueryOptions{From: 1}); !errors.Is(err, ErrRangeWithoutWindow) {
		t.Fatalf("range without window: %v", err)
	}
	if _, err := flat.Query(ctx, "k", QueryOptions{Mode: ModeCompute}); !errors.Is(err, ErrNoSource) {
		t.Fatalf("compute without source: %v", err)
	}
	if _, err := flat.Query(ctx, "k", QueryOptions{From: 5, To: 4, Mode: ModeCompute}); !errors.Is(err, ErrBadQuery) {
		t.Fatalf("from after to: %v", err)
	}
	if _, err := flat.Query(ctx, "k", QueryOptions{Mode: "fast"}); !errors.Is(err, ErrBadQuery) {
		t.Fatalf("bad mode: %v", err)
	}
	if _, err := flat.Query(ctx, "k", QueryOptions{Groups: map[string]string{"data.x": "1"}}); !errors.Is(err, ErrBadQuery) {
		t.Fatalf("filter on a field that is not grouped: %v", err)
	}
	if _, err := flat.Query(ctx, "", QueryOptions{}); !errors.Is(err, ErrNoState) {
		t.Fatalf("no key: %v", err)
	}
	r, err := flat.Query(ctx, "nothing-yet", QueryOptions{})
	if err != nil || js(r) != `{"count":0}` {
		t.Fatalf("empty flat projection: %s %v", js(r), err)
	}
	notMat := mustEngine(t, mustConfig(t, strings.Replace(cfgYAML("", "", "  - {field: count, function: count}\n"), "materialize: true", "materialize: false", 1)),
		EngineOptions{State: NewMemoryState()})
	if err := notMat.ProcessIncremental(ctx, fact("a", "deposit", 1, nil), &ProcessOptions{ProjectionKey: "k"}); !errors.Is(err, ErrNotMaterialized) {
		t.Fatalf("incremental on a projection that is not materialized: %v", err)
	}
	r, err = notMat.Process([]Fact{fact("a", "deposit", 1, nil)}, &ProcessOptions{ProjectionKey: "k"})
	if err != nil || js(r) != `{"count":1}` {
		t.Fatalf("process: %v", err)
	}
	if v, _ := notMat.opts.State.StorageVersion(ctx, "k"); v != 0 {
		t.Fatal("a projection that is not materialized was stored")
	}
}

// TestProcessMaterializes checks that Process stores its facts with
// factsThroughId, that the stored entry reads back as {value,
// factsThroughId}, and that facts stored by Process are not counted again
// by incremental processing.
func TestProcessMaterializes(t *testing.T) {
	t.Parallel()
	for _, kind := range stateKinds {
		for _, sv := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/v%d", kind.name, sv), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				y := strings.Replace(cfgYAML("day", "", "  - {field: count, function: count}\n  - {field: data.n, function: sum}\n"),
					"storageVersion: 2", fmt.Sprintf("storageVersion: %d", sv), 1)
				st := kind.new(t)
				vc := &VersionedConfig{ID: "cfg_1", Type: "projection", Scope: "platform", Version: 7, TenantID: "t", Settings: mustConfig(t, y)}
				e, err := NewEngineFromVersioned(vc, EngineOptions{State: st})
				if err != nil {
					t.Fatal(err)
				}
				d := ms("2024-02-29T10:00:00Z")
				batch := []Fact{fact("fct_02", "deposit", d, map[string]any{"n": num("1.25")}), fact("fct_01", "deposit", d, map[string]any{"n": num("2")})}
				r, err := e.Process(batch, &ProcessOptions{ProjectionKey: "p", FactsThroughID: "fct_02"})
				if err != nil {
					t.Fatal(err)
				}
				want := `{"2024-02-29":{"count":2,"n_sum":3.25},"_meta":{"config_version":7}}`
				if js(r) != want {
					t.Fatalf("process: %s", js(r))
				}
				// The same facts again, incrementally: no effect.
				if n, err := e.ProcessIncrementalBatch(ctx, batch, &ProcessOptions{ProjectionKey: "p"}); err != nil || n != 0 {
					t.Fatalf("re-applied %d facts: %v", n, err)
				}
				if err := e.ProcessIncremental(ctx, fact("fct_03", "deposit", d+msDay, nil), &ProcessOptions{ProjectionKey: "p"}); err != nil {
					t.Fatal(err)
				}
				en, err := e.Entry(ctx, "p", nil)
				if err != nil {
					t.Fatal(err)
				}
				if got := js(en); got != `{"value":{"2024-02-29":{"count":2,"n_sum":3.25},"2024-03-01":{"count":1,"n_sum":0},"_meta":{"config_version":7}},"factsThroughId":"fct_03"}` {
					t.Fatalf("entry: %s", got)
				}
				if v, _ := st.StorageVersion(ctx, "p"); v != sv {
					t.Fatalf("storage version %d, want %d", v, sv)
				}
				keys, _ := st.Keys(ctx, "p")
				keys = plainKeys(kind.name, keys)
				wantKeys := "[test:p]"
				if sv == 2 {
					wantKeys = "[test:p:day:2024-02-29 test:p:day:2024-03-01]"
				}
				if kind.name == "memory" {
					wantKeys = strings.ReplaceAll(wantKeys, "test:", "")
				}
				if fmt.Sprint(keys) != wantKeys {
					t.Fatalf("keys %v, want %s", keys, wantKeys)
				}
			})
		}
	}
}

// TestConfigChangeRefused checks that cached state built by one
// configuration is not silently reused by a different one.
func TestConfigChangeRefused(t *testing.T) {
	t.Parallel()
	for _, kind := range stateKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			st := kind.new(t)
			a := mustEngine(t, mustConfig(t, cfgYAML("day", "", "  - {field: count, function: count}\n")), EngineOptions{State: st})
			b := mustEngine(t, mustConfig(t, cfgYAML("day", "", "  - {field: data.x, function: sum}\n")), EngineOptions{State: st})
			if err := a.ProcessIncremental(ctx, fact("1", "deposit", 0, nil), &ProcessOptions{ProjectionKey: "k"}); err != nil {
				t.Fatal(err)
			}
			if err := b.ProcessIncremental(ctx, fact("2", "deposit", 0, nil), &ProcessOptions{ProjectionKey: "k"}); !errors.Is(err, ErrConfigChanged) {
				t.Fatalf("got %v, want ErrConfigChanged", err)
			}
			if _, err := b.Query(ctx, "k", QueryOptions{}); !errors.Is(err, ErrConfigChanged) {
				t.Fatalf("query: got %v, want ErrConfigChanged", err)
			}
			// Reordering fact types or aggregations is not a change.
			y := "source: account\nfactTypes: [withdrawal, deposit]\nmaterialize: true\nstorageVersion: 2\ntimeWindow: day\n" +
				"aggregations: [{field: data.x, function: sum}, {field: count, function: count}]\n"
			y1 := strings.Replace(strings.Replace(y, "[withdrawal, deposit]", "[deposit, withdrawal]", 1),
				"[{field: data.x, function: sum}, {field: count, function: count}]", "[{field: count, function: count}, {field: data.x, function: sum}]", 1)
			c1 := mustEngine(t, mustConfig(t, y), EngineOptions{State: st})
			c2 := mustEngine(t, mustConfig(t, y1), EngineOptions{State: st})
			if err := c1.ProcessIncremental(ctx, fact("1", "deposit", 0, nil), &ProcessOptions{ProjectionKey: "o"}); err != nil {
				t.Fatal(err)
			}
			if err := c2.ProcessIncremental(ctx, fact("2", "withdrawal", 0, nil), &ProcessOptions{ProjectionKey: "o"}); err != nil {
				t.Fatalf("reordered configuration refused: %v", err)
			}
		})
	}
}

// TestIncrementalBatchAtLeast: a batch given AtLeast applies only while
// the state's factsThroughId is at least it; on a state that went back
// (or is empty) it writes nothing and fails with ErrStateBehind, on every
// path of every format (one call, many calls, facts applied one by one).
func TestIncrementalBatchAtLeast(t *testing.T) {
	t.Parallel()
	for _, kind := range stateKinds {
		for _, sv := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/v%d", kind.name, sv), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				y := strings.Replace(cfgYAML("day", "", "  - {field: count, function: count}\n"),
					"storageVersion: 2", fmt.Sprintf("storageVersion: %d", sv), 1)
				st := kind.new(t)
				e := mustEngine(t, mustConfig(t, y), EngineOptions{State: st})
				d := ms("2024-02-29T10:00:00Z")
				opts := func(atLeast string) *ProcessOptions {
					return &ProcessOptions{ProjectionKey: "p", AtLeast: atLeast}
				}
				if _, err := e.ProcessIncrementalBatch(ctx, []Fact{fact("fct_01", "deposit", d, nil)}, opts("fct_01")); !errors.Is(err, ErrStateBehind) {
					t.Fatalf("empty state: %v, want ErrStateBehind", err)
				}
				if n, err := e.ProcessIncrementalBatch(ctx, []Fact{fact("fct_01", "deposit", d, nil)}, opts("")); err != nil || n != 1 {
					t.Fatalf("first batch: %d, %v", n, err)
				}
				many := make([]Fact, 300) // more than one script call
				for i := range many {
					many[i] = fact(fmt.Sprintf("fct_1%03d", i), "deposit", d, nil)
				}
				repeated := []Fact{fact("fct_02", "deposit", d, nil), fact("fct_02", "deposit", d, nil)} // not summed: fact by fact
				for _, batch := range [][]Fact{{fact("fct_02", "deposit", d, nil)}, repeated, many} {
					if _, err := e.ProcessIncrementalBatch(ctx, batch, opts("fct_99")); !errors.Is(err, ErrStateBehind) {
						t.Fatalf("state behind: %v, want ErrStateBehind", err)
					}
				}
				if n, err := e.ProcessIncrementalBatch(ctx, many, opts("fct_01")); err != nil || n != len(many) {
					t.Fatalf("state at fct_01: %d, %v", n, err)
				}
				en, err := e.Entry(ctx, "p", nil)
				if err != nil {
					t.Fatal(err)
				}
				if got := js(en); got != `{"value":{"2024-02-29":{"count":301}},"factsThroughId":"fct_1299"}` {
					t.Fatalf("entry: %s", got)
				}
			})
		}
	}
}
