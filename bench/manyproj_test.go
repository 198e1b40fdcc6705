//go:build bench

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil"
)

// Scenario 5: many projections on the shared reader.
const (
	mpConfigs     = 100
	mpDefaultRate = 800.0 // appends/s offered, about scenario 2's measured deposit rate
	mpTargetP99   = 500 * time.Millisecond
	mpWorkers     = 32
	mpProbeEvery  = 100 * time.Millisecond // pause between two markers
	mpPollEvery   = 5 * time.Millisecond
	mpReadyWait   = 5 * time.Minute
)

var (
	mpChannels = []string{"web", "mobile", "branch", "partner"}
	mpRegions  = []string{"emea", "amer", "apac"}
	mpGroups   = [][]string{{}, {"data.country"}, {"data.channel"}, {"data.region"}, {"data.country", "data.channel"},
		{"data.user"}, {"data.region", "data.channel"}}
	mpWindows = []string{"minute", "hour", "day"}
	mpAggs    = [][]map[string]any{
		{{"field": "count", "function": "count"}},
		{{"field": "count", "function": "count"}, {"field": "data.amount", "function": "sum"}},
		{{"field": "count", "function": "count"}, {"field": "data.amount", "function": "sum"}, {"field": "data.amount", "function": "avg"}},
		{{"field": "data.amount", "function": "min"}, {"field": "data.amount", "function": "max"}},
		{{"field": "data.amount", "function": "sum"}, {"field": "data.user", "function": "count_distinct"}},
	}
)

// mpSettings is the settings of projection config i: config 0 is the
// probe's (a count by data.probe per minute), the others vary grouping,
// window and aggregations over the same fact type.
func mpSettings(i int) map[string]any {
	s := map[string]any{"source": "account", "factTypes": []string{"deposit"}, "materialize": true, "storageVersion": 2}
	if i == 0 {
		s["timeWindow"], s["groupBy"] = "minute", []string{"data.probe"}
		s["aggregations"] = mpAggs[0]
		return s
	}
	s["groupBy"] = mpGroups[i%len(mpGroups)]
	s["timeWindow"] = mpWindows[(i/len(mpGroups))%len(mpWindows)]
	s["aggregations"] = mpAggs[i%len(mpAggs)]
	return s
}

// mpFact is the body of load fact n.
func mpFact(n int) []byte {
	return fmt.Appendf(nil, `{"entity_id":%q,"type":"deposit","data":{"amount":%d.%02d,"country":%q,"channel":%q,"region":%q,"user":"u%d","probe":"load"}}`,
		mtEntityID(n%manyEntities), n%500, n%100, projCountries[n%len(projCountries)], mpChannels[n%len(mpChannels)],
		mpRegions[n%len(mpRegions)], n%5000)
}

// mpRun is one paced append run.
type mpRun struct {
	Name            string
	Offered         float64
	Ops, OK, Errors int64
	FirstErr        string
	Lat             []time.Duration // append latencies in the window, sorted
	Probe           []time.Duration // end-to-end lags, sorted
	ProbeLost       int
	CPU             gwCPU
}

func (r *mpRun) rate() float64 { return float64(r.Ops) / r.CPU.Wall.Seconds() }

// perFact is CPU per fact appended in the window.
func (r *mpRun) perFact(d time.Duration) time.Duration {
	if r.Ops == 0 || d < 0 {
		return 0
	}
	return d / time.Duration(r.Ops)
}

// mpClient is the HTTP side of the scenario.
type mpClient struct {
	t      *testing.T
	base   string
	key    string
	client *http.Client
}

func (c *mpClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-API-Key", c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, b, err
}

// data is the "data" member of a response, or the whole object.
func mpData(b []byte) map[string]any {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	if d, ok := m["data"].(map[string]any); ok {
		return d
	}
	return m
}

