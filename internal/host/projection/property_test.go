package projection

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// genStream returns facts over a few days around a month end and a leap
// day, with every kind of awkward value, in time order.
func genStream(r *rand.Rand, n int) []Fact {
	start := ms("2024-02-28T21:30:00Z")
	countries := []any{"US", "DE", "a:b", "50%", nil, num("7"), true}
	var facts []Fact
	ts := start
	for i := 0; i < n; i++ {
		ts += r.Int64N(25 * 60_000) // up to 25 minutes apart: spans ~3.5 days
		typ := "deposit"
		switch x := r.IntN(10); {
		case x == 0:
			typ = "other"
		case x == 1:
			typ = "withdrawal"
		}
		data := map[string]any{}
		switch r.IntN(8) {
		case 0: // missing
		case 1:
			data["amount"] = "abc"
		case 2:
			data["amount"] = fmt.Sprintf("%d.%02d", r.IntN(1000), r.IntN(100)) // numeric string
		case 3:
			data["amount"] = num(fmt.Sprintf("-%d.%d", r.IntN(50), r.IntN(10)))
		case 4:
			data["amount"] = num(fmt.Sprintf("%de%d", r.IntN(9)+1, r.IntN(3)))
		default:
			data["amount"] = num(fmt.Sprintf("%d.%03d", r.IntN(10000), r.IntN(1000)))
		}
		if c := countries[r.IntN(len(countries))]; c != nil || r.IntN(2) == 0 {
			data["country"] = c
		}
		if r.IntN(6) > 0 {
			data["user"] = fmt.Sprintf("u%d", r.IntN(40))
		}
		f := Fact{ID: fmt.Sprintf("fct_%06d", i), Type: typ, Timestamp: ts, Data: data}
		if r.IntN(3) == 0 {
			f.Subtype = []string{"manual", "auto"}[r.IntN(2)]
		}
		facts = append(facts, f)
	}
	return facts
}

// deliver returns the stream as it is delivered: some facts late (moved
// later in the sequence), some delivered twice.
func deliver(r *rand.Rand, facts []Fact) []Fact {
	out := append([]Fact(nil), facts...)
	for i := 0; i < len(out)/8; i++ {
		a := r.IntN(len(out))
		b := min(len(out)-1, a+r.IntN(200))
		f := out[a]
		copy(out[a:b], out[a+1:b+1])
		out[b] = f
	}
	for i := 0; i < len(out)/10; i++ {
		f := out[r.IntN(len(out))]
		p := r.IntN(len(out) + 1)
		out = append(out[:p], append([]Fact{f}, out[p:]...)...)
	}
	return out
}

var propertyConfigs = []struct{ name, yaml string }{
	{"minute+rollup", `
source: account
factTypes: [deposit, withdrawal]
timeWindow: minute
groupBy: [data.country]
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: sum}
  - {field: data.amount, function: avg}
  - {field: data.amount, function: min}
  - {field: data.amount, function: max}
  - {field: data.user, function: count_distinct}
materialize: true
storageVersion: %d
rollup: {enabled: true}
`},
	{"hour two groups", `
source: account
factTypes: [deposit, withdrawal]
timeWindow: hour
groupBy: [data.country, subtype]
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: avg}
  - {field: data.user, function: count_distinct}
materialize: true
storageVersion: %d
rollup: {enabled: true}
`},
	{"day no rollup", `
source: account
factTypes: [deposit]
timeWindow: day
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: sum}
  - {field: data.amount, function: max}
materialize: true
storageVersion: %d
`},
	{"flat", `
source: account
factTypes: [deposit, withdrawal]
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: sum}
  - {field: data.amount, function: min}
  - {field: data.user, function: count_distinct}
materialize: true
storageVersion: %d
`},
	{"groups without window", `
source: account
factTypes: [deposit, withdrawal]
groupBy: [data.country]
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: avg}
materialize: true
storageVersion: %d
`},
}

// TestIncrementalEqualsBatchEqualsCompute is the property test: for random
// streams delivered shuffled, with duplicates and late facts, incremental
// processing into cached state, batch processing and compute mode agree,
// on both states and both storage formats, over random ranges, plain and
// aggregated, while rollups run as the clock advances.
func TestIncrementalEqualsBatchEqualsCompute(t *testing.T) {
	t.Parallel()
	seeds := []uint64{1, 2, 3}
	for _, kind := range stateKinds {
		for _, pc := range propertyConfigs {
			for _, sv := range []int{1, 2} {
				for _, seed := range seeds {
					name := fmt.Sprintf("%s/%s/v%d/seed%d", kind.name, pc.name, sv, seed)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						checkProperty(t, kind.new(t), fmt.Sprintf(pc.yaml, sv), seed)
					})
				}
			}
		}
	}
}

