package projection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// TestConcurrentEngines runs two engines, each with its own Redis client,
// incrementally processing halves of a stream into one Redis at the same
// time (with rollups sealing levels as their clocks advance), and compares
// with one engine processing the whole stream alone.
func TestConcurrentEngines(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"redis", "redis-cluster"} {
		for _, split := range []string{"disjoint halves", "both the whole stream"} {
			for _, sv := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/%s/v%d", backend, split, sv), func(t *testing.T) {
					t.Parallel()
					ctx := context.Background()
					r := rand.New(rand.NewPCG(7, uint64(sv)))
					n := 1200
					if sv == 1 {
						n = 300 // every format-1 write rewrites the blob
					}
					facts := deliver(r, genStream(r, n))
					cfg := mustConfig(t, fmt.Sprintf(propertyConfigs[0].yaml, sv))
					// Each engine has a client of its own, as two processes would.
					var newState func() *RedisState
					if backend == "redis" {
						first := redisClient(t)
						newState = func() *RedisState {
							return NewRedisState(anotherClient(t, first)).WithPrefix("conc:")
						}
					} else {
						cl := testutil.RedisCluster(t)
						newState = func() *RedisState {
							return NewRedisState(cl.Client(t)).WithPrefix(cl.Prefix + "conc:")
						}
					}
					var halves [2][]Fact
					for i, f := range facts {
						if split == "disjoint halves" {
							halves[i%2] = append(halves[i%2], f)
						} else {
							halves[0], halves[1] = facts, facts
						}
					}
					var wg sync.WaitGroup
					errs := make([]error, 2)
					for w := 0; w < 2; w++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							clk := newClock(time.UnixMilli(facts[0].Timestamp))
							e := mustEngine(t, cfg, EngineOptions{State: newState(), Now: clk.Now})
							rr := rand.New(rand.NewPCG(uint64(w), 1))
							part := halves[w]
							for i := 0; i < len(part); {
								k := 1 + rr.IntN(40)
								chunk := part[i:min(i+k, len(part))]
								i += len(chunk)
								clk.Set(time.UnixMilli(chunk[len(chunk)-1].Timestamp))
								if _, err := e.ProcessIncrementalBatch(ctx, chunk, &ProcessOptions{ProjectionKey: "k"}); err != nil {
									errs[w] = err
									return
								}
							}
						}()
					}
					wg.Wait()
					if errs[0] != nil || errs[1] != nil {
						t.Fatal(errs)
					}

					// One engine alone, in another namespace.
					clk := newClock(time.UnixMilli(facts[0].Timestamp))
					alone := mustEngine(t, cfg, EngineOptions{State: newState().WithPrefix("alone:"), Now: clk.Now})
					for i := 0; i < len(facts); i += 50 {
						chunk := facts[i:min(i+50, len(facts))]
						clk.Set(time.UnixMilli(chunk[len(chunk)-1].Timestamp))
						if _, err := alone.ProcessIncrementalBatch(ctx, chunk, &ProcessOptions{ProjectionKey: "k"}); err != nil {
							t.Fatal(err)
						}
					}
					end := time.UnixMilli(facts[len(facts)-1].Timestamp).AddDate(0, 2, 0)
					clk.Set(end)
					shared := mustEngine(t, cfg, EngineOptions{State: newState(), Now: func() time.Time { return end }, Source: SliceSource(facts)})
					for _, e := range []*Engine{alone, shared} {
						if _, err := e.Rollup(ctx, "k", nil); err != nil {
							t.Fatal(err)
						}
					}
					for _, q := range []QueryOptions{{}, {Aggregate: true}, {Aggregate: true, From: facts[0].Timestamp + 7*msHour}} {
						a, err := alone.Query(ctx, "k", q)
						if err != nil {
							t.Fatal(err)
						}
						b, err := shared.Query(ctx, "k", q)
						if err != nil {
							t.Fatal(err)
						}
						if js(a) != js(b) {
							t.Fatalf("query %+v: two engines\n%s\none engine\n%s", q, js(b), js(a))
						}
					}
					if v, err := shared.Verify(ctx, "k", QueryOptions{Aggregate: true}); err != nil || !v.Consistent {
						t.Fatalf("verify: %v %v", err, v.Drift)
					}
				})
			}
		}
	}
}