// paced appends facts at rate per second for p.Warmup + p.Duration and,
// when probeID is set, probes the end-to-end lag over the measured window.
func (c *mpClient) paced(name string, p loadParams, rate float64, pids [3]int, probeID string) *mpRun {
	t := c.t
	ctx := t.Context()
	r := &mpRun{Name: name, Offered: rate}
	start := time.Now()
	winFrom, winTo := start.Add(p.Warmup), start.Add(p.Warmup+p.Duration)
	slots := make(chan int, 4096)
	go func() {
		defer close(slots)
		for n := 0; ; n++ {
			at := start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
			if !at.Before(winTo) {
				return
			}
			sleepUntil(ctx, at)
			select {
			case slots <- n:
			default: // the server is behind: the slot is dropped, the rate shows it
			}
		}
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range mpWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			var ops, ok, errs int64
			var first string
			for n := range slots {
				t0 := time.Now()
				code, b, err := c.do(ctx, http.MethodPost, "/v1/facts", mpFact(n))
				t1 := time.Now()
				if err != nil || code != http.StatusCreated {
					errs++
					if first == "" {
						first = fmt.Sprintf("status %d %v: %.200s", code, err, b)
					}
					continue
				}
				ok++
				if t1.After(winFrom) && !t1.After(winTo) {
					ops++
					lat = append(lat, t1.Sub(t0))
				}
			}
			mu.Lock()
			r.Ops, r.OK, r.Errors = r.Ops+ops, r.OK+ok, r.Errors+errs
			r.Lat = append(r.Lat, lat...)
			if r.FirstErr == "" {
				r.FirstErr = first
			}
			mu.Unlock()
		}()
	}
	var before, after gwCPUSample
	var window sync.WaitGroup
	window.Add(1)
	go func() {
		defer window.Done()
		sleepUntil(ctx, winFrom)
		before = sampleGwCPU(pids[0], pids[1], pids[2])
		if probeID != "" {
			r.Probe, r.ProbeLost = c.probe(probeID, winTo)
		}
		sleepUntil(ctx, winTo)
		after = sampleGwCPU(pids[0], pids[1], pids[2])
	}()
	window.Wait()
	wg.Wait()
	r.CPU = after.sub(before)
	slices.Sort(r.Lat)
	slices.Sort(r.Probe)
	t.Logf("%s: %.0f appends/s of %.0f offered, append p99 %v, %d errors %s; server %.2f, PostgreSQL %.2f, Redis %.2f cores; lag p50 %v p99 %v (%d probes, %d not seen)",
		name, r.rate(), rate, pctOf(r.Lat, 0.99), r.Errors, r.FirstErr, r.CPU.Server.Seconds()/r.CPU.Wall.Seconds(),
		r.CPU.PG.Seconds()/r.CPU.Wall.Seconds(), r.CPU.Redis.Seconds()/r.CPU.Wall.Seconds(), pctOf(r.Probe, 0.5), pctOf(r.Probe, 0.99), len(r.Probe), r.ProbeLost)
	return r
}

// probe appends marker facts one after another until until, each with a
// data.probe value of its own, and polls the probe projection's
// materialized state until the marker's group shows; the lag runs from
// sending the append (so it includes the append's own latency) to the
// first answer that shows it. A marker not seen within 10 s is lost.
func (c *mpClient) probe(probeID string, until time.Time) (lags []time.Duration, lost int) {
	ctx := c.t.Context()
	for seq := 0; time.Now().Before(until); seq++ {
		marker := fmt.Sprintf("m%d-%d", time.Now().UnixNano(), seq)
		body := fmt.Appendf(nil, `{"entity_id":%q,"type":"deposit","data":{"amount":1,"country":"US","channel":"web","region":"emea","user":"probe","probe":%q}}`,
			mtEntityID(seq%manyEntities), marker)
		query := fmt.Appendf(nil, `{"filters":{"mode":"materialized","data.probe":%q}}`, marker)
		t0 := time.Now()
		code, b, err := c.do(ctx, http.MethodPost, "/v1/facts", body)
		if err != nil || code != http.StatusCreated {
			c.t.Logf("probe append: %d %v %.200s", code, err, b)
			lost++
			continue
		}
		seen := false
		for time.Since(t0) < 10*time.Second {
			code, b, err := c.do(ctx, http.MethodPost, "/v1/projections/"+probeID+"/query", query)
			if err == nil && code == http.StatusOK {
				if n, _ := mpData(b)["count"].(float64); n > 0 {
					seen = true
					break
				}
			} else if err == nil {
				c.t.Logf("probe query: %d %.200s", code, b)
			}
			time.Sleep(mpPollEvery) // probe pacing, not ordering
		}
		if seen {
			lags = append(lags, time.Since(t0))
		} else {
			lost++
		}
		time.Sleep(mpProbeEvery) // probe pacing, not ordering
	}
	return lags, lost
}

