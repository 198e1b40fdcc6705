package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/ratelimit"
	"github.com/factline/factline/internal/testutil"
)

// TestRedisBatchesConcurrentDecisions: exact decisions that arrive while a
// round trip is in flight share the next one (one pipeline), and each is
// decided as if alone.
func TestRedisBatchesConcurrentDecisions(t *testing.T) {
	t.Parallel()
	const n = 64
	client := redisClient(t)
	lim := ratelimit.NewRedis(client, ratelimit.RedisOptions{CallTimeout: time.Minute})
	c := ctx(t)
	first, err := lim.Allow(c, "batch-warm", 60) // loads the script
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{hold: make(chan struct{}), firstSize: make(chan int, 1)}
	client.AddHook(g)

	var wg sync.WaitGroup
	decisions := make([]ratelimit.Decision, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			decisions[i], errs[i] = lim.Allow(c, fmt.Sprintf("batch-%d", i), 60)
		}()
	}
	// The first round trip is held until every other decision waits.
	var size int
	select {
	case size = <-g.firstSize:
	case <-c.Done():
		t.Fatal("no round trip started")
	}
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%d decisions pending", n-size), func() bool {
		return lim.PendingDecisions() == n-size
	})
	close(g.hold)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("decision %d: %v", i, errs[i])
		}
		if d := decisions[i]; !d.Allowed || d.Remaining != first.Remaining || d.Limit != 60 {
			t.Errorf("decision %d = %+v, want allowed with %d remaining, like a fresh key", i, d, first.Remaining)
		}
	}
	want := 2 // the held one and one for all that waited
	if size == n {
		want = 1
	}
	if trips, cmds := g.counts(); trips != want || cmds != n {
		t.Errorf("%d decisions took %d round trips carrying %d script calls, want %d carrying %d", n, trips, cmds, want, n)
	}
}

// gate is a go-redis hook that holds the first round trip of the
// limiter's script until hold is closed and counts such round trips and
// the script calls they carry (connection set-up is not counted).
type gate struct {
	hold      chan struct{}
	firstSize chan int
	mu        sync.Mutex
	trips     int
	cmds      int
}

func (g *gate) enter(n int) {
	g.mu.Lock()
	g.trips++
	g.cmds += n
	first := g.trips == 1
	g.mu.Unlock()
	if first {
		g.firstSize <- n
		<-g.hold
	}
}

func (g *gate) counts() (int, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.trips, g.cmds
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			g.enter(1)
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if c.Name() == "evalsha" {
				n++
			}
		}
		if n > 0 {
			g.enter(n)
		}
		return next(ctx, cmds)
	}
}
