package pluginrt

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/factline/factline/sdk/abi"
)

func TestLatencyBuckets(t *testing.T) {
	t.Parallel()
	prev := -1
	for _, v := range []uint64{0, 1, 7, 8, 9, 15, 16, 100, 1000, 12345, 1 << 20, 1<<40 + 5, math.MaxUint64} {
		i := bucketOf(v)
		if i < prev || i >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d after %d", v, i, prev)
		}
		prev = i
		mid := float64(bucketValue(i))
		if v >= 8 && math.Abs(mid-float64(v))/float64(v) > 0.125 {
			t.Errorf("bucket of %d reads %v", v, mid)
		}
	}
}

func TestStatsQuantiles(t *testing.T) {
	t.Parallel()
	var s stats
	for i := range 1000 {
		o := outcomeOK
		switch i % 100 {
		case 1:
			o = outcomeError
		case 2:
			o = outcomeTrap
		case 3:
			o = outcomeTimeout
		case 4:
			o = outcomeCanceled
		}
		d := 20 * time.Microsecond
		if i%100 == 99 {
			d = 5 * time.Millisecond
		}
		s.record(o, d)
	}
	got := s.snapshot()
	if got.Calls != 1000 || got.Errors != 10 || got.Traps != 10 || got.Timeouts != 10 || got.Canceled != 10 {
		t.Errorf("counts = %+v", got)
	}
	near := func(d, want time.Duration) bool { return math.Abs(float64(d-want))/float64(want) <= 0.125 }
	if !near(got.P50, 20*time.Microsecond) || !near(got.P99, 20*time.Microsecond) || !near(got.Mean, 69800*time.Nanosecond) {
		t.Errorf("p50 %v p99 %v mean %v", got.P50, got.P99, got.Mean)
	}
	s.record(outcomeOK, 5*time.Millisecond)
	s.record(outcomeOK, 5*time.Millisecond)
	if got := s.snapshot(); !near(got.P99, 5*time.Millisecond) {
		t.Errorf("p99 with 12 slow calls in 1002 = %v", got.P99)
	}
}

func TestLogLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	l := newLogLimiter(func() time.Time { return now })
	for i := range logBurst {
		if _, ok := l.allow(); !ok {
			t.Fatalf("line %d refused within the burst", i)
		}
	}
	for range 5 {
		if _, ok := l.allow(); ok {
			t.Fatal("a line beyond the burst was allowed")
		}
	}
	now = now.Add(time.Second / logRate)
	dropped, ok := l.allow()
	if !ok || dropped != 5 {
		t.Errorf("after a refill: ok %v, dropped %d", ok, dropped)
	}
}

// TestUnrecordedCallsAreNotCounted: a call under Unrecorded (the host's
// smoke check) leaves the statistics alone; the same call without it
// counts as a call and an error.
func TestUnrecordedCallsAreNotCounted(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 1})
	p := load(t, h, "ledger")
	var ce *CallError
	if _, err := p.Decide(Unrecorded(t.Context()), decideInput("factline.smoke.unknown", `{}`)); !errors.As(err, &ce) || ce.Status != abi.StatusUnknownCommand {
		t.Fatalf("unknown command: %v", err)
	}
	if s := p.Stats(); s.Calls != 0 || s.Errors != 0 {
		t.Fatalf("after an unrecorded call: %+v", s)
	}
	if _, err := p.Decide(t.Context(), decideInput("factline.smoke.unknown", `{}`)); !errors.As(err, &ce) {
		t.Fatalf("unknown command: %v", err)
	}
	if s := p.Stats(); s.Calls != 1 || s.Errors != 1 {
		t.Fatalf("after a recorded call: %+v", s)
	}
}