// waitReady waits until n projections of the tenant report ready.
func (c *mpClient) waitReady(n int) time.Duration {
	start := time.Now()
	for {
		code, b, err := c.do(c.t.Context(), http.MethodGet, "/v1/projections", nil)
		ready := bytes.Count(b, []byte(`"ready":true`))
		if err == nil && code == http.StatusOK && ready >= n {
			return time.Since(start)
		}
		if time.Since(start) > mpReadyWait {
			c.t.Fatalf("%d of %d projections ready after %v (last: %d %v)", ready, n, mpReadyWait, code, err)
		}
		time.Sleep(250 * time.Millisecond) // poll interval; the deadline is above
	}
}

// TestManyProjections is scenario 5: 100 projection configs on one fact
// type, fed by the shared reader, while deposits are appended through
// POST /v1/facts at a steady rate; a probe measures the lag from append
// to a materialized query showing the fact. The same paced load with no
// projection configs, in the same server before the configs exist, is the
// baseline of the CPU cost.
func TestManyProjections(t *testing.T) {
	p := realisticParams(t)
	rate := mpDefaultRate
	if s := os.Getenv("BENCH_PROJECTION_RATE"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 {
			t.Fatalf("BENCH_PROJECTION_RATE=%q: want appends per second", s)
		}
		rate = v
	}
	dbURL := testutil.PostgresDurable(t)
	redisURL := testutil.Redis(t)
	tmp := t.TempDir()
	env, err := collectEnv(t.Context(), dbURL, tmp)
	if err != nil {
		t.Fatal(err)
	}
	keys := seedData(t, dbURL, filepath.Join(tmp, "seed"), []string{benchTenant}, manyEntities)
	bin := buildFactline(t, tmp)
	domain, _ := filepath.Abs(domainFile)
	srv := startFactlineProcess(t, bin, tmp, append([]string{"serve", "--database-url", dbURL, "--redis-url", redisURL, "--domain", domain,
		"--data-dir", filepath.Join(tmp, "data"), "--addr", "127.0.0.1:0"}, profileArgs()...))
	mon := newMonitor(t.Context(), openPool(t, dbURL, 1, "factline-bench-manyproj-monitor"))
	pids := [3]int{srv.cmd.Process.Pid, mon.postmaster, findRedisPID(redisURL)}

	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, MaxIdleConns: mpWorkers + 2,
		MaxIdleConnsPerHost: mpWorkers + 2, IdleConnTimeout: time.Minute, DisableCompression: true}
	defer tr.CloseIdleConnections()
	c := &mpClient{t: t, base: srv.base, key: keys[0], client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}

	base := c.paced("baseline: no projection configs", p, rate, pids, "")

	var probeID string
	var created atomic.Int32
	for i := range mpConfigs {
		body, _ := json.Marshal(map[string]any{"type": "projection", "name": fmt.Sprintf("mp-%03d", i), "settings": mpSettings(i)})
		code, b, err := c.do(t.Context(), http.MethodPost, "/v1/configs", body)
		if err != nil || code != http.StatusCreated {
			t.Fatalf("create projection %d: %d %v %.300s", i, code, err, b)
		}
		created.Add(1)
		if i == 0 {
			probeID, _ = mpData(b)["id"].(string)
		}
	}
	backfill := c.waitReady(mpConfigs)
	t.Logf("%d projections ready %v after their creation (backfilling the baseline's facts)", created.Load(), backfill.Round(time.Millisecond))
	projName := fmt.Sprintf("%d projection configs", mpConfigs)
	// BENCH_SERVER_CPUPROFILE=file profiles the server over this run.
	prof := &rtMeasurer{t: t}
	prof.profileTarget(tmp, projName)
	profiled := prof.serverProfile(projName, p.Warmup+p.Duration)
	proj := c.paced(projName, p, rate, pids, probeID)
	profiled()

	// Cost: the extra CPU per fact of the server, PostgreSQL and Redis over
	// the baseline's, shared among the projections.
	cost := func(r *mpRun) time.Duration {
		return r.perFact(r.CPU.Server) + r.perFact(max(r.CPU.PG, 0)) + r.perFact(max(r.CPU.Redis, 0))
	}
	extra := cost(proj) - cost(base)
	perProj := extra / mpConfigs

	rep := &mpReport{Env: env, Params: p, Rate: rate, Base: base, Proj: proj, Backfill: backfill, PerProj: perProj, Extra: extra}
	rep.check("end-to-end lag p99 < "+fmtLatency(mpTargetP99),
		fmt.Sprintf("p99 %s (p50 %s, max %s; %d markers, %d not seen within 10 s)", fmtLatency(pctOf(proj.Probe, 0.99)),
			fmtLatency(pctOf(proj.Probe, 0.5)), fmtLatency(pctOf(proj.Probe, 1)), len(proj.Probe), proj.ProbeLost),
		len(proj.Probe) > 0 && proj.ProbeLost == 0 && pctOf(proj.Probe, 0.99) < mpTargetP99)
	rep.check(fmt.Sprintf("the offered %s appends/s are sustained with the projections (≥ 95%% of the baseline's)", formatInt(int64(rate))),
		fmt.Sprintf("%s/s vs %s/s (%.1f%%)", formatInt(int64(proj.rate())), formatInt(int64(base.rate())), 100*proj.rate()/max(base.rate(), 1e-9)),
		proj.rate() >= 0.95*base.rate())
	rep.check("every append answered 201", fmt.Sprintf("%d errors (baseline %d) %s", proj.Errors, base.Errors, cmpOrString(proj.FirstErr, base.FirstErr)),
		proj.Errors == 0 && base.Errors == 0)
	md := rep.markdown()
	fmt.Println()
	fmt.Println(md)
	for _, f := range rep.Failures {
		t.Errorf("target missed: %s", f)
	}
	if err := updateSection(resultsFile, "many-projections", md); err != nil {
		t.Errorf("write %s: %v", resultsFile, err)
	}
}

