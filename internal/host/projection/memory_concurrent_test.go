package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

const memoryDistinctYAML = `
source: account
factTypes: [deposit]
timeWindow: minute
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: sum}
  - {field: data.payer, function: count_distinct}
materialize: true
storageVersion: 2
`

// TestMemoryStateQueriesRunBesideWrites: queries of the in-process state,
// per bucket and aggregated with an exact distinct count, run side by side
// (they share a read lock) while batches are applied; run with -race, any
// write a query made to the shared model would be reported. The result
// afterwards equals compute mode.
func TestMemoryStateQueriesRunBesideWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := mustEngine(t, mustConfig(t, memoryDistinctYAML), EngineOptions{State: NewMemoryState()})
	base := ms("2024-01-01T00:00:00Z")
	var facts []Fact
	for i := range int64(2000) {
		facts = append(facts, Fact{ID: fmt.Sprint("m", i), Type: "deposit", Timestamp: base + (i%600)*60_000,
			Data: map[string]any{"amount": json.Number(fmt.Sprint(i)), "payer": fmt.Sprint("p", i%97)}})
	}
	if _, err := e.ProcessIncrementalBatch(ctx, facts[:100], &ProcessOptions{ProjectionKey: "k"}); err != nil {
		t.Fatal(err)
	}
	queryWhileWriting(t, e, e, facts[100:], func(q int) QueryOptions {
		return QueryOptions{From: base, To: base + 1440*60_000 - 1, Aggregate: q%2 == 0}
	})
	checkQuery(t, e, facts, base, base+1440*60_000-1, "after concurrent queries")
}
