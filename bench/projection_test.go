//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/projection"
	"github.com/factline/factline/internal/testutil"
)

// Acceptance targets of the projection engine.
const (
	projTargetBatch    = 1_000_000.0          // facts/s on one core, (a)
	projTargetMinute   = 50_000.0             // facts/s, (c) minute window
	projTargetRollup   = 25_000.0             // facts/s, (c) rollups and count_distinct
	projTargetRatio    = 0.50                 // of the raw pipelined baseline, (c)
	projTargetQueryP99 = 5 * time.Millisecond // (d) 1,440 minute buckets
)

// Sizes of the runs.
const (
	projBatchFacts   = 300_000 // (a) and (b), per round
	projBatchRounds  = 5
	projIncrFacts    = 200_000 // (c), per scenario
	projIncrBatch    = 2_000   // facts per ProcessIncrementalBatch call and per baseline pipeline
	projQueryRuns    = 300
	projQueryWarmups = 20
	projNoisyCores   = 0.15
	projQuietWait    = 45 * time.Second // per measured window, at most
	projQuietBudget  = 4 * time.Minute  // in all
)

// projQuietLeft is what remains of projQuietBudget.
var projQuietLeft = projQuietBudget

var projCountries = []string{"US", "DE", "FR", "GB", "JP", "BR", "IN", "CA"}

const projBase = int64(1_704_067_200_000) // 2024-01-01T00:00:00Z

// projFacts returns n facts one second apart: deposits with an amount of
// two decimals, one of eight countries and one of 5,000 users.
func projFacts(n int) []projection.Fact {
	facts := make([]projection.Fact, n)
	for i := range facts {
		facts[i] = projection.Fact{
			ID: fmt.Sprintf("fct_%010d", i), Type: "deposit", Timestamp: projBase + int64(i)*1000,
			Data: map[string]any{
				"amount":  json.Number(fmt.Sprintf("%d.%02d", i%5000, i%100)),
				"country": projCountries[i%len(projCountries)],
				"user":    "u" + strconv.Itoa(i%5000),
			},
		}
	}
	return facts
}

// projJSON is the raw JSON form of the facts of projFacts, as the fact
// stream stores them.
func projJSON(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"id":"fct_%010d","tenant_id":"bench","entity_id":"acct-%04d","type":"deposit","subtype":"manual",`+
			`"timestamp":%d,"data":{"amount":%d.%02d,"country":%q,"user":"u%d","currency":"USD"}}`,
			i, i%1000, projBase+int64(i)*1000, i%5000, i%100, projCountries[i%len(projCountries)], i%5000)
	}
	return out
}

func projEngine(t *testing.T, yaml string, opts projection.EngineOptions) *projection.Engine {
	t.Helper()
	cfg, err := projection.ParseSettings([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	e, err := projection.NewEngine(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// projBatchYAML: count + sum + avg by hour with one groupBy.
const projBatchYAML = `
source: account
factTypes: [deposit]
timeWindow: hour
groupBy: [data.country]
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: sum}
  - {field: data.amount, function: avg}
materialize: false
storageVersion: 2
`

const projMinuteYAML = `
source: account
factTypes: [deposit]
timeWindow: minute
groupBy: [data.country]
aggregations:
  - {field: count, function: count}
  - {field: data.amount, function: sum}
  - {field: data.amount, function: avg}