func cmpOrString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

type mpReport struct {
	Env        *benchEnv
	Params     loadParams
	Rate       float64
	Base, Proj *mpRun
	Backfill   time.Duration
	PerProj    time.Duration
	Extra      time.Duration
	Checks     []gwCheck
	Failures   []string
}

func (r *mpReport) check(target, measured string, ok bool) {
	r.Checks = append(r.Checks, gwCheck{Target: target, Measured: measured, OK: ok})
	if !ok {
		r.Failures = append(r.Failures, target+": measured "+measured)
	}
}

func (r *mpReport) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	e := r.Env
	w("## Many projections (100 configs on the shared reader; Postgres + Redis)\n\n")
	w("Written by `TestManyProjections` (`bash bench/run.sh`) on %s.\n\n", e.Date.Format("2006-01-02 15:04 MST"))
	w("%s", e.machineRows())
	w("| PostgreSQL | %s, a local throwaway server (testutil.PostgresDurable), fsync=%s, synchronous_commit=%s |\n\n",
		e.PGVersion, e.Setting("fsync"), e.Setting("synchronous_commit"))
	w("Server: the `factline` binary of this tree as its own process: `factline serve --database-url … --redis-url … " +
		"--domain manifests/domain.yaml`, default log level; projection state in Redis.\n\n")
	w("Load: deposits on %s accounts of one tenant through `POST /v1/facts`, offered at a steady %s/s by %d Go clients "+
		"(a slot the clients cannot take at once is dropped, so the achieved rate shows a server that falls behind); "+
		"each fact carries an amount, a country (8), a channel (4), a region (3) and a user (5,000). Windows: %v warm-up, "+
		"then %v measured.\n\n", formatInt(manyEntities), formatInt(int64(r.Rate)), mpWorkers, r.Params.Warmup, r.Params.Duration)
	w("Projections: %d configs created through `POST /v1/configs` on the deposit fact type, all materialized in Redis: "+
		"grouped by nothing, country, channel, region, country and channel, user, or region and channel; by minute, hour "+
		"or day; counting, summing, averaging, min and max, or counting distinct users. Config 0 (the probe's) counts by "+
		"`data.probe` per minute. They were created after the baseline run and backfilled its facts in %v before the "+
		"measured run started.\n\n", mpConfigs, r.Backfill.Round(time.Millisecond))
	w("Lag probe: during the measured window, one marker deposit at a time with a `data.probe` value of its own, then "+
		"`POST /v1/projections/<probe>/query` with `{\"mode\":\"materialized\",\"data.probe\":<marker>}` every %v until the "+
		"count shows it; the lag runs from sending the append (its own latency included, so an upper bound on commit to "+
		"visible) to that answer; %v between markers.\n\n", mpPollEvery, mpProbeEvery)
	w("Baseline: the same paced load on the same server before any projection config existed.\n\n")
	w("| Run | appends/s (offered %s) | append p50 | append p99 | errors | CPU: server | CPU: PostgreSQL | CPU: Redis | CPU µs/fact (all three) | other processes |\n"+
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", formatInt(int64(r.Rate)))
	for _, x := range []*mpRun{r.Base, r.Proj} {
		all := x.perFact(x.CPU.Server) + x.perFact(max(x.CPU.PG, 0)) + x.perFact(max(x.CPU.Redis, 0))
		w("| %s | %s | %s | %s | %d | %s | %s | %s | %.0f | %.2f cores |\n", x.Name, formatInt(int64(x.rate()+0.5)),
			fmtLatency(pctOf(x.Lat, 0.5)), fmtLatency(pctOf(x.Lat, 0.99)), x.Errors, x.CPU.cores(x.CPU.Server), x.CPU.cores(x.CPU.PG),
			x.CPU.cores(x.CPU.Redis), float64(all)/float64(time.Microsecond), x.CPU.OtherCores())
	}
	w("\n")
	baseAll := r.Base.perFact(r.Base.CPU.Server) + r.Base.perFact(max(r.Base.CPU.PG, 0)) + r.Base.perFact(max(r.Base.CPU.Redis, 0))
	w("Per-fact projection cost: the CPU (from /proc: server process, PostgreSQL's postmaster and children, Redis) per "+
		"appended fact in the projection run minus the same in the baseline, divided by %d projections: **%.1f µs per fact "+
		"per projection** (%.0f µs per fact for all %d, %.1f× the baseline's %.0f µs per fact of appending). The server's share alone: %.1f µs.\n\n",
		mpConfigs, float64(r.PerProj)/float64(time.Microsecond), float64(r.Extra)/float64(time.Microsecond), mpConfigs,
		float64(r.Extra+baseAll)/float64(max(baseAll, 1)), float64(baseAll)/float64(time.Microsecond),
		float64(r.Proj.perFact(r.Proj.CPU.Server)-r.Base.perFact(r.Base.CPU.Server))/float64(mpConfigs)/float64(time.Microsecond))
	writeCheckTable(w, r.Checks)
	w("\n")
	if o := max(r.Base.CPU.OtherCores(), r.Proj.CPU.OtherCores()); o > gwNoisyCores {
		w("**Caution:** the machine was shared while this ran (other processes used up to %.2f cores in a window); "+
			"absolute figures understate what it can do.\n\n", o)
	}
	if r.Params.Duration < 10*time.Second {
		w("This run used a short window (`BENCH_DURATION=%v`) because the machine was shared and loaded; the default is 10 s.\n\n", r.Params.Duration)
	}
	writeMissed(w, r.Failures)
	w("Reproduce with `go test -tags bench -run '^TestManyProjections$' -v ./bench/` (`BENCH_DURATION`, `BENCH_WARMUP` set the windows, " +
		"`BENCH_PROJECTION_RATE` the offered appends/s).\n")
	return b.String()
}
