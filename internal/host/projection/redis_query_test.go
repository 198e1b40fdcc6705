package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/push"
)

// queryDayYAML: a minute window without groups, as in (d) of
// bench/projection_test.go.
const queryDayYAML = `
source: account
factTypes: [deposit]
timeWindow: minute
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: sum}
  - {field: data.amount, function: avg}
materialize: true
storageVersion: 2
`

// dayEngine loads a day of minute buckets, four facts each, into st.
func dayEngine(tb testing.TB, st CachedState) (*Engine, int64, int64) {
	tb.Helper()
	e := mustEngine(tb, mustConfig(tb, queryDayYAML), EngineOptions{State: st})
	base := ms("2024-01-01T00:00:00Z")
	var facts []Fact
	for i := 0; i < 1440*4; i++ {
		facts = append(facts, Fact{ID: fmt.Sprint("d", i), Type: "deposit", Timestamp: base + int64(i)*15_000,
			Data: map[string]any{"amount": json.Number(fmt.Sprintf("%d.25", i))}})
	}
	if _, err := e.ProcessIncrementalBatch(context.Background(), facts, &ProcessOptions{ProjectionKey: "q"}); err != nil {
		tb.Fatal(err)
	}
	return e, base, base + 1440*60_000 - 1
}

// BenchmarkQueryMinuteDay queries 1,440 minute buckets from Redis, one per
// bucket and aggregated, with the query cache and without it (a RESP2
// client).
func BenchmarkQueryMinuteDay(b *testing.B) {
	for _, cached := range []bool{true, false} {
		for _, agg := range []bool{false, true} {
			b.Run(fmt.Sprintf("cache=%v/aggregate=%v", cached, agg), func(b *testing.B) {
				rdb := redisClient(b)
				if !cached {
					o := rdb.Options()
					rdb = redis.NewClient(&redis.Options{Addr: o.Addr, DB: o.DB, Username: o.Username, Password: o.Password, Protocol: 2})
					b.Cleanup(func() { rdb.Close() })
				}
				e, from, to := dayEngine(b, NewRedisState(rdb).WithPrefix("bq:"))
				ctx := context.Background()
				for b.Loop() {
					r, err := e.Query(ctx, "q", QueryOptions{From: from, To: to, Aggregate: agg})
					if err != nil {
						b.Fatal(err)
					}
					if !agg && len(r) != 1440 {
						b.Fatalf("%d buckets", len(r))
					}
				}
			})
		}
	}
}

// TestKeyArgs checks the shared-allocation keys against the key
// functions.
func TestKeyArgs(t *testing.T) {
	t.Parallel()
	s := compile(mustConfig(t, cfgYAML("minute", "[data.country]", allAggs+"rollup: {enabled: true}\n")))
	k := rkeys{base: "p:key"}
	refs := []bucketRef{{0, "2024-01-01T00:00:US"}, {1, "2024-01-01T00:"}, {3, "2024-01:a%3Ab"}, {2, ""}}
	args := keyArgs("hgetall", k.base, s, refs)
	dist := keyArgs("scard", k.distinctBase("user"), s, refs)
	for i, b := range refs {
		if got, want := *args[2*i+1].(*string), k.bucket(s.levels[b.level], b.mem); args[2*i] != "hgetall" || got != want {
			t.Errorf("bucket %d: %v %q, want hgetall %q", i, args[2*i], got, want)
		}
		if got, want := *dist[2*i+1].(*string), k.distinct("user", s.levels[b.level], b.mem); dist[2*i] != "scard" || got != want {
			t.Errorf("distinct values %d: %v %q, want scard %q", i, dist[2*i], got, want)
		}
	}
}

