package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/ratelimit"
)

// TestMemoryHammer: 32 goroutines on one key at a frozen clock get exactly
// rpm requests through, and each Remaining value is handed out once.
func TestMemoryHammer(t *testing.T) {
	t.Parallel()
	const rpm, goroutines, each = 1000, 32, 100 // 3200 requests
	lim := ratelimit.NewMemory(ratelimit.MemoryOptions{Clock: newClock()})
	var (
		mu        sync.Mutex
		remaining = map[int]int{}
		rejected  int
		wg        sync.WaitGroup
		start     = make(chan struct{})
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range each {
				d, err := lim.Allow(context.Background(), "tenant", rpm)
				if err != nil {
					t.Error(err)
					return
				}
				// Other keys at the same time, on every shard.
				if _, err := lim.Allow(context.Background(), fmt.Sprint("other-", g, "-", i), rpm); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if d.Allowed {
					remaining[d.Remaining]++
				} else {
					rejected++
					if d.RetryAfter != 60*time.Millisecond {
						t.Errorf("rejected with RetryAfter %v, want 60ms", d.RetryAfter)
					}
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(remaining) != rpm || rejected != goroutines*each-rpm {
		t.Fatalf("%d allowed with %d distinct Remaining values, %d rejected; want %d allowed, %d rejected",
			goroutines*each-rejected, len(remaining), rejected, rpm, goroutines*each-rpm)
	}
	for r := range rpm {
		if remaining[r] != 1 {
			t.Fatalf("Remaining %d was handed out %d times, want once", r, remaining[r])
		}
	}
}

// TestMemoryEviction: keys that have fully refilled are dropped, so memory
// is bounded by the keys in use, not by every key ever seen.
func TestMemoryEviction(t *testing.T) {
	t.Parallel()
	clk := newClock()
	lim := ratelimit.NewMemory(ratelimit.MemoryOptions{Clock: clk})
	ctx := context.Background()
	for i := range 5000 {
		if _, err := lim.Allow(ctx, fmt.Sprint("old-", i), 60); err != nil {
			t.Fatal(err)
		}
	}
	// One busy key that has not refilled must survive the sweeps.
	for range 60 {
		if _, err := lim.Allow(ctx, "busy", 60); err != nil {
			t.Fatal(err)
		}
	}
	if n := lim.Len(); n != 5001 {
		t.Fatalf("Len = %d, want 5001", n)
	}
	// Every old key refilled after 1 s; "busy" needs 60 s.
	clk.Advance(30 * time.Second)
	// 5000 new keys reach every one of the 64 shards, each of which sweeps.
	for i := range 5000 {
		if _, err := lim.Allow(ctx, fmt.Sprint("new-", i), 60); err != nil {
			t.Fatal(err)
		}
	}
	if n := lim.Len(); n != 5001 {
		t.Fatalf("Len after the sweep = %d, want 5001 (the new keys and busy)", n)
	}
	d, err := lim.Allow(ctx, "busy", 60)
	if err != nil || !d.Allowed || d.Remaining != 29 || d.ResetAfter != 31*time.Second {
		t.Fatalf("busy after 30 s = %+v, %v; want its state kept: 29 remaining, reset in 31s", d, err)
	}
}

// TestMemoryRealClock: without an injected clock the limiter runs on
// time.Now.
func TestMemoryRealClock(t *testing.T) {
	t.Parallel()
	lim := ratelimit.NewMemory(ratelimit.MemoryOptions{})
	for i := range 2 {
		d, err := lim.Allow(context.Background(), "k", 1)
		if err != nil || d.Allowed != (i == 0) {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
		if !d.Allowed && (d.RetryAfter <= 59*time.Second || d.RetryAfter > time.Minute) {
			t.Fatalf("RetryAfter = %v, want just under a minute", d.RetryAfter)
		}
	}
}
