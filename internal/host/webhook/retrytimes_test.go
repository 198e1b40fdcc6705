package webhook

import "testing"

// A retry scheduled while an earlier one is still to be claimed at is
// kept: the claim at the earlier time does not cover it, and dropping it
// left the dispatcher asleep until its next poll (TestMaxAttemptsThenReplay
// under load, where the manual clock never reached that poll).
func TestRetryTimesKeepEveryScheduledRetry(t *testing.T) {
	t.Parallel()
	var r retryTimes
	steps := []struct {
		name     string
		add      int64 // 0: none
		claimAt  int64 // 0: none
		earliest bool
		next     int64
	}{
		{name: "first retry", add: 12_500, earliest: true, next: 12_500},
		{name: "a later retry while the first is noted", add: 37_500, next: 12_500},
		{name: "an earlier one", add: 5_000, earliest: true, next: 5_000},
		{name: "the same time again", add: 5_000, next: 5_000},
		{name: "claim at the first two", claimAt: 12_500, next: 37_500},
		{name: "claim before the last", claimAt: 37_499, next: 37_500},
		{name: "claim at the last", claimAt: 37_500, next: 0},
	}
	for _, s := range steps {
		if s.add != 0 {
			if got := r.add(s.add); got != s.earliest {
				t.Errorf("%s: add(%d) earliest = %v, want %v", s.name, s.add, got, s.earliest)
			}
		}
		if s.claimAt != 0 {
			r.claimedAt(s.claimAt)
		}
		if got := r.next(); got != s.next {
			t.Fatalf("%s: next = %d, want %d", s.name, got, s.next)
		}
	}
}

func TestRetryTimesAreBoundedAndKeepTheEarliest(t *testing.T) {
	t.Parallel()
	var r retryTimes
	for i := range maxRetryTimes + 10 {
		r.add(int64(1000 + i))
	}
	if n := len(r.times); n != maxRetryTimes {
		t.Fatalf("%d times kept, want the bound %d", n, maxRetryTimes)
	}
	if !r.add(1) || r.next() != 1 || len(r.times) != maxRetryTimes {
		t.Fatalf("an earlier time at the bound: next %d, %d kept", r.next(), len(r.times))
	}
	// Every kept time still comes out in order.
	prev := int64(0)
	for r.next() != 0 {
		at := r.next()
		if at < prev {
			t.Fatalf("%d after %d", at, prev)
		}
		prev = at
		r.claimedAt(at)
	}
}