// TestQuerySeesOtherWriters: a query right after another process's write
// (its own engine and Redis client) returns that write, one per bucket and
// aggregated, with and without paging.
func TestQuerySeesOtherWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := redisClient(t)
	reader := mustEngine(t, mustConfig(t, queryDayYAML), EngineOptions{State: NewRedisState(first).WithPrefix("rw:")})
	writer := mustEngine(t, mustConfig(t, queryDayYAML), EngineOptions{State: NewRedisState(anotherClient(t, first)).WithPrefix("rw:")})
	base := ms("2024-01-01T00:00:00Z")
	amount := func(i int) json.Number { return json.Number(fmt.Sprintf("%d.5", i)) }
	var facts []Fact
	for i := range 700 { // more buckets than one page
		facts = append(facts, Fact{ID: fmt.Sprint("f", i), Type: "deposit", Timestamp: base + int64(i)*60_000, Data: map[string]any{"amount": amount(i)}})
	}
	if _, err := writer.ProcessIncrementalBatch(ctx, facts, &ProcessOptions{ProjectionKey: "k"}); err != nil {
		t.Fatal(err)
	}
	all := QueryOptions{From: base, To: base + 1440*60_000 - 1}
	for round := range 3 {
		for _, q := range []QueryOptions{all, {From: base + 600*60_000, To: base + 700*60_000 - 1}} {
			r, err := reader.Query(ctx, "k", q)
			if err != nil {
				t.Fatal(err)
			}
			agg, err := reader.Query(ctx, "k", QueryOptions{From: q.From, To: q.To, Aggregate: true})
			if err != nil {
				t.Fatal(err)
			}
			want, err := reader.Query(ctx, "k", QueryOptions{From: q.From, To: q.To, Mode: ModeCompute, Source: SliceSource(facts)})
			if err != nil {
				t.Fatal(err)
			}
			wantAgg, err := reader.Query(ctx, "k", QueryOptions{From: q.From, To: q.To, Aggregate: true, Mode: ModeCompute, Source: SliceSource(facts)})
			if err != nil {
				t.Fatal(err)
			}
			if js(r) != js(want) {
				t.Fatalf("round %d: query differs from the facts written:\n got %.300s\nwant %.300s", round, js(r), js(want))
			}
			if js(agg) != js(wantAgg) {
				t.Fatalf("round %d: aggregated %s, want %s", round, js(agg), js(wantAgg))
			}
		}
		// The other process adds to an existing bucket and creates one.
		more := []Fact{
			{ID: fmt.Sprint("g", round), Type: "deposit", Timestamp: base + 650*60_000 + 1, Data: map[string]any{"amount": amount(round)}},
			{ID: fmt.Sprint("h", round), Type: "deposit", Timestamp: base + (1000+int64(round))*60_000, Data: map[string]any{"amount": amount(round)}},
		}
		if _, err := writer.ProcessIncrementalBatch(ctx, more, &ProcessOptions{ProjectionKey: "k"}); err != nil {
			t.Fatal(err)
		}
		facts = append(facts, more...)
	}
}

// cacheOf returns the query cache of an engine's Redis state.
func cacheOf(t *testing.T, e *Engine) *queryCache {
	t.Helper()
	qc := e.opts.State.(*RedisState).queryCache()
	if qc == nil {
		t.Fatal("no query cache")
	}
	return qc
}

// filled returns how many buckets the cache has read so far.
func (c *queryCache) filledSoFar() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.filled
}

// cacheSetup returns a reader engine with its own client, a writer engine
// (another process) on the same Redis and prefix, and a client for raw
// commands.
func cacheSetup(t *testing.T, yaml string) (reader, writer *Engine, raw *redis.Client) {
	t.Helper()
	first := redisClient(t)
	reader = mustEngine(t, mustConfig(t, yaml), EngineOptions{State: NewRedisState(first).WithPrefix("qc:")})
	writer = mustEngine(t, mustConfig(t, yaml), EngineOptions{State: NewRedisState(anotherClient(t, first)).WithPrefix("qc:")})
	return reader, writer, anotherClient(t, first)
}

// checkQuery compares a query of reader with compute mode over facts, one
// per bucket and aggregated.
func checkQuery(t *testing.T, reader *Engine, facts []Fact, from, to int64, what string) {
	t.Helper()
	ctx := context.Background()
	for _, agg := range []bool{false, true} {
		got, err := reader.Query(ctx, "k", QueryOptions{From: from, To: to, Aggregate: agg})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		want, err := reader.Query(ctx, "k", QueryOptions{From: from, To: to, Aggregate: agg, Mode: ModeCompute, Source: SliceSource(facts)})
		if err != nil {
			t.Fatal(err)
		}
		if js(got) != js(want) {
			t.Fatalf("%s (aggregate %v):\n got %.400s\nwant %.400s", what, agg, js(got), js(want))
		}
	}
}