// TestSameBucketHammer has eight clients add facts to one bucket at once.
func TestSameBucketHammer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := redisClient(t)
	cfg := mustConfig(t, cfgYAML("hour", "", "  - {field: count, function: count}\n  - {field: data.n, function: sum}\n  - {field: data.n, function: max}\n"))
	const workers, each = 8, 250
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := mustEngine(t, cfg, EngineOptions{State: NewRedisState(anotherClient(t, first))})
			for i := 0; i < each; i++ {
				f := fact(fmt.Sprintf("%d-%d", w, i), "deposit", ms("2024-06-01T10:00:00Z")+int64(i), map[string]any{"n": num(fmt.Sprintf("%d.001", w*each+i))})
				if err := e.ProcessIncremental(ctx, f, &ProcessOptions{ProjectionKey: "h"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e := mustEngine(t, cfg, EngineOptions{State: NewRedisState(first)})
	r, err := e.Query(ctx, "h", QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// sum of k + 0.001 for k in 0..1999 = 1999000 + 2
	if got := js(r); got != `{"2024-06-01T10":{"count":2000,"n_max":1999.001,"n_sum":1999002}}` {
		t.Fatalf("got %s", got)
	}
}

// TestTenantsDoNotCollide checks prefixes keep projections apart.
func TestTenantsDoNotCollide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := NewRedisState(redisClient(t))
	cfg := mustConfig(t, cfgYAML("day", "", "  - {field: count, function: count}\n"))
	a := mustEngine(t, cfg, EngineOptions{State: root.WithPrefix("factline:proj:tenant-a:p1:")})
	b := mustEngine(t, cfg, EngineOptions{State: root.WithPrefix("factline:proj:tenant-b:p1:")})
	f := fact("same-id", "deposit", 0, nil)
	for _, e := range []*Engine{a, b} {
		if err := e.ProcessIncremental(ctx, f, &ProcessOptions{ProjectionKey: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []*Engine{a, b} {
		r, _ := e.Query(ctx, "k", QueryOptions{})
		if js(r) != `{"1970-01-01":{"count":1}}` {
			t.Fatalf("tenant result %s", js(r))
		}
	}
	if err := a.opts.State.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if r, _ := a.Query(ctx, "k", QueryOptions{}); js(r) != `{}` {
		t.Fatalf("after delete: %s", js(r))
	}
	if r, _ := b.Query(ctx, "k", QueryOptions{}); js(r) != `{"1970-01-01":{"count":1}}` {
		t.Fatalf("other tenant after delete: %s", js(r))
	}
}

// TestScriptsReloaded checks recovery after Redis lost its scripts. It
// flushes the scripts of the whole server, so it does not run in parallel
// with the other tests of the package.
func TestScriptsReloaded(t *testing.T) {
	ctx := context.Background()
	rdb := redisClient(t)
	e := mustEngine(t, mustConfig(t, cfgYAML("day", "", "  - {field: count, function: count}\n")), EngineOptions{State: NewRedisState(rdb)})
	for i := 0; i < 3; i++ {
		if err := e.ProcessIncremental(ctx, fact(fmt.Sprint(i), "deposit", 0, nil), &ProcessOptions{ProjectionKey: "k"}); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Query(ctx, "k", QueryOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if r, _ := e.Query(ctx, "k", QueryOptions{}); js(r) != `{"1970-01-01":{"count":3}}` {
		t.Fatalf("got %s", js(r))
	}
}

// TestLargeQueryPaging reads thousands of buckets, which takes several
// load calls, and compares with compute mode, plain and filtered.
func TestLargeQueryPaging(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var facts []Fact
	for i := 0; i < 3000; i++ {
		facts = append(facts, fact(fmt.Sprint(i), "deposit", ms("2024-02-29T00:00:00Z")+int64(i)*20_000,
			map[string]any{"country": []string{"US", "DE", "FR"}[i%3], "amount": num(fmt.Sprintf("%d.5", i)), "user": fmt.Sprint("u", i%50)}))
	}
	e := mustEngine(t, mustConfig(t, cfgYAML("minute", "[data.country]", allAggs)), EngineOptions{State: NewRedisState(redisClient(t)), Source: SliceSource(facts)})
	if _, err := e.ProcessIncrementalBatch(ctx, facts, &ProcessOptions{ProjectionKey: "big"}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []QueryOptions{{}, {Groups: map[string]string{"data.country": "DE"}}, {From: ms("2024-02-29T03:00:00Z")}} {
		m, err := e.Query(ctx, "big", q)
		if err != nil {
			t.Fatal(err)
		}
		q.Mode = ModeCompute
		c, _ := e.Query(ctx, "big", q)
		if js(m) != js(c) || len(m) < 500 {
			t.Fatalf("query %+v: %d buckets, compute %d", q, len(m), len(c))
		}
	}
}

// TestSealRace applies a late fact between the moment a rollup reads a
// level's children and the moment it seals them: the seal must notice and
// read again, so that the sealed hour holds the late fact in every value.
func TestSealRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := NewRedisState(redisClient(t))
	clk := newClock(at("2024-05-01T10:30:00Z"))
	facts := []Fact{
		fact("1", "deposit", ms("2024-05-01T10:05:00Z"), map[string]any{"amount": num("1"), "user": "a"}),
		fact("2", "deposit", ms("2024-05-01T10:06:00Z"), map[string]any{"amount": num("2"), "user": "b"}),
	}
	late := fact("3", "deposit", ms("2024-05-01T10:05:30Z"), map[string]any{"amount": num("4"), "user": "c"})
	e := mustEngine(t, mustConfig(t, cfgYAML("minute", "", allAggs)+"rollup: {enabled: true}\n"),
		EngineOptions{State: st, Now: clk.Now, Source: SliceSource(append(facts, late))})
	if _, err := e.ProcessIncrementalBatch(ctx, facts, &ProcessOptions{ProjectionKey: "s"}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	st.root.beforeSeal = func() {
		calls++
		if calls == 1 {
			// Another process's late fact; its clock has not reached
			// the end of the hour, so it does not seal anything itself.
			other := NewRedisState(st.rdb).WithPrefix(st.prefix)
			early := newClock(at("2024-05-01T10:30:00Z"))
			if err := mustEngine(t, e.cfg, EngineOptions{State: other, Now: early.Now}).ProcessIncremental(ctx, late, &ProcessOptions{ProjectionKey: "s"}); err != nil {
				t.Error(err)
			}
		}
	}
	clk.Set(at("2024-05-01T11:00:00Z"))
	if _, err := e.Rollup(ctx, "s", nil); err != nil {
		t.Fatal(err)
	}
	st.root.beforeSeal = nil
	if calls < 2 {
		t.Fatalf("the seal did not notice the late fact (%d reads)", calls)
	}
	if got := levelResult(t, e, st, "s", 1); got != `{"2024-05-01T10":{"count":3,"payment_amount_avg":null,"payment_amount_max":null,"payment_amount_min":null,"payment_amount_sum":0,"user_distinct":3}}` {
		t.Fatalf("sealed hour: %s", got)
	}
	if v, err := e.Verify(ctx, "s", QueryOptions{Aggregate: true}); err != nil || !v.Consistent {
		t.Fatalf("verify: %v %v", err, v.Drift)
	}
}

// TestClusterOneSlotPerProjection: on a Redis Cluster every key of one
// projection key (meta, lock, indexes, buckets, sketches, dedupe sets)
// hashes to one slot (CLUSTER KEYSLOT), different projection keys spread
// over several slots of all three masters, and Delete removes every key
// of each from whichever master holds it. Some projection keys hold glob
// characters: the escaped pattern Delete scans with carries another hash
// tag than the keys, so a SCAN routed by the pattern's tag (as go-redis
// routes it) looks on the wrong master; only scanning every master finds
// them.
func TestClusterOneSlotPerProjection(t *testing.T) {
	ctx := context.Background()
	cl := testutil.RedisCluster(t)
	rdb := cl.Client(t)
	prefix := cl.Prefix + "slots:"
	st := NewRedisState(rdb).WithPrefix(prefix)
	e := mustEngine(t, mustConfig(t, fmt.Sprintf(propertyConfigs[0].yaml, 2)), EngineOptions{State: st})
	facts := genStream(rand.New(rand.NewPCG(3, 3)), 60)
	projections := []string{"acme:orders:f1", "acme:visits:f1", "globex:orders:f1", "initech:orders:f2", "umbrella:stock:f1", "hooli:orders:f1",
		"acme:orders[eu]:f1", "globex:*:f1", "initech:or?ders:f2", `hooli:a\b:f1`}
	for _, key := range projections {
		if _, err := e.ProcessIncrementalBatch(ctx, facts, &ProcessOptions{ProjectionKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	// perMaster lists the keys under the prefix on each master.
	perMaster := func() map[string][]string {
		var mu sync.Mutex
		keys := map[string][]string{}
		err := rdb.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			ks, err := n.Keys(ctx, prefix+"*").Result()
			mu.Lock()
			keys[n.Options().Addr] = append(keys[n.Options().Addr], ks...)
			mu.Unlock()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	masterOf := func(key string) string {
		n, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return n.Options().Addr
	}
	before := perMaster()
	slotsOf := map[string]map[int64]int{} // projection -> slot -> keys
	for _, keys := range before {
		for _, k := range keys {
			proj := ""
			for _, p := range projections {
				if strings.HasPrefix(k, prefix+"{"+p+"}") {
					proj = p
				}
			}
			if proj == "" {
				t.Fatalf("key %q belongs to no projection", k)
			}
			slot, err := rdb.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if slotsOf[proj] == nil {
				slotsOf[proj] = map[int64]int{}
			}
			slotsOf[proj][slot]++
		}
	}
	distinct := map[int64]bool{}
	for _, p := range projections {
		if len(slotsOf[p]) != 1 {
			t.Fatalf("projection %s: keys in slots %v, want one slot", p, slotsOf[p])
		}
		for slot, n := range slotsOf[p] {
			if n < 5 {
				t.Fatalf("projection %s: %d keys, want its meta, index, buckets and dedupe sets", p, n)
			}
			distinct[slot] = true
		}
	}
	if len(distinct) < len(projections)/2 {
		t.Errorf("%d projections share %d slots, want them spread", len(projections), len(distinct))
	}
	for _, m := range cl.Addrs {
		if len(before[m]) == 0 {
			t.Fatalf("no keys on master %s: want keys on all three", m)
		}
	}
	// The test shows something only if a pattern's own hash tag leads to
	// another master than its keys'.
	misrouted := 0
	for _, p := range projections {
		pattern := globEscape(prefix+"{"+p+"}") + ":*"
		if masterOf(pattern) != masterOf(prefix+"{"+p+"}") {
			misrouted++
		}
	}
	if misrouted == 0 {
		t.Fatal("every Delete pattern's hash tag is on its keys' master; the glob keys show nothing")
	}

	for _, p := range projections {
		if err := st.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for m, left := range perMaster() {
		if len(left) != 0 {
			t.Errorf("after Delete, %d of %d keys left on master %s: %v", len(left), len(before[m]), m, left[:min(5, len(left))])
		}
	}
}

// roundTrips is a go-redis hook that counts round trips: single commands
// and pipelines alike.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestIncrementalBatchRoundTrips: a batch that fits one script call is
// applied, factsThroughId included, in one round trip to Redis; a larger
// one in a pipeline of calls and a last call that moves factsThroughId.
func TestIncrementalBatchRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := mustConfig(t, cfgYAML("hour", "[data.country]", "  - {field: count, function: count}\n  - {field: data.n, function: sum}\n"))
	for _, tc := range []struct {
		facts, trips int
	}{{1, 1}, {50, 1}, {redisFactsPerCall, 1}, {redisFactsPerCall + 1, 2}, {3 * redisFactsPerCall, 2}} {
		t.Run(fmt.Sprint(tc.facts), func(t *testing.T) {
			t.Parallel()
			rdb := redisClient(t)
			hook := &roundTrips{}
			rdb.AddHook(hook)
			st := NewRedisState(rdb)
			e := mustEngine(t, cfg, EngineOptions{State: st})
			opts := &ProcessOptions{ProjectionKey: "k"}
			batch := func(from, n int) []Fact {
				facts := make([]Fact, n)
				for i := range facts {
					facts[i] = fact(fmt.Sprintf("f%06d", from+i), "deposit", ms("2024-06-01T10:00:00Z")+int64(i),
						map[string]any{"country": []string{"DE", "FR"}[i%2], "n": num("1.5")})
				}
				return facts
			}
			// The first batch loads the scripts and reads the state's format.
			if _, err := e.ProcessIncrementalBatch(ctx, batch(0, 1), opts); err != nil {
				t.Fatal(err)
			}
			before := hook.n.Load()
			n, err := e.ProcessIncrementalBatch(ctx, batch(1, tc.facts), opts)
			if err != nil || n != tc.facts {
				t.Fatalf("applied %d of %d: %v", n, tc.facts, err)
			}
			if got := hook.n.Load() - before; got != int64(tc.trips) {
				t.Fatalf("%d facts took %d round trips, want %d", tc.facts, got, tc.trips)
			}
			m, err := st.meta(ctx, "k", e.s)
			if want := fmt.Sprintf("f%06d", tc.facts); err != nil || m.through != want {
				t.Fatalf("factsThroughId %q (%v), want %q", m.through, err, want)
			}
			r, err := e.Query(ctx, "k", QueryOptions{Aggregate: true})
			if want := fmt.Sprintf(`{"aggregated":{"count":%d`, tc.facts+1); err != nil || !strings.HasPrefix(js(r), want) {
				t.Fatalf("query %s (%v), want %s...", js(r), err, want)
			}
		})
	}
}

// holdFirst is a go-redis hook that holds the first pipeline it sees
// (or the at-th, when at is set) until release is closed, and counts
// pipelines.
type holdFirst struct {
	pipelines atomic.Int64
	at        int64
	held      chan struct{} // closed when that pipeline is held
	release   chan struct{}
}

func (h *holdFirst) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *holdFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *holdFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.pipelines.Add(1) == max(h.at, 1) {
			close(h.held)
			<-h.release
		}
		return next(ctx, cmds)
	}
}

// TestConcurrentAppliesShareRoundTrips: the script calls of projections
// applying batches at the same time (as the projections fed one batch of
// the stream do) travel together: those that arrive while every round
// trip is in flight (here one at a time) share the next one, and each
// projection still gets its own facts counted.
func TestConcurrentAppliesShareRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redisClient(t)
	st := NewRedisState(rdb)
	st.root.sender = st.newSender(1)
	cfg := mustConfig(t, cfgYAML("hour", "[data.country]", "  - {field: count, function: count}\n  - {field: data.n, function: sum}\n"))
	const projections, perBatch = 8, 20
	engines := make([]*Engine, projections)
	batch := func(from int) []Fact {
		facts := make([]Fact, perBatch)
		for i := range facts {
			facts[i] = fact(fmt.Sprintf("f%06d", from+i), "deposit", ms("2024-06-01T10:00:00Z")+int64(i),
				map[string]any{"country": []string{"DE", "FR"}[i%2], "n": num("2")})
		}
		return facts
	}
	for i := range engines {
		// The first batch loads the scripts and reads the state's format.
		engines[i] = mustEngine(t, cfg, EngineOptions{State: st})
		if _, err := engines[i].ProcessIncrementalBatch(ctx, batch(0), &ProcessOptions{ProjectionKey: fmt.Sprint("p", i)}); err != nil {
			t.Fatal(err)
		}
	}
	hook := &holdFirst{held: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(hook)
	errs := make(chan error, projections)
	apply := func(i int) {
		n, err := engines[i].ProcessIncrementalBatch(ctx, batch(perBatch), &ProcessOptions{ProjectionKey: fmt.Sprint("p", i)})
		if err == nil && n != perBatch {
			err = fmt.Errorf("projection %d applied %d of %d facts", i, n, perBatch)
		}
		errs <- err
	}
	go apply(0)
	<-hook.held
	for i := 1; i < projections; i++ {
		go apply(i)
	}
	testutil.Eventually(t, 30*time.Second, "the other projections' calls waiting", func() bool {
		return st.root.sender.Pending() == projections-1
	})
	close(hook.release)
	for range projections {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := hook.pipelines.Load(); got != 2 {
		t.Fatalf("%d projections' batches took %d round trips, want 2 (the first, then the others together)", projections, got)
	}
	for i, e := range engines {
		r, err := e.Query(ctx, fmt.Sprint("p", i), QueryOptions{Aggregate: true})
		if want := fmt.Sprintf(`{"aggregated":{"count":%d,"n_sum":%d}`, 2*perBatch, 4*perBatch); err != nil || !strings.HasPrefix(js(r), want) {
			t.Fatalf("projection %d: %s (%v), want %s...", i, js(r), err, want)
		}
	}
}

// TestSharedRoundTripOutlivesACaller: a projection that stops waiting
// (its context ends) while its calls share a round trip with another's
// gets its context's error, and the other's calls still run.
func TestSharedRoundTripOutlivesACaller(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redisClient(t)
	st := NewRedisState(rdb)
	st.root.sender = st.newSender(1) // round trips one at a time, to share them
	cfg := mustConfig(t, cfgYAML("hour", "", "  - {field: count, function: count}\n"))
	facts := func(from int) []Fact {
		return []Fact{fact(fmt.Sprintf("f%06d", from), "deposit", ms("2024-06-01T10:00:00Z"), nil)}
	}
	engines := make([]*Engine, 3)
	for i := range engines {
		engines[i] = mustEngine(t, cfg, EngineOptions{State: st})
		if _, err := engines[i].ProcessIncrementalBatch(ctx, facts(0), &ProcessOptions{ProjectionKey: fmt.Sprint("p", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Projection 0 holds the first round trip; 1 and 2 share the second,
	// which is held while 1 gives up.
	hook := &holdFirst{at: 2, held: make(chan struct{}), release: make(chan struct{})}
	first := &holdFirst{held: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(first)
	rdb.AddHook(hook)
	errs := make([]chan error, 3)
	ctx1, cancel1 := context.WithCancel(ctx)
	defer cancel1()
	apply := func(i int, ctx context.Context) {
		errs[i] = make(chan error, 1)
		go func() {
			_, err := engines[i].ProcessIncrementalBatch(ctx, facts(1), &ProcessOptions{ProjectionKey: fmt.Sprint("p", i)})
			errs[i] <- err
		}()
	}
	apply(0, ctx)
	<-first.held
	waiting := func(n int) {
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%d projections' calls waiting", n), func() bool {
			return st.root.sender.Pending() == n
		})
	}
	apply(1, ctx1) // first in the shared round trip, whose context it lends
	waiting(1)
	apply(2, ctx)
	waiting(2)
	close(first.release)
	<-hook.held
	cancel1()
	if err := <-errs[1]; !errors.Is(err, context.Canceled) {
		t.Fatalf("the projection that gave up: %v, want context.Canceled", err)
	}
	close(hook.release)
	for _, i := range []int{0, 2} {
		if err := <-errs[i]; err != nil {
			t.Fatalf("projection %d: %v", i, err)
		}
		r, err := engines[i].Query(ctx, fmt.Sprint("p", i), QueryOptions{Aggregate: true})
		if err != nil || js(r) != `{"aggregated":{"count":2}}` {
			t.Fatalf("projection %d: %s (%v), want a count of 2", i, js(r), err)
		}
	}
}

// TestAppliesDoNotWaitForAHeldRoundTrip: while one projection's round trip
// to Redis is held, another projection's apply goes out in a round trip of
// its own and completes; the held one completes once released.
func TestAppliesDoNotWaitForAHeldRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redisClient(t)
	st := NewRedisState(rdb)
	cfg := mustConfig(t, cfgYAML("hour", "", "  - {field: count, function: count}\n"))
	facts := func(from int) []Fact {
		return []Fact{fact(fmt.Sprintf("f%06d", from), "deposit", ms("2024-06-01T10:00:00Z"), nil)}
	}
	engines := make([]*Engine, 2)
	for i := range engines {
		// The first batch loads the scripts and reads the state's format.
		engines[i] = mustEngine(t, cfg, EngineOptions{State: st})
		if _, err := engines[i].ProcessIncrementalBatch(ctx, facts(0), &ProcessOptions{ProjectionKey: fmt.Sprint("p", i)}); err != nil {
			t.Fatal(err)
		}
	}
	hook := &holdFirst{held: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(hook)
	defer func() {
		select {
		case <-hook.release:
		default:
			close(hook.release)
		}
	}()
	errs := [2]chan error{make(chan error, 1), make(chan error, 1)}
	apply := func(i int) {
		_, err := engines[i].ProcessIncrementalBatch(ctx, facts(1), &ProcessOptions{ProjectionKey: fmt.Sprint("p", i)})
		errs[i] <- err
	}
	go apply(0)
	<-hook.held
	go apply(1)
	select {
	case err := <-errs[1]:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("an apply waited 30 s for another projection's held round trip")
	}
	close(hook.release)
	if err := <-errs[0]; err != nil {
		t.Fatal(err)
	}
	for i, e := range engines {
		r, err := e.Query(ctx, fmt.Sprint("p", i), QueryOptions{Aggregate: true})
		if err != nil || js(r) != `{"aggregated":{"count":2}}` {
			t.Fatalf("projection %d: %s (%v), want a count of 2", i, js(r), err)
		}
	}
}