func checkProperty(t *testing.T, st CachedState, yaml string, seed uint64) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 99))
	n := 300
	facts := genStream(r, n)
	delivered := deliver(r, facts)
	cfg := mustConfig(t, yaml)
	clk := newClock(time.UnixMilli(facts[0].Timestamp))
	src := SliceSource(delivered) // the source holds duplicates too
	e := mustEngine(t, cfg, EngineOptions{State: st, Source: src, Now: clk.Now})
	key := "prop"

	// Incremental: one fact or a small batch at a time, the clock following
	// the newest fact seen so that rollups seal levels while late facts
	// still arrive.
	newest := int64(0)
	for i := 0; i < len(delivered); {
		k := 1 + r.IntN(12)
		if r.IntN(3) == 0 {
			k = 1
		}
		chunk := delivered[i:min(i+k, len(delivered))]
		i += len(chunk)
		for _, f := range chunk {
			newest = max(newest, f.Timestamp)
		}
		clk.Set(time.UnixMilli(newest + 60_000))
		if len(chunk) == 1 {
			if err := e.ProcessIncremental(ctx, chunk[0], &ProcessOptions{ProjectionKey: key}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := e.ProcessIncrementalBatch(ctx, chunk, &ProcessOptions{ProjectionKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	// Replaying everything again changes nothing.
	if applied, err := e.ProcessIncrementalBatch(ctx, delivered, &ProcessOptions{ProjectionKey: key}); err != nil || applied != 0 {
		t.Fatalf("replay applied %d facts (err %v), want 0", applied, err)
	}

	shuffled := append([]Fact(nil), delivered...)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	batch, err := e.Process(shuffled, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		mat, err := e.Query(ctx, key, QueryOptions{})
		if err != nil {
			t.Fatalf("%s: materialized: %v", stage, err)
		}
		comp, err := e.Query(ctx, key, QueryOptions{Mode: ModeCompute})
		if err != nil {
			t.Fatalf("%s: compute: %v", stage, err)
		}
		if js(mat) != js(batch) || js(comp) != js(batch) {
			t.Fatalf("%s: results differ\nbatch:        %s\nmaterialized: %s\ncompute:      %s", stage, js(batch), js(mat), js(comp))
		}
		if cfg.TimeWindow == "" {
			return
		}
		lo, hi := facts[0].Timestamp, facts[len(facts)-1].Timestamp
		for i := 0; i < 12; i++ {
			a := lo - 3_600_000 + r.Int64N(hi-lo+7_200_000)
			b := a + r.Int64N(hi-a+3_600_000)
			q := QueryOptions{From: a, To: b, Aggregate: i%2 == 0}
			if i == 3 {
				q.From = 0
			}
			if i == 5 {
				q.To = 0
			}
			if i == 7 && len(cfg.GroupBy) > 0 {
				q.Groups = map[string]string{cfg.GroupBy[0]: "US"}
			}
			mq := q
			cq := q
			cq.Mode = ModeCompute
			m, err := e.Query(ctx, key, mq)
			if err != nil {
				t.Fatal(err)
			}
			c, err := e.Query(ctx, key, cq)
			if err != nil {
				t.Fatal(err)
			}
			if js(exactView(m)) != js(c) {
				t.Fatalf("%s: range %+v differs\nmaterialized: %s\ncompute:      %s", stage, q, js(m), js(c))
			}
			if i == 0 {
				vq := q
				vq.Mode = ModeVerify
				v, err := e.Query(ctx, key, vq)
				if err != nil {
					t.Fatal(err)
				}
				if v["consistent"] != true {
					t.Fatalf("%s: verify reports drift: %s", stage, js(v["drift"]))
				}
			}
		}
	}
	check("while open")
	// Seal everything (months included) and check again: aggregated ranges
	// are then answered from the coarsest buckets.
	clk.Set(time.UnixMilli(facts[len(facts)-1].Timestamp).AddDate(0, 2, 0))
	if _, err := e.Rollup(ctx, key, nil); err != nil {
		t.Fatal(err)
	}
	check("sealed")
}
