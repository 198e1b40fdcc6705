package projection_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/factline/factline/internal/host/projection"
)

func ExampleParseConfig() {
	cfg, err := projection.ParseConfig([]byte(`
source: account
factTypes: [deposit]
timeWindow: day
groupBy: [data.country]
aggregations:
  - {field: count, function: count}
  - {field: data.payment.amount, function: sum}
materialize: true
`))
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.TimeWindow, cfg.GroupBy, cfg.Aggregations[1].ResultKey())

	// Every problem is reported, with its line.
	_, err = projection.ParseConfig([]byte(`
source: account
factTypes: []
timeWindow: week
aggregations:
  - {field: data.amount, function: median}
materialize: true
`))
	var ve *projection.ConfigValidationError
	if errors.As(err, &ve) {
		for _, issue := range ve.Issues {
			fmt.Println(issue)
		}
	}
	// Output:
	// day [data.country] payment_amount_sum
	// line 3: factTypes: must list at least one fact type
	// line 4: timeWindow: must be one of minute, hour, day, month (got "week")
	// line 6: aggregations[0].function: unknown function "median" (one of count, sum, avg, min, max, count_distinct)
}

func ExampleEngine_Process() {
	cfg, _ := projection.ParseConfig([]byte(`
source: account
factTypes: [deposit]
timeWindow: hour
groupBy: [data.country]
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: sum}
  - {field: data.amount, function: avg}
materialize: false
`))
	engine, _ := projection.NewEngine(cfg, projection.EngineOptions{})
	var facts []projection.Fact
	for _, raw := range []string{
		`{"id":"fct_1","type":"deposit","timestamp":1709251200000,"data":{"country":"US","amount":0.1}}`,
		`{"id":"fct_2","type":"deposit","timestamp":1709251260000,"data":{"country":"US","amount":0.2}}`,
		`{"id":"fct_3","type":"deposit","timestamp":1709254800000,"data":{"country":"DE","amount":5}}`,
		`{"id":"fct_4","type":"refund","timestamp":1709254800000,"data":{"country":"DE","amount":5}}`,
	} {
		f, err := projection.FactFromJSON([]byte(raw))
		if err != nil {
			panic(err)
		}
		facts = append(facts, f)
	}
	result, _ := engine.Process(facts, nil)
	out, _ := json.MarshalIndent(result, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "2024-03-01T00:US": {
	//     "amount_avg": 0.15,
	//     "amount_sum": 0.3,
	//     "count": 2
	//   },
	//   "2024-03-01T01:DE": {
	//     "amount_avg": 5,
	//     "amount_sum": 5,
	//     "count": 1
	//   }
	// }
}

func ExampleEngine_Query() {
	ctx := context.Background()
	cfg, _ := projection.ParseSettings([]byte(`
source: account
factTypes: [deposit]
timeWindow: day
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: avg}
  - {field: data.user, function: count_distinct}
materialize: true
storageVersion: 2
`))
	facts := []projection.Fact{
		{ID: "fct_1", Type: "deposit", Timestamp: 1709164800000, Data: map[string]any{"amount": json.Number("10"), "user": "ann"}}, // 2024-02-29
		{ID: "fct_2", Type: "deposit", Timestamp: 1709251200000, Data: map[string]any{"amount": json.Number("20"), "user": "bob"}}, // 2024-03-01
		{ID: "fct_3", Type: "deposit", Timestamp: 1709254800000, Data: map[string]any{"amount": json.Number("60"), "user": "ann"}},
	}
	engine, _ := projection.NewEngine(cfg, projection.EngineOptions{
		State:  projection.NewMemoryState(),
		Source: projection.SliceSource(facts),
	})
	for _, f := range facts {
		// Delivered twice: the second delivery has no effect.
		for range 2 {
			if err := engine.ProcessIncremental(ctx, f, &projection.ProcessOptions{ProjectionKey: "deposits"}); err != nil {
				panic(err)
			}
		}
	}
	show := func(q projection.QueryOptions) {
		r, err := engine.Query(ctx, "deposits", q)
		if err != nil {
			panic(err)
		}
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	}
	show(projection.QueryOptions{})
	show(projection.QueryOptions{From: 1709251200000})                // buckets starting at or after 2024-03-01
	show(projection.QueryOptions{Aggregate: true})                    // averages weighted by counts
	show(projection.QueryOptions{Aggregate: true, Mode: "compute"})   // from source facts
	show(projection.QueryOptions{Mode: projection.ModeVerify, To: 1}) // nothing in range: consistent
	// Output:
	// {"2024-02-29":{"amount_avg":10,"count":1,"user_distinct":1},"2024-03-01":{"amount_avg":40,"count":2,"user_distinct":2}}
	// {"2024-03-01":{"amount_avg":40,"count":2,"user_distinct":2}}
	// {"aggregated":{"amount_avg":30,"count":3,"user_distinct":2}}
	// {"aggregated":{"amount_avg":30,"count":3,"user_distinct":2}}
	// {"computed":{},"consistent":true,"drift":[],"materialized":{}}
}
