package stream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/stream"
	"github.com/factline/factline/internal/teststore"
)

// TestLagHistoryKeepsTheLastSamples: each sample records the head and
// every consumer's lag at that moment; the ring keeps the newest, oldest
// first, and starts empty.
func TestLagHistoryKeepsTheLastSamples(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		st := teststore.Open(t, backend)
		ctx := context.Background()
		h := stream.NewLagHistory(3, nil)
		if got := h.Samples(); len(got) != 0 {
			t.Fatalf("a new history has %v", got)
		}
		t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		for i := 0; i < 5; i++ {
			appendN(t, st, 2)
			if err := st.SetCheckpoint(ctx, "a", int64(i)); err != nil {
				t.Fatal(err)
			}
			if i >= 2 {
				if err := st.SetCheckpoint(ctx, "b", int64(2*i+2)); err != nil {
					t.Fatal(err)
				}
			}
			if err := h.Sample(ctx, st, t0.Add(time.Duration(i)*5*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		got := h.Samples()
		var want []string
		for i := 2; i < 5; i++ {
			head := int64(2*i + 2)
			want = append(want, fmt.Sprintf("%d head %d a %d b %d", t0.Add(time.Duration(i)*5*time.Second).UnixMilli(), head, head-int64(i), 0))
		}
		var have []string
		for _, s := range got {
			have = append(have, fmt.Sprintf("%d head %d a %d b %d", s.At, s.Head, s.Lag["a"], s.Lag["b"]))
		}
		if fmt.Sprint(have) != fmt.Sprint(want) {
			t.Errorf("samples\n%v\nwant\n%v", have, want)
		}
	})
}

// TestLagHistoryLeavesOutConsumersNotKept: a checkpoint whose consumer
// nobody runs any more stays stored but is not sampled.
func TestLagHistoryLeavesOutConsumersNotKept(t *testing.T) {
	st := teststore.Open(t, "sqlite")
	ctx := context.Background()
	appendN(t, st, 3)
	for _, name := range []string{"kept", "gone"} {
		if err := st.SetCheckpoint(ctx, name, 1); err != nil {
			t.Fatal(err)
		}
	}
	h := stream.NewLagHistory(2, func(name string) bool { return name != "gone" })
	if err := h.Sample(ctx, st, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := h.Samples(); len(got) != 1 || fmt.Sprint(got[0].Lag) != "map[kept:2]" {
		t.Errorf("samples %+v, want one with only kept's lag of 2", got)
	}
}