materialize: true
storageVersion: 2
`

var projRollupYAML = strings.Replace(projMinuteYAML, "materialize: true",
	"  - {field: data.user, function: count_distinct}\nmaterialize: true\nrollup: {enabled: true}", 1)

// projCPU is a sample of CPU counters.
type projCPU struct {
	at         time.Time
	hostBusy   time.Duration // all CPUs, from /proc/stat
	self       time.Duration
	redis      time.Duration
	redisKnown bool
}

// projWindow is CPU use over a measured window, in cores.
type projWindow struct {
	Self, Redis, Other float64
	RedisKnown         bool
}

func projSampleCPU(ctx context.Context, rdb *redis.Client) projCPU {
	s := projCPU{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		var total, idle int64
		for i, v := range f[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			total += n
			if i == 3 || i == 4 {
				idle += n
			}
		}
		s.hostBusy = time.Duration(total-idle) * 10 * time.Millisecond // USER_HZ = 100
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if rdb != nil {
		if info, err := rdb.Info(ctx, "cpu").Result(); err == nil {
			var sum float64
			for _, l := range strings.Split(info, "\n") {
				k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
				if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
					f, _ := strconv.ParseFloat(v, 64)
					sum += f
				}
			}
			s.redis = time.Duration(sum * float64(time.Second))
			s.redisKnown = true
		}
	}
	return s
}

func (a projCPU) window(b projCPU) projWindow {
	secs := b.at.Sub(a.at).Seconds()
	w := projWindow{
		Self:       (b.self - a.self).Seconds() / secs,
		Redis:      (b.redis - a.redis).Seconds() / secs,
		RedisKnown: a.redisKnown && b.redisKnown,
	}
	w.Other = max(0, (b.hostBusy-a.hostBusy).Seconds()/secs-w.Self-w.Redis)
	return w
}

// projWaitQuiet waits, up to projQuietWait (and projQuietBudget in all), until other processes use
// less than projNoisyCores, so that a measured window starts on a quiet
// machine when the machine allows it (the report shows the load seen).
func projWaitQuiet(t *testing.T, ctx context.Context, rdb *redis.Client) {
	deadline := time.Now().Add(min(projQuietWait, projQuietLeft))
	began := time.Now()
	defer func() { projQuietLeft -= time.Since(began) }()
	for {
		a := projSampleCPU(ctx, rdb)
		time.Sleep(time.Second) // the CPU sampling window, not ordering
		if w := a.window(projSampleCPU(ctx, rdb)); w.Other < projNoisyCores || time.Now().After(deadline) {
			if w.Other >= projNoisyCores {
				t.Logf("machine still busy (%.2f cores used by other processes); measuring anyway", w.Other)
			}
			return
		}
	}
}

// projRate is one throughput measurement.
type projRate struct {
	Name     string
	Facts    int
	Elapsed  time.Duration
	Commands float64 // Redis commands per fact (c)
	CPU      projWindow
}

func (r projRate) Rate() float64 { return float64(r.Facts) / r.Elapsed.Seconds() }

// projLatency is one latency measurement.
type projLatency struct {
	Name    string
	Buckets int
	Target  bool // the (d) target applies
	Lat     []time.Duration
	CPU     projWindow
}

// misses lists how a query measurement misses the (d) target.
func (l projLatency) misses() []string {
	if !l.Target || l.pct(0.99) < projTargetQueryP99 {
		return nil
	}
	return []string{fmt.Sprintf("p99 %s >= %s", fmtLatency(l.pct(0.99)), fmtLatency(projTargetQueryP99))}
}

func (l projLatency) pct(p float64) time.Duration {
	if len(l.Lat) == 0 {
		return 0
	}
	return l.Lat[min(len(l.Lat)-1, int(p*float64(len(l.Lat))))]
}

type projReport struct {
	Date                  time.Time
	CPUModel, Uname, Go   string
	Cores                 int
	RedisVersion          string
	Batch, JSON, Decode   projRate
	Minute, MinuteRaw     projRate
	MinuteNaive           projRate
	Rollup, RollupRaw     projRate
	RollupNaive           projRate
	Queries               []projLatency
	Failures              []string
	BatchOK, JSONOK       string
	MinuteOK, RollupOK    string
	Noisy                 []string
	RollupBuckets, Sealed int
}

// TestProjectionEngine measures the projection engine: (a) batch
// processing of decoded facts on one core, (b) the same from raw JSON,
// (c) incremental processing into Redis next to raw pipelined go-redis
// loops issuing the same number of commands, and (d) query latency. It
// writes its section of RESULTS.md and fails when a target is missed.
func TestProjectionEngine(t *testing.T) {
	ctx := context.Background()
	opt, err := redis.ParseURL(testutil.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()

	rep := &projReport{Date: time.Now().UTC(), Cores: runtime.NumCPU(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		CPUModel: procField("/proc/cpuinfo", "model name")}
	if out, err := exec.Command("uname", "-srm").Output(); err == nil {
		rep.Uname = strings.TrimSpace(string(out))
	}
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		for _, l := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
				rep.RedisVersion = v
			}
		}
	}

	projBatch(t, rep)
	projIncremental(t, ctx, rdb, rep)
	projQueries(t, ctx, rdb, rep)

	rep.evaluate()
	md := rep.markdown()
	fmt.Println(md)
	if err := updateSection(resultsFile, "projection", md); err != nil {
		t.Errorf("write %s: %v", resultsFile, err)
	}
	for _, f := range rep.Failures {
		t.Errorf("target missed: %s", f)
	}
}

// projBatch measures (a) and (b) with GOMAXPROCS(1): one core.
func projBatch(t *testing.T, rep *projReport) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	e := projEngine(t, projBatchYAML, projection.EngineOptions{})
	facts := projFacts(projBatchFacts)
	raw := projJSON(projBatchFacts)

	best := func(name string, round func() int) projRate {
		projWaitQuiet(t, context.Background(), nil)
		var rates []projRate
		for r := 0; r < projBatchRounds; r++ {
			runtime.GC()
			c0 := projSampleCPU(context.Background(), nil)
			start := time.Now()
			n := round()
			el := time.Since(start)
			rates = append(rates, projRate{Name: name, Facts: n, Elapsed: el, CPU: c0.window(projSampleCPU(context.Background(), nil))})
		}
		// The median round.
		slices.SortFunc(rates, func(a, b projRate) int { return int(a.Elapsed - b.Elapsed) })
		return rates[len(rates)/2]
	}
	var check projection.Result
	rep.Batch = best("(a) decoded facts", func() int {
		r, err := e.Process(facts, nil)
		if err != nil {
			t.Fatal(err)
		}
		check = r
		return len(facts)
	})
	if want := len(projCountries) * ((projBatchFacts + 3599) / 3600); len(check) != want {
		t.Errorf("(a) produced %d buckets, want %d", len(check), want)
	}
	rep.JSON = best("(b) raw JSON facts", func() int {
		decoded := make([]projection.Fact, len(raw))
		for i, b := range raw {
			f, err := projection.FactFromJSON(b)
			if err != nil {
				t.Fatal(err)
			}
			decoded[i] = f
		}
		r, err := e.Process(decoded, nil)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(r["2024-01-01T00:US"]) != fmt.Sprint(check["2024-01-01T00:US"]) {
			t.Errorf("(b) result differs from (a)")
		}
		return len(raw)
	})
	rep.Decode = best("FactFromJSON alone", func() int {
		for _, b := range raw {
			if _, err := projection.FactFromJSON(b); err != nil {
				t.Fatal(err)
			}
		}
		return len(raw)
	})
}

// projCommandStats returns the calls of every command Redis counted.
func projCommandStats(ctx context.Context, rdb *redis.Client) map[string]int64 {
	out := map[string]int64{}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return out
	}
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

// projDataCommands are the commands the engine's scripts run on data (the
// rest are the scripts themselves and bookkeeping of the benchmark).
var projDataCommands = []string{"sadd", "hincrby", "pfadd", "zadd", "hget", "hset", "hmget", "exists", "hgetall", "zrangebyscore", "smembers",
	"del", "zrem", "zcount", "get", "set"}

// projIncremental measures (c).
func projIncremental(t *testing.T, ctx context.Context, rdb *redis.Client, rep *projReport) {
	facts := projFacts(projIncrFacts)
	run := func(name, yaml, prefix string) (projRate, map[string]int64) {
		now := time.UnixMilli(facts[0].Timestamp)
		e := projEngine(t, yaml, projection.EngineOptions{
			State: projection.NewRedisState(rdb).WithPrefix(prefix),
			Now:   func() time.Time { return now },
		})
		// Load the scripts and create the projection outside the window.
		if err := e.ProcessIncremental(ctx, projection.Fact{ID: "warm", Type: "deposit", Timestamp: facts[0].Timestamp}, &projection.ProcessOptions{ProjectionKey: "k"}); err != nil {
			t.Fatal(err)
		}
		before := projCommandStats(ctx, rdb)
		c0 := projSampleCPU(ctx, rdb)
		start := time.Now()
		for i := 0; i < len(facts); i += projIncrBatch {
			chunk := facts[i:min(i+projIncrBatch, len(facts))]
			now = time.UnixMilli(chunk[len(chunk)-1].Timestamp) // rollups seal hours as the stream goes
			n, err := e.ProcessIncrementalBatch(ctx, chunk, &projection.ProcessOptions{ProjectionKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			if n != len(chunk) {
				t.Fatalf("%s: %d of %d facts applied", name, n, len(chunk))
			}
		}
		el := time.Since(start)
		cpu := c0.window(projSampleCPU(ctx, rdb))
		after := projCommandStats(ctx, rdb)
		delta := map[string]int64{}
		var total int64
		for _, c := range projDataCommands {
			if d := after[c] - before[c]; d > 0 {
				delta[c] = d
				total += d
			}
		}
		// Check the result against a batch computation of the same facts.
		r, err := e.Query(ctx, "k", projection.QueryOptions{Aggregate: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := r["aggregated"].(map[string]any)["count"]; got != int64(len(facts)+1) {
			t.Errorf("%s: count %v after processing, want %d", name, got, len(facts)+1)
		}
		return projRate{Name: name, Facts: len(facts), Elapsed: el, Commands: float64(total) / float64(len(facts)), CPU: cpu}, delta
	}
	projWaitQuiet(t, ctx, rdb)
	rep.Minute, _ = run("(c) minute window", projMinuteYAML, "bench:proj:minute:")
	projWaitQuiet(t, ctx, rdb)
	rep.MinuteRaw = projRawSame(t, ctx, rdb, "bench:raw:minute:", facts, false)
	projWaitQuiet(t, ctx, rdb)
	rep.MinuteNaive = projRawNaive(t, ctx, rdb, "bench:naive:minute:", facts, false)
	projWaitQuiet(t, ctx, rdb)
	rep.Rollup, _ = run("(c) minute + rollups + count_distinct", projRollupYAML, "bench:proj:rollup:")
	projWaitQuiet(t, ctx, rdb)
	rep.RollupRaw = projRawSame(t, ctx, rdb, "bench:raw:rollup:", facts, true)
	projWaitQuiet(t, ctx, rdb)
	rep.RollupNaive = projRawNaive(t, ctx, rdb, "bench:naive:rollup:", facts, true)
}

// projRawKeys are the keys a raw loop writes for fact i.
func projRawKeys(prefix string, f projection.Fact) (seen, bucket, minute string, score int64) {
	t := time.UnixMilli(f.Timestamp).UTC()
	country := f.Data["country"].(string)
	minute = t.Format("2006-01-02T15:04") + ":" + country
	return prefix + "seen:" + t.Format("2006-01-02"), prefix + "minute:" + minute, minute, f.Timestamp - f.Timestamp%60_000
}

// projRawSame is the raw baseline: a pipelined go-redis loop issuing the
// commands the engine's scripts run, with the same arguments, one
// pipeline per batch: per call of the engine (128 facts) the lock and
// meta reads, a SADD per fact, per bucket the summed HINCRBYs, a ZADD for
// a new bucket and (with count_distinct) one SADD of the call's values
// into the minute bucket's set; at each hour and day boundary the seal:
// the children's counts and distinct values (a minute's set, an hour's
// sketch) read, then per child HGET, HGETALL and HINCRBYs into its
// parent, a ZADD and a SET of the sketch per parent, and the watermark.
// What it leaves out is what the scripts add: atomicity, dedupe decisions
// and exact sketch merging.
func projRawSame(t *testing.T, ctx context.Context, rdb *redis.Client, prefix string, facts []projection.Fact, rollup bool) projRate {
	const perCall = 128 // facts per script call of the engine (redisFactsPerCall)
	type bucket struct {
		n, sum int64
		users  []any
		mem    string
		score  int64
	}
	known := map[string]bool{}
	var sealedThrough int64
	var children []string // minute buckets not sealed yet
	var hours []string    // hour buckets not sealed into days yet
	var issued int64
	c0 := projSampleCPU(ctx, rdb)
	start := time.Now()
	seal := func(pipe redis.Pipeliner, childLevel, parentLevel string, kids []string, parentOf func(string) string) {
		// read phase (the engine's pipeline), then the seal script's commands
		rp := rdb.Pipeline()
		for _, c := range kids {
			rp.HGet(ctx, prefix+childLevel+":"+c, "n")
			if childLevel == "minute" {
				rp.SMembers(ctx, prefix+"dist:user:"+childLevel+":"+c)
			} else {
				rp.Get(ctx, prefix+"dist:user:"+childLevel+":"+c)
			}
			issued += 2
		}
		rp.ZRangeByScore(ctx, prefix+"index:"+childLevel, &redis.ZRangeBy{Min: "-inf", Max: "+inf", Count: int64(len(kids) + 1)})
		issued++
		if _, err := rp.Exec(ctx); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		pipe.HGet(ctx, prefix+"meta", "wm:"+parentLevel)
		pipe.ZCount(ctx, prefix+"index:"+childLevel, "-inf", "+inf")
		issued += 2
		parents := map[string]bool{}
		for _, c := range kids {
			pk := prefix + parentLevel + ":" + parentOf(c)
			pipe.HGet(ctx, prefix+childLevel+":"+c, "n")
			pipe.HGetAll(ctx, prefix+childLevel+":"+c)
			pipe.HIncrBy(ctx, pk, "n", 1)
			pipe.HIncrBy(ctx, pk, "c|amount", 1)
			pipe.HIncrBy(ctx, pk, "s|amount|2|0", 1)
			issued += 5
			if !parents[pk] {
				parents[pk] = true
				pipe.ZAdd(ctx, prefix+"index:"+parentLevel, redis.Z{Score: 0, Member: parentOf(c)})
				issued++
				if rollup {
					pipe.Set(ctx, prefix+"dist:user:"+parentLevel+":"+parentOf(c), "x", 0)
					issued++
				}
			}
		}
		pipe.HSet(ctx, prefix+"meta", "wm:"+parentLevel, "1")
		issued++
	}
	for i := 0; i < len(facts); i += projIncrBatch {
		batch := facts[i:min(i+projIncrBatch, len(facts))]
		pipe := rdb.Pipeline()
		for c := 0; c < len(batch); c += perCall {
			call := batch[c:min(c+perCall, len(batch))]
			pipe.Exists(ctx, prefix+"lock")
			pipe.HMGet(ctx, prefix+"meta", "version", "fp")
			pipe.HMGet(ctx, prefix+"meta", "wm:minute", "del:minute", "wm:hour", "del:hour", "through")
			issued += 3
			buckets := map[string]*bucket{}
			var order []string
			for _, f := range call {
				seen, key, member, score := projRawKeys(prefix, f)
				pipe.SAdd(ctx, seen, f.ID)
				issued++
				b := buckets[key]
				if b == nil {
					b = &bucket{mem: member, score: score}
					buckets[key] = b
					order = append(order, key)
				}
				b.n++
				b.sum += atoi(strings.Replace(string(f.Data["amount"].(json.Number)), ".", "", 1))
				if rollup {
					b.users = append(b.users, f.Data["user"])
				}
			}
			for _, key := range order {
				b := buckets[key]
				pipe.HIncrBy(ctx, key, "n", b.n)
				pipe.HIncrBy(ctx, key, "c|amount", b.n)
				pipe.HIncrBy(ctx, key, "s|amount|2|0", b.sum)
				issued += 3
				if !known[key] {
					known[key] = true
					children = append(children, b.mem)
					pipe.ZAdd(ctx, prefix+"index:minute", redis.Z{Score: float64(b.score), Member: b.mem})
					issued++
				}
				if rollup {
					pipe.SAdd(ctx, prefix+"dist:user:minute:"+b.mem, b.users...)
					issued++
				}
			}
		}
		pipe.Exists(ctx, prefix+"lock")
		pipe.HMGet(ctx, prefix+"meta", "version", "fp")
		pipe.HSet(ctx, prefix+"meta", "through", batch[len(batch)-1].ID)
		issued += 3
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if !rollup {
			continue
		}
		// Seal the hours (and days) that ended, as the engine does after
		// the batch.
		now := batch[len(batch)-1].Timestamp
		hourStart := now - now%3_600_000
		if hourStart > sealedThrough {
			var done, rest []string
			for _, c := range children {
				if ts, _ := time.Parse("2006-01-02T15:04", c[:16]); ts.UnixMilli() < hourStart {
					done = append(done, c)
				} else {
					rest = append(rest, c)
				}
			}
			children = rest
			sp := rdb.Pipeline()
			seal(sp, "minute", "hour", done, func(c string) string { return c[:13] + c[16:] })
			for _, c := range done {
				hours = appendUnique(hours, c[:13]+c[16:])
			}
			if dayStart := now - now%86_400_000; dayStart > sealedThrough-sealedThrough%86_400_000 && len(hours) > 0 {
				var dayDone, dayRest []string
				for _, h := range hours {
					if ts, _ := time.Parse("2006-01-02T15", h[:13]); ts.UnixMilli() < dayStart {
						dayDone = append(dayDone, h)
					} else {
						dayRest = append(dayRest, h)
					}
				}
				hours = dayRest
				if len(dayDone) > 0 {
					seal(sp, "hour", "day", dayDone, func(h string) string { return h[:10] + h[13:] })
				}
			}
			if _, err := sp.Exec(ctx); err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			sealedThrough = hourStart
		}
	}
	el := time.Since(start)
	return projRate{Name: "raw pipelined go-redis, same commands", Facts: len(facts), Elapsed: el,
		Commands: float64(issued) / float64(len(facts)), CPU: c0.window(projSampleCPU(ctx, rdb))}
}

func appendUnique(list []string, s string) []string {
	if len(list) > 0 && list[len(list)-1] == s {
		return list
	}
	return append(list, s)
}

func atoi(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

// projRawNaive is a second reference: a pipelined loop doing the same
// updates one fact at a time, the way a client without scripts would
// (dedupe record, one HINCRBY per counter, a ZADD for each new bucket, and
// with rollups a SADD into the minute's set and a PFADD per coarser
// level).
func projRawNaive(t *testing.T, ctx context.Context, rdb *redis.Client, prefix string, facts []projection.Fact, rollup bool) projRate {
	seenBuckets := map[string]bool{}
	var issued int64
	c0 := projSampleCPU(ctx, rdb)
	start := time.Now()
	for i := 0; i < len(facts); i += projIncrBatch {
		pipe := rdb.Pipeline()
		for _, f := range facts[i:min(i+projIncrBatch, len(facts))] {
			seen, bucket, member, score := projRawKeys(prefix, f)
			mant := atoi(strings.Replace(string(f.Data["amount"].(json.Number)), ".", "", 1))
			pipe.SAdd(ctx, seen, f.ID)
			pipe.HIncrBy(ctx, bucket, "n", 1)
			pipe.HIncrBy(ctx, bucket, "c|amount", 1)
			pipe.HIncrBy(ctx, bucket, "s|amount|2|0", mant)
			issued += 4
			if !seenBuckets[bucket] {
				seenBuckets[bucket] = true
				pipe.ZAdd(ctx, prefix+"index:minute", redis.Z{Score: float64(score), Member: member})
				issued++
			}
			if rollup {
				pipe.SAdd(ctx, prefix+"dist:user:minute:"+member, f.Data["user"])
				for _, w := range []string{"hour", "day", "month"} {
					pipe.PFAdd(ctx, prefix+"dist:user:"+w+":"+member, f.Data["user"])
				}
				issued += 4
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	el := time.Since(start)
	return projRate{Name: "raw pipelined go-redis, one fact at a time", Facts: len(facts), Elapsed: el,
		Commands: float64(issued) / float64(len(facts)), CPU: c0.window(projSampleCPU(ctx, rdb))}
}

// projQueries measures (d).
func projQueries(t *testing.T, ctx context.Context, rdb *redis.Client, rep *projReport) {
	// measure times queries; between, when set, runs before each query,
	// outside the timed part.
	measure := func(name string, buckets int, target bool, e *projection.Engine, q projection.QueryOptions, between func(i int)) {
		projWaitQuiet(t, ctx, rdb)
		var lat []time.Duration
		var c0 projCPU
		for i := 0; i < projQueryWarmups+projQueryRuns; i++ {
			if i == projQueryWarmups {
				c0 = projSampleCPU(ctx, rdb)
			}
			if between != nil {
				between(i)
			}
			start := time.Now()
			r, err := e.Query(ctx, "q", q)
			d := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if !q.Aggregate && len(r) != buckets {
				t.Fatalf("%s: %d buckets, want %d", name, len(r), buckets)
			}
			if i >= projQueryWarmups {
				lat = append(lat, d)
			}
		}
		cpu := c0.window(projSampleCPU(ctx, rdb))
		slices.Sort(lat)
		rep.Queries = append(rep.Queries, projLatency{Name: name, Buckets: buckets, Target: target, Lat: lat, CPU: cpu})
	}

	// A day of minute buckets, four facts each.
	dayYAML := strings.Replace(projMinuteYAML, "groupBy: [data.country]\n", "", 1)
	day := projEngine(t, dayYAML, projection.EngineOptions{State: projection.NewRedisState(rdb).WithPrefix("bench:query:minute:")})
	var facts []projection.Fact
	for i := 0; i < 1440*4; i++ {
		facts = append(facts, projection.Fact{ID: fmt.Sprint("d", i), Type: "deposit", Timestamp: projBase + int64(i)*15_000,
			Data: map[string]any{"amount": json.Number(fmt.Sprintf("%d.25", i))}})
	}
	if _, err := day.ProcessIncrementalBatch(ctx, facts, &projection.ProcessOptions{ProjectionKey: "q"}); err != nil {
		t.Fatal(err)
	}
	dayEnd := projBase + 1440*60_000 - 1
	dayRange := projection.QueryOptions{From: projBase, To: dayEnd}
	measure("1,440 minute buckets, one per bucket", 1440, true, day, dayRange, nil)

	// Another process (its own client) adds a fact to one of the buckets
	// before each query.
	opt := rdb.Options()
	wrdb := redis.NewClient(&redis.Options{Addr: opt.Addr, DB: opt.DB, Username: opt.Username, Password: opt.Password})
	defer wrdb.Close()
	writer := projEngine(t, dayYAML, projection.EngineOptions{State: projection.NewRedisState(wrdb).WithPrefix("bench:query:minute:")})
	measure("1,440 minute buckets, one per bucket, another process writing one bucket before each query", 1440, true, day, dayRange,
		func(i int) {
			f := projection.Fact{ID: fmt.Sprint("w", i), Type: "deposit", Timestamp: projBase + int64(i*7919%1440)*60_000 + 1,
				Data: map[string]any{"amount": json.Number("1.5")}}
			if err := writer.ProcessIncremental(ctx, f, &projection.ProcessOptions{ProjectionKey: "q"}); err != nil {
				t.Fatal(err)
			}
		})

	// A RESP2 client cannot track keys: no query cache.
	rdb2 := redis.NewClient(&redis.Options{Addr: opt.Addr, DB: opt.DB, Username: opt.Username, Password: opt.Password, Protocol: 2})
	defer rdb2.Close()
	day2 := projEngine(t, dayYAML, projection.EngineOptions{State: projection.NewRedisState(rdb2).WithPrefix("bench:query:minute:")})
	measure("1,440 minute buckets, one per bucket, without the query cache (RESP2 client)", 1440, false, day2, dayRange, nil)
	measure("1,440 minute buckets, aggregated", 1440, false, day, projection.QueryOptions{From: projBase, To: dayEnd, Aggregate: true}, nil)

	// A year of hourly buckets, with rollups sealed to days and months.
	yearEnd := time.UnixMilli(projBase).AddDate(1, 0, 0)
	clock := time.UnixMilli(projBase) // nothing sealed while loading
	yearYAML := strings.Replace(strings.Replace(projRollupYAML, "timeWindow: minute", "timeWindow: hour", 1), "groupBy: [data.country]\n", "", 1)
	year := projEngine(t, yearYAML, projection.EngineOptions{State: projection.NewRedisState(rdb).WithPrefix("bench:query:hour:"),
		Now: func() time.Time { return clock }})
	facts = facts[:0]
	hours := int(yearEnd.Sub(time.UnixMilli(projBase)).Hours())
	for i := 0; i < hours*2; i++ {
		facts = append(facts, projection.Fact{ID: fmt.Sprint("y", i), Type: "deposit", Timestamp: projBase + int64(i)*1_800_000,
			Data: map[string]any{"amount": json.Number(fmt.Sprintf("%d.5", i%100)), "user": fmt.Sprint("u", i%300)}})
	}
	if _, err := year.ProcessIncrementalBatch(ctx, facts, &projection.ProcessOptions{ProjectionKey: "q"}); err != nil {
		t.Fatal(err)
	}
	clock = yearEnd.Add(time.Hour)
	rr, err := year.Rollup(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	rep.RollupBuckets, rep.Sealed = hours, rr.Sealed
	measure(fmt.Sprintf("a year of hourly buckets (%s), one per bucket", formatInt(int64(hours))), hours, false, year,
		projection.QueryOptions{From: projBase, To: yearEnd.UnixMilli() - 1}, nil)
	measure(fmt.Sprintf("a year of hourly buckets (%s), aggregated from months", formatInt(int64(hours))), hours, false, year,
		projection.QueryOptions{From: projBase, To: yearEnd.UnixMilli() - 1, Aggregate: true}, nil)
	measure(fmt.Sprintf("a year of hourly buckets, aggregated, ragged edges (%s)", "Jan 1 00:30 to Dec 30 12:10"), hours, false, year,
		projection.QueryOptions{From: projBase + 1_800_000, To: yearEnd.UnixMilli() - 36*3_600_000 + 600_000, Aggregate: true}, nil)
}

func (r *projReport) evaluate() {
	var batch, minute, roll, query []string
	if rate := r.Batch.Rate(); rate < projTargetBatch {
		batch = append(batch, fmt.Sprintf("%s facts/s < %s", formatInt(int64(rate)), formatInt(int64(projTargetBatch))))
	}
	check := func(x, raw projRate, target float64, fails *[]string) {
		if rate := x.Rate(); rate < target {
			*fails = append(*fails, fmt.Sprintf("%s facts/s < %s", formatInt(int64(rate)), formatInt(int64(target))))
		}
		if ratio := x.Rate() / raw.Rate(); ratio < projTargetRatio {
			*fails = append(*fails, fmt.Sprintf("%.0f%% of the raw baseline < %.0f%%", 100*ratio, 100*projTargetRatio))
		}
	}
	check(r.Minute, r.MinuteRaw, projTargetMinute, &minute)
	check(r.Rollup, r.RollupRaw, projTargetRollup, &roll)
	for _, q := range r.Queries {
		for _, f := range q.misses() {
			query = append(query, q.Name+": "+f)
		}
	}
	r.BatchOK, r.MinuteOK, r.RollupOK = verdict(batch), verdict(minute), verdict(roll)
	r.JSONOK = "reported (no target)"
	for _, f := range batch {
		r.Failures = append(r.Failures, "(a) "+f)
	}
	for _, f := range minute {
		r.Failures = append(r.Failures, "(c) minute window: "+f)
	}
	for _, f := range roll {
		r.Failures = append(r.Failures, "(c) rollups + count_distinct: "+f)
	}
	for _, f := range query {
		r.Failures = append(r.Failures, "(d) 1,440 minute buckets: "+f)
	}
	for _, x := range []projRate{r.Batch, r.JSON, r.Minute, r.MinuteRaw, r.Rollup, r.RollupRaw} {
		if x.CPU.Other > projNoisyCores {
			r.Noisy = append(r.Noisy, fmt.Sprintf("%s (%.2f cores)", x.Name, x.CPU.Other))
		}
	}
	for _, q := range r.Queries {
		if q.CPU.Other > projNoisyCores {
			r.Noisy = append(r.Noisy, fmt.Sprintf("query %s (%.2f cores)", q.Name, q.CPU.Other))
		}
	}
}

func (r *projReport) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Projection engine\n\n")
	w("Written by `TestProjectionEngine` (`bash bench/run.sh -run TestProjectionEngine`) on %s.\n\n", r.Date.Format("2006-01-02 15:04 MST"))
	w("| Machine | |\n|---|---|\n")
	w("| Kernel | `%s` |\n| CPU | %s, %d cores |\n| Go | %s |\n", r.Uname, r.CPUModel, r.Cores, r.Go)
	w("| Redis | %s, a local throwaway server (testutil.Redis) on 127.0.0.1, one go-redis client |\n\n", r.RedisVersion)

	cpu := func(x projRate) string {
		red := "n/a"
		if x.CPU.RedisKnown {
			red = fmt.Sprintf("%.2f", x.CPU.Redis)
		}
		return fmt.Sprintf("%.2f / %s / %.2f", x.CPU.Self, red, x.CPU.Other)
	}
	w("### (a), (b) batch processing, one core\n\n")
	w("`Engine.Process` over %s facts (median of %d rounds) with `GOMAXPROCS(1)`: count + sum + avg by hour, grouped by "+
		"`data.country` (8 values), exact decimal sums of two-decimal amounts; every fact id is checked for repeats.\n\n",
		formatInt(projBatchFacts), projBatchRounds)
	w("| Scenario | facts/s | time per fact | CPU cores: bench / Redis / other | Target | Result |\n|---|---:|---:|---|---|---|\n")
	row := func(x projRate, target, result string) {
		w("| %s | %s | %.0f ns | %s | %s | %s |\n", x.Name, formatInt(int64(x.Rate()+0.5)), 1e9/x.Rate(), cpu(x), target, result)
	}
	row(r.Batch, "≥ "+formatInt(projTargetBatch)+" facts/s", r.BatchOK)
	row(r.JSON, "—", r.JSONOK)
	row(r.Decode, "—", "reported: decoding alone (part of (b))")
	w("\n(b) decodes each fact's JSON (`{\"id\",\"tenant_id\",\"entity_id\",\"type\",\"subtype\",\"timestamp\",\"data\":{…4 fields}}`, "+
		"about %d bytes) with `FactFromJSON`, then processes as (a).\n\n", len(projJSON(1)[0]))

	w("### (c) incremental processing into Redis\n\n")
	w("`ProcessIncrementalBatch` of %s facts, one second apart, in calls of %s facts (the engine sends them as script calls of "+
		"128 facts, each call one atomic step that applies every fact together with its dedupe record). Minute window grouped by country, count + sum + avg; the second scenario adds "+
		"`count_distinct(data.user)` and rollups to hour, day and month, sealed as the clock follows the stream. "+
		"Baselines, measured in the same run on the same server: a raw go-redis loop that pipelines the commands the engine's "+
		"scripts run, with the same arguments (per call of 128 facts: lock and meta reads, a SADD per fact, summed HINCRBYs and a "+
		"ZADD per new bucket, one multi-value SADD per minute's set of distinct values; the reads and writes of each hour and day seal), one pipeline per "+
		"%s facts; the ratio target is against this one. For reference, a loop doing the same updates one fact at a time "+
		"without scripts.\n\n", formatInt(projIncrFacts), formatInt(projIncrBatch), formatInt(projIncrBatch))
	w("| Scenario | Path | facts/s | Redis commands per fact | vs raw | CPU cores: bench / Redis / other | Target | Result |\n")
	w("|---|---|---:|---:|---:|---|---|---|\n")
	crow := func(scn string, x, raw projRate, target, result string) {
		w("| %s | %s | %s | %.2f | %.0f%% | %s | %s | %s |\n", scn, x.Name, formatInt(int64(x.Rate()+0.5)), x.Commands,
			100*x.Rate()/raw.Rate(), cpu(x), target, result)
	}
	crow("minute", r.MinuteRaw, r.MinuteRaw, "reference", "—")
	crow("minute", r.MinuteNaive, r.MinuteRaw, "—", "—")
	crow("minute", r.Minute, r.MinuteRaw, fmt.Sprintf("≥ %s facts/s, ≥ %.0f%% of raw", formatInt(projTargetMinute), 100*projTargetRatio), r.MinuteOK)
	crow("rollups + HLL", r.RollupRaw, r.RollupRaw, "reference", "—")
	crow("rollups + HLL", r.RollupNaive, r.RollupRaw, "—", "—")
	crow("rollups + HLL", r.Rollup, r.RollupRaw, fmt.Sprintf("≥ %s facts/s, ≥ %.0f%% of raw", formatInt(projTargetRollup), 100*projTargetRatio), r.RollupOK)
	w("\nRedis commands per fact: for the engine, the commands its scripts and its seal reads ran (INFO commandstats), divided " +
		"by facts; for the baselines, the commands they sent. When every fact of a call is new and on time the engine sums the " +
		"call's facts per bucket in Go and the script only checks and records the ids and applies the sums; otherwise the " +
		"script applies the facts one by one.\n\n")

	w("### (d) query latency (materialized, Redis, storage version 2)\n\n")
	w("%d queries after %d warm-ups, each a full `Engine.Query` returning a fresh result map. With the query cache (the "+
		"default for a RESP3 client): one round trip on the cache's own connection reads the meta and the members of each "+
		"planned range (ZRANGEBYSCORE) and delivers the invalidation messages Redis queued for keys the cache read (CLIENT "+
		"TRACKING); buckets the cache does not hold are read there as pipelined HGETALLs, raw replies decoded into cells; "+
		"exact arithmetic and the rendering run every query. In the second row another process (its own client) adds a fact "+
		"to one bucket before each query, untimed, so each query reads that bucket again. Without the cache (a RESP2 client, "+
		"and queries of single buckets' distinct counts, such as the year one per bucket), every query reads every bucket in "+
		"pipelined pages of HGETALLs (128, then 320 per page; two pages in flight, decoded and rendered while the next is "+
		"read). The year has rollups sealed to days and months (%s coarser buckets written), so the aggregated "+
		"queries read about a dozen month and day buckets plus edges.\n\n",
		projQueryRuns, projQueryWarmups, formatInt(int64(r.Sealed)))
	w("| Query | p50 | p99 | CPU cores: bench / Redis / other | Target | Result |\n|---|---:|---:|---|---|---|\n")
	for _, q := range r.Queries {
		target, result := "—", "reported"
		if q.Target {
			target, result = "p99 < "+fmtLatency(projTargetQueryP99), verdict(q.misses())
		}
		w("| %s | %s | %s | %.2f / %.2f / %.2f | %s | %s |\n", q.Name, fmtLatency(q.pct(0.50)), fmtLatency(q.pct(0.99)),
			q.CPU.Self, q.CPU.Redis, q.CPU.Other, target, result)
	}
	w("\n")
	if len(r.Noisy) > 0 {
		w("**Caution:** other processes used more than %.2f cores during %s; the machine was shared and those figures "+
			"understate what it can do.\n\n", projNoisyCores, strings.Join(r.Noisy, ", "))
	}
	if len(r.Failures) > 0 {
		w("Targets missed:\n\n")
		for _, f := range r.Failures {
			w("- %s\n", f)
		}
		w("\n")
	}
	w("Reproduce with `bash bench/run.sh -run TestProjectionEngine`.\n")
	return b.String()
}
