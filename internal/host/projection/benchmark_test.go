package projection

import (
	"encoding/json"
	"fmt"
	"testing"
)

// Quick in-process benchmarks; the measured ones, against Redis, with
// targets and RESULTS.md, are in bench/projection_test.go.

func benchFacts(n int) []Fact {
	facts := make([]Fact, n)
	countries := []string{"US", "DE", "FR", "GB", "JP", "BR", "IN", "CA"}
	base := ms("2024-01-01T00:00:00Z")
	for i := range facts {
		facts[i] = Fact{ID: fmt.Sprintf("fct_%08d", i), Type: "deposit", Timestamp: base + int64(i)*1000,
			Data: map[string]any{"amount": json.Number(fmt.Sprintf("%d.%02d", i%1000, i%100)), "country": countries[i%8]}}
	}
	return facts
}

func BenchmarkProcess(b *testing.B) {
	e := mustEngine(b, mustConfig(b, cfgYAML("hour", "[data.country]",
		"  - {field: count, function: count}\n  - {field: data.amount, function: sum}\n  - {field: data.amount, function: avg}\n")), EngineOptions{})
	facts := benchFacts(100_000)
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Process(facts, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(facts))/b.Elapsed().Seconds(), "facts/s")
}

func BenchmarkFactFromJSON(b *testing.B) {
	raw := []byte(`{"id":"fct_01J0000000000000000000000","type":"deposit","subtype":"manual","timestamp":1704067200000,` +
		`"entity_id":"acct-0001","data":{"amount":12.34,"country":"US","user":"u42","currency":"USD"}}`)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := FactFromJSON(raw); err != nil {
			b.Fatal(err)
		}
	}
}