// TestQueryCacheInvalidation: changes by other clients (the engine's
// writes, a raw command, Delete, FLUSHDB) show in the next query, while
// unchanged buckets come from the cache.
func TestQueryCacheInvalidation(t *testing.T) {
	// Not parallel: it counts what the cache read, and a FLUSHDB of any
	// database (other tests lease and flush theirs) empties every cache.
	ctx := context.Background()
	reader, writer, raw := cacheSetup(t, queryDayYAML)
	qc := cacheOf(t, reader)
	base := ms("2024-01-01T00:00:00Z")
	from, to := base, base+1440*60_000-1
	var facts []Fact
	write := func(fs ...Fact) {
		t.Helper()
		if _, err := writer.ProcessIncrementalBatch(ctx, fs, &ProcessOptions{ProjectionKey: "k"}); err != nil {
			t.Fatal(err)
		}
		facts = append(facts, fs...)
	}
	deposit := func(id string, minute int64, amount string) Fact {
		return Fact{ID: id, Type: "deposit", Timestamp: base + minute*60_000 + 7, Data: map[string]any{"amount": json.Number(amount)}}
	}
	for i := range int64(500) {
		write(deposit(fmt.Sprint("a", i), i, fmt.Sprintf("%d.25", i)))
	}
	checkQuery(t, reader, facts, from, to, "first query")
	n := qc.filledSoFar()
	if n != 500 {
		t.Fatalf("the first query read %d buckets through the cache, want 500", n)
	}
	checkQuery(t, reader, facts, from, to, "unchanged")
	if got := qc.filledSoFar(); got != n {
		t.Fatalf("an unchanged projection read %d buckets again", got-n)
	}

	// Another process adds to a bucket and creates one: those two are read
	// again, nothing else.
	write(deposit("b1", 10, "1.5"), deposit("b2", 900, "-2"))
	checkQuery(t, reader, facts, from, to, "after another process wrote")
	if got := qc.filledSoFar() - n; got != 2 {
		t.Fatalf("after two buckets changed %d were read again, want 2", got)
	}

	// Any client changing a bucket hash, the engine's scripts or not.
	key := "qc:k:minute:2024-01-01T00:20"
	if err := raw.HIncrBy(ctx, key, "n", 5).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := reader.Query(ctx, "k", QueryOptions{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	if got := r["2024-01-01T00:20"].(map[string]any)["count"]; got != int64(6) {
		t.Fatalf("count %v after HINCRBY by another client, want 6", got)
	}
	if err := raw.HIncrBy(ctx, key, "n", -5).Err(); err != nil {
		t.Fatal(err)
	}
	checkQuery(t, reader, facts, from, to, "after HINCRBY back")

	// Delete by another process, then new facts.
	if err := writer.opts.State.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	facts = nil
	checkQuery(t, reader, facts, from, to, "after Delete")
	write(deposit("c1", 20, "3"), deposit("c2", 21, "4"))
	checkQuery(t, reader, facts, from, to, "after Delete and new facts")

	// FLUSHDB.
	if err := raw.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	facts = nil
	checkQuery(t, reader, facts, from, to, "after FLUSHDB")
	write(deposit("d1", 20, "5"))
	checkQuery(t, reader, facts, from, to, "after FLUSHDB and a new fact")
}

// TestQueryCacheConnection: the tracking connection killed, or its
// tracking turned off, costs the cache but no write.
func TestQueryCacheConnection(t *testing.T) {
	// Not parallel: it counts what the cache read, and a FLUSHDB of any
	// database (other tests lease and flush theirs) empties every cache.
	ctx := context.Background()
	reader, writer, raw := cacheSetup(t, queryDayYAML)
	qc := cacheOf(t, reader)
	base := ms("2024-01-01T00:00:00Z")
	from, to := base, base+1440*60_000-1
	var facts []Fact
	for i := range int64(300) {
		facts = append(facts, Fact{ID: fmt.Sprint("a", i), Type: "deposit", Timestamp: base + i*60_000, Data: map[string]any{"amount": json.Number("1.5")}})
	}
	write := func(fs []Fact) {
		t.Helper()
		if _, err := writer.ProcessIncrementalBatch(ctx, fs, &ProcessOptions{ProjectionKey: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	write(facts[:200])
	checkQuery(t, reader, facts[:200], from, to, "first query")

	// Killed: the next query fails over to reading without the cache.
	qc.mu.Lock()
	id, err := qc.conn.ClientID(ctx).Result()
	qc.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.ClientKillByFilter(ctx, "ID", fmt.Sprint(id)).Err(); err != nil {
		t.Fatal(err)
	}
	write(facts[200:250])
	checkQuery(t, reader, facts[:250], from, to, "connection killed")
	qc.mu.Lock()
	qc.retryAt = time.Time{} // no waiting in the test
	qc.mu.Unlock()
	checkQuery(t, reader, facts[:250], from, to, "connection back")
	if qc.conn == nil {
		t.Fatal("the cache did not come back")
	}

	// Tracking off (as on a new connection): the cache starts over.
	qc.mu.Lock()
	err = qc.conn.Do(ctx, "client", "tracking", "off").Err()
	qc.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	write(facts[250:])
	n := qc.filledSoFar()
	checkQuery(t, reader, facts, from, to, "tracking was off")
	if got := qc.filledSoFar() - n; got != 300 {
		t.Fatalf("after tracking was off %d buckets were read, want all 300", got)
	}
	write([]Fact{{ID: "late", Type: "deposit", Timestamp: base + 5*60_000, Data: map[string]any{"amount": json.Number("7")}}})
	checkQuery(t, reader, append(facts, Fact{ID: "late", Type: "deposit", Timestamp: base + 5*60_000, Data: map[string]any{"amount": json.Number("7")}}),
		from, to, "tracking on again")
}

// TestQueryCacheReadRace: a bucket invalidated while the cache reads it
// is returned but not kept (nor is anything read during a flush).
func TestQueryCacheReadRace(t *testing.T) {
	// Not parallel: it counts what the cache read, and a FLUSHDB of any
	// database (other tests lease and flush theirs) empties every cache.
	ctx := context.Background()
	reader, writer, _ := cacheSetup(t, queryDayYAML)
	qc := cacheOf(t, reader)
	base := ms("2024-01-01T00:00:00Z")
	var facts []Fact
	for i := range int64(10) {
		facts = append(facts, Fact{ID: fmt.Sprint("a", i), Type: "deposit", Timestamp: base + i*60_000, Data: map[string]any{"amount": json.Number("2")}})
	}
	if _, err := writer.ProcessIncrementalBatch(ctx, facts, &ProcessOptions{ProjectionKey: "k"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		message []any
		kept    int
	}{
		{"one key", []any{"invalidate", []any{"qc:k:minute:2024-01-01T00:03"}}, 9},
		{"flush", []any{"invalidate", nil}, 0},
	} {
		qc.mu.Lock()
		clear(qc.cells)
		qc.afterFill = func() { _ = qc.HandlePushNotification(ctx, push.NotificationHandlerContext{}, tc.message) }
		qc.mu.Unlock()
		checkQuery(t, reader, facts, base, base+3_600_000, tc.name)
		qc.mu.Lock()
		qc.afterFill = nil
		kept := len(qc.cells)
		_, has := qc.cells["qc:k:minute:2024-01-01T00:03"]
		qc.mu.Unlock()
		if kept != tc.kept || has {
			t.Errorf("%s: %d buckets kept (the invalidated one: %v), want %d", tc.name, kept, has, tc.kept)
		}
	}
}

// TestQueryCacheConcurrent: queries from many goroutines while another
// process writes; a query that finds the cache busy reads without it.
func TestQueryCacheConcurrent(t *testing.T) {
	t.Parallel()
	reader, writer, _ := cacheSetup(t, queryDayYAML)
	base := ms("2024-01-01T00:00:00Z")
	var facts []Fact
	for i := range int64(2000) {
		facts = append(facts, Fact{ID: fmt.Sprint("a", i), Type: "deposit", Timestamp: base + (i%600)*60_000, Data: map[string]any{"amount": json.Number(fmt.Sprint(i))}})
	}
	queryWhileWriting(t, reader, writer, facts, func(int) QueryOptions { return QueryOptions{From: base, To: base + 1440*60_000 - 1} })
	checkQuery(t, reader, facts, base, base+1440*60_000-1, "after concurrent queries")
}

// TestQueryCacheOff: a RESP2 client cannot track; queries read every time.
func TestQueryCacheOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := redisClient(t)
	o := first.Options()
	resp2 := redis.NewClient(&redis.Options{Addr: o.Addr, DB: o.DB, Username: o.Username, Password: o.Password, Protocol: 2})
	t.Cleanup(func() { resp2.Close() })
	st := NewRedisState(resp2).WithPrefix("qc:")
	if st.queryCache() != nil {
		t.Fatal("a RESP2 client has a query cache")
	}
	e := mustEngine(t, mustConfig(t, queryDayYAML), EngineOptions{State: st})
	base := ms("2024-01-01T00:00:00Z")
	facts := []Fact{{ID: "a", Type: "deposit", Timestamp: base, Data: map[string]any{"amount": json.Number("2")}}}
	for i := range 3 {
		if _, err := e.ProcessIncrementalBatch(ctx, facts[i:], &ProcessOptions{ProjectionKey: "k"}); err != nil {
			t.Fatal(err)
		}
		checkQuery(t, e, facts, base, base+3_600_000, "resp2")
		facts = append(facts, Fact{ID: fmt.Sprint("b", i), Type: "deposit", Timestamp: base + 60_000, Data: map[string]any{"amount": json.Number("3")}})
	}
}

func TestTrackingOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw string
		on  bool
	}{
		{"%3\r\n$5\r\nflags\r\n~1\r\n$2\r\non\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n", true},
		{"%3\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*2\r\n+a\r\n$1\r\nb\r\n$5\r\nflags\r\n~2\r\n+bcast\r\n+on\r\n", true},
		{"%3\r\n$5\r\nflags\r\n~1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n", false},
		{"*6\r\n$5\r\nflags\r\n*1\r\n$2\r\non\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n", false}, // RESP2
		{"-ERR unknown subcommand 'trackinginfo'\r\n", false},
		{"%1\r\n$5\r\nflags\r\n~1\r\n$2\r\non", false},
		{"", false},
	} {
		if got := trackingOn([]byte(tc.raw)); got != tc.on {
			t.Errorf("trackingOn(%q) = %v, want %v", tc.raw, got, tc.on)
		}
	}
}

// FuzzTrackingOn: any reply is read without panicking.
func FuzzTrackingOn(f *testing.F) {
	f.Add([]byte("%3\r\n$5\r\nflags\r\n~1\r\n$2\r\non\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"))
	f.Add([]byte("%2\r\n$1\r\nx\r\n|1\r\n+a\r\n,1.5\r\n$5\r\nflags\r\n~1\r\n+on\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		trackingOn(raw)
		_, _ = respSkip(raw, 0)
	})
}

// TestQueryCacheClose: Close gives the tracking connection back; later
// queries read without the cache and stay right.
func TestQueryCacheClose(t *testing.T) {
	ctx := context.Background()
	reader, writer, _ := cacheSetup(t, queryDayYAML)
	qc := cacheOf(t, reader)
	base := ms("2024-01-01T00:00:00Z")
	from, to := base, base+1440*60_000-1
	var facts []Fact
	for i := range int64(20) {
		f := Fact{ID: fmt.Sprint("c", i), Type: "deposit", Timestamp: base + i*60_000, Data: map[string]any{"amount": json.Number("1")}}
		if _, err := writer.ProcessIncrementalBatch(ctx, []Fact{f}, &ProcessOptions{ProjectionKey: "k"}); err != nil {
			t.Fatal(err)
		}
		facts = append(facts, f)
	}
	checkQuery(t, reader, facts, from, to, "before Close")
	if qc.filledSoFar() == 0 {
		t.Fatal("the cache read nothing before Close")
	}
	if err := reader.opts.State.(*RedisState).Close(); err != nil {
		t.Fatal(err)
	}
	qc.mu.Lock()
	conn, own, off := qc.conn, qc.own, qc.off
	qc.mu.Unlock()
	if conn != nil || own != nil || !off {
		t.Fatalf("after Close: conn %v, own client %v, off %v", conn, own, off)
	}
	n := qc.filledSoFar()
	f := Fact{ID: "late", Type: "deposit", Timestamp: base + 5*60_000, Data: map[string]any{"amount": json.Number("2")}}
	if _, err := writer.ProcessIncrementalBatch(ctx, []Fact{f}, &ProcessOptions{ProjectionKey: "k"}); err != nil {
		t.Fatal(err)
	}
	checkQuery(t, reader, append(facts, f), from, to, "after Close")
	if got := qc.filledSoFar(); got != n {
		t.Errorf("the cache read %d buckets after Close", got-n)
	}
}

// queryWhileWriting runs four goroutines querying reader (goroutine i
// with opts(i)) while writer applies facts in batches of 100, then stops
// them and fails on any query error.
func queryWhileWriting(t *testing.T, reader, writer *Engine, facts []Fact, opts func(i int) QueryOptions) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for q := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := reader.Query(ctx, "k", opts(q)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := 0; i < len(facts); i += 100 {
		if _, err := writer.ProcessIncrementalBatch(ctx, facts[i:min(i+100, len(facts))], &ProcessOptions{ProjectionKey: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
