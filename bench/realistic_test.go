//go:build bench

package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/testutil"
	"github.com/factline/factline/sdk/conformance"
)

// The realistic workloads: many tenants reading cold entities through the
// Redis limiter (TestManyTenantsColdReads), writes through the account
// ledger plugin (TestPluginWrites) and the embedded SQLite store next to
// PostgreSQL (TestEmbeddedDefault). Every figure is reported as a ratio to
// a baseline measured in the same run.

// Scenario 1 targets.
const (
	mtTenants      = 1000
	mtEntities     = 100_000
	mtRPM          = 600
	mtTargetRatio  = 0.20
	mtTargetP99    = 20 * time.Millisecond
	mtAccountRoute = "/v1/accounts/:id"
)

// Scenario 2 targets.
const (
	pwTargetRate  = 3000.0
	pwTargetRatio = 0.70
	pwTargetP99   = 150 * time.Millisecond
)

// Scenario 3 targets.
const (
	edTargetAppends   = 2000.0
	edTargetReadRatio = 0.50
)

func mtTenant(i int) string   { return fmt.Sprintf("tenant-%04d", i) }
func mtEntityID(i int) string { return fmt.Sprintf("acct-%06d", i) }

// getManifest is a gateway manifest with one authenticated get route on
// accounts, limited per tenant at rpm (none when rpm is 0).
func getManifest(rpm int) string {
	m := "name: factline-bench-realistic\nversion: \"1.0.0\"\nroutes:\n  - path: " + mtAccountRoute +
		"\n    method: GET\n    entity: account\n    action: get\n    auth: api_key\n"
	if rpm > 0 {
		m += fmt.Sprintf("    rateLimit: {rpm: %d, scope: tenant}\n", rpm)
	}
	return m
}

// readScript is the wrk Lua script of the read scenarios: each request
// reads an entity chosen uniformly among n, entity i belonging to tenant
// i % len(keys), with that tenant's key (one key per line in keysFile).
func readScript(t *testing.T, dir, keysFile string, n int) string {
	t.Helper()
	script := fmt.Sprintf(`local keys = {}
for line in io.lines(%q) do keys[#keys + 1] = line end
local counter = 0
function setup(thread)
  thread:set("seed", counter)
  counter = counter + 1
end
function init(args)
  math.randomseed(7919 * (seed + 1))
end
function request()
  local i = math.random(0, %d)
  local key = keys[(i %% #keys) + 1]
  return wrk.format("GET", string.format("/v1/accounts/acct-%%06d", i), {["X-API-Key"] = key})
end
`, keysFile, n-1)
	path := filepath.Join(dir, "read.lua")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// seedData creates tenants (one live key each) and entities (account
// entity i in tenant i % tenants) through internal/host/app on dbURL (empty: the
// SQLite store in dataDir), and returns the keys. On PostgreSQL the setup
// connections commit asynchronously: the seeding is not what is measured.
func seedData(t *testing.T, dbURL, dataDir string, tenants []string, entities int) []string {
	t.Helper()
	ctx := t.Context()
	if dbURL != "" {
		sep := "?"
		if strings.Contains(dbURL, "?") {
			sep = "&"
		}
		dbURL += sep + "synchronous_commit=off"
	}
	logger := slog.New(slog.NewTextHandler(&cappedWriter{w: os.Stderr, left: 8 << 10}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(ctx, app.Config{DatabaseURL: dbURL, DataDir: dataDir, Domains: []string{domainFile}, Logger: logger, StandInLedgers: true})
	if err != nil {
		t.Fatalf("seed: open the store: %v", err)
	}
	defer a.Close()
	keys := make([]string, len(tenants))
	for i, tn := range tenants {
		keys[i], _, err = auth.CreateKey(ctx, a.Store, tn, auth.ModeLive, "bench", time.Now())
		if err != nil {
			t.Fatalf("seed: create a key for %s: %v", tn, err)
		}
	}
	start := time.Now()
	work := make(chan int, 256)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	workers := 32
	if dbURL == "" {
		workers = 4 // one writer at a time on SQLite anyway
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				id := mtEntityID(i)
				_, err := a.Platform.CreateEntity(ctx, tenants[i%len(tenants)], platform.CreateEntityInput{
					Type: "account", ID: id,
					Fields: map[string]any{"name": "Bench " + id, "status": "active", "subtype": "customer"},
				})
				if err != nil {
					mu.Lock()
					first = cmpOr(first, fmt.Errorf("create account %s: %w", id, err))
					mu.Unlock()
				}
			}
		}()
	}
	for i := range entities {
		work <- i
	}
	close(work)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
	t.Logf("seeded %d tenants and %d accounts in %v", len(tenants), entities, time.Since(start).Round(time.Millisecond))
	return keys
}

func writeLines(t *testing.T, path string, lines []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// buildAccountPlugin builds plugins/account into dir/account.wasm (the
// factline binary built by buildFactline has no plugin built in).
func buildAccountPlugin(t *testing.T, dir string) {
	t.Helper()
	mod, err := conformance.Build(t.Context(), "../plugins/account")
	if err != nil {
		t.Fatalf("build the account plugin: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "account.wasm"), mod, 0o644); err != nil {
		t.Fatal(err)
	}
}

// getOnce GETs url with key and returns the status, body and headers.
func getOnce(t *testing.T, url, key string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, b, resp.Header
}

// rtRun is one measured run of a realistic scenario: a wrk run or a Go
// client run, with where the machine's CPU went.
type rtRun struct {
	Name string
	Cmd  string
	W    *wrkResult  // wrk runs
	L    *loadResult // Go client runs
	// Status counts the Go client's answers by status code (0: transport
	// error).
	Status map[int]int64
	CPU    gwCPU
}

func (r *rtRun) rate() float64 {
	if r.W != nil {
		return r.W.RPS
	}
	return r.L.Rate()
}

func (r *rtRun) p(q float64) time.Duration {
	if r.W != nil {
		switch q {
		case 0.5:
			return r.W.P50
		case 0.99:
			return r.W.P99
		}
		return r.W.LatMax
	}
	if q >= 1 {
		if len(r.L.Lat) == 0 {
			return 0
		}
		return r.L.Lat[len(r.L.Lat)-1]
	}
	return r.L.Pct(q)
}

// failed is what the run answered other than success.
func (r *rtRun) failed() string {
	if r.W != nil {
		return fmt.Sprintf("%s non-2xx, %d socket errors of %s", formatInt(r.W.Non2xx), r.W.SocketErrors(), formatInt(r.W.Requests))
	}
	var parts []string
	for code, n := range r.Status {
		if code/100 != 2 {
			parts = append(parts, fmt.Sprintf("%s × %d", formatInt(n), code))
		}
	}
	if len(parts) == 0 {
		return "none of " + formatInt(r.L.OK)
	}
	return strings.Join(parts, ", ") + " (0: no answer)"
}

// rtMeasurer runs the scenarios of one test and samples the CPU around
// them.
type rtMeasurer struct {
	t         *testing.T
	p         loadParams
	wrkBin    string
	threads   int
	pg, redis int // PIDs; 0 unknown
	// profile, when set (BENCH_SERVER_CPUPROFILE), receives a CPU profile
	// of the server over the measured window of the run named profileRun,
	// fetched from profileBase/debug/pprof/profile.
	profile, profileRun, profileBase string
}

// serverProfile asks for a CPU profile of the server over d and writes
// it to m.profile when it is the run to profile; call the returned
// function after the window.
func (m *rtMeasurer) serverProfile(name string, d time.Duration) func() {
	if m.profile == "" || name != m.profileRun || m.profileBase == "" {
		return func() {}
	}
	done := make(chan error, 1)
	go func() {
		secs := max(1, int(d.Seconds())-1)
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", m.profileBase, secs))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil {
			err = os.WriteFile(m.profile, b, 0o644)
		}
		done <- err
	}()
	return func() {
		if err := <-done; err != nil {
			m.t.Errorf("server CPU profile: %v", err)
		} else {
			m.t.Logf("server CPU profile of %q in %s", name, m.profile)
		}
	}
}

var metricsRe = regexp.MustCompile(`metrics on (http://\S+)/metrics`)

// profileArgs are the serve flags that let the server be profiled when
// BENCH_SERVER_CPUPROFILE is set.
func profileArgs() []string {
	if os.Getenv("BENCH_SERVER_CPUPROFILE") == "" {
		return nil
	}
	return []string{"--metrics-addr", "127.0.0.1:0", "--pprof"}
}

// profileTarget points m's profiling at srv (started in dir with
// profileArgs) for the run named run.
func (m *rtMeasurer) profileTarget(dir, run string) {
	m.profile = os.Getenv("BENCH_SERVER_CPUPROFILE")
	if m.profile == "" {
		return
	}
	b, _ := os.ReadFile(filepath.Join(dir, "factline.stdout"))
	if mm := metricsRe.FindSubmatch(b); mm != nil {
		m.profileBase, m.profileRun = string(mm[1]), run
	}
}

// wrk runs the wrk script on base (warm-up, then the measured window),
// calling prepare first.
func (m *rtMeasurer) wrk(name, base, script string, serverPID int, prepare func()) *rtRun {
	t := m.t
	if prepare != nil {
		prepare()
	}
	a := wrkArgs{Threads: m.threads, Conns: m.p.Clients, Duration: m.p.Warmup, Timeout: 5 * time.Second, Script: script, URL: base}
	if m.p.Warmup > 0 {
		if _, err := runWrk(t.Context(), m.wrkBin, a); err != nil {
			t.Fatalf("%s warm-up: %v", name, err)
		}
	}
	a.Duration = m.p.Duration
	before := sampleGwCPU(serverPID, m.pg, m.redis)
	profiled := m.serverProfile(name, a.Duration)
	w, err := runWrk(t.Context(), m.wrkBin, a)
	after := sampleGwCPU(serverPID, m.pg, m.redis)
	profiled()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	r := &rtRun{Name: name, Cmd: "wrk " + strings.Join(a.command(), " "), W: w, CPU: after.sub(before)}
	r.CPU.Wrk = w.CPU
	t.Logf("%s: %.0f requests/s, p50 %v, p99 %v, %d requests, non-2xx %d, socket errors %d; other processes %.2f cores",
		name, w.RPS, w.P50, w.P99, w.Requests, w.Non2xx, w.SocketErrors(), r.CPU.OtherCores())
	return r
}

// post runs p.Clients Go clients posting to the URL and body op returns
// for each round; 201 is success.
func (m *rtMeasurer) post(name, key string, serverPID int, op func(worker, iter int) (string, []byte)) *rtRun {
	t := m.t
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        m.p.Clients,
		MaxIdleConnsPerHost: m.p.Clients,
		MaxConnsPerHost:     m.p.Clients,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var (
		mu     sync.Mutex
		status = map[int]int64{}
	)
	count := func(code int) {
		mu.Lock()
		status[code]++
		mu.Unlock()
	}
	do := func(ctx context.Context, worker, iter int) error {
		url, body := op(worker, iter)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("X-API-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			count(0)
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		count(resp.StatusCode)
		if err != nil {
			return fmt.Errorf("read response: %w", err)
		}
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("status %d: %.300s", resp.StatusCode, b)
		}
		return nil
	}
	self := os.Getpid()
	var before, after gwCPUSample
	var selfBefore, selfAfter time.Duration
	sample := func(s *gwCPUSample, cpu *time.Duration) {
		*s = sampleGwCPU(serverPID, m.pg, m.redis)
		if f := procStat(self); f != nil {
			*cpu = ticks(f[11]) + ticks(f[12])
		}
	}
	var window sync.WaitGroup
	window.Add(1)
	go func() {
		defer window.Done()
		sleepUntil(t.Context(), time.Now().Add(m.p.Warmup))
		sample(&before, &selfBefore)
		profiled := m.serverProfile(name, m.p.Duration)
		sleepUntil(t.Context(), time.Now().Add(m.p.Duration))
		sample(&after, &selfAfter)
		profiled()
	}()
	l, err := runLoad(t.Context(), name, m.p, do, nil, target{}, "")
	window.Wait()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	r := &rtRun{Name: name, Cmd: fmt.Sprintf("%d Go net/http clients, one request at a time each", m.p.Clients), L: l, Status: status, CPU: after.sub(before)}
	r.CPU.Wrk = selfAfter - selfBefore
	t.Logf("%s: %.0f/s, p50 %v, p99 %v, %d ok, %d errors %v; other processes %.2f cores",
		name, l.Rate(), l.Pct(0.5), l.Pct(0.99), l.OK, l.Errors, l.FirstErrs, r.CPU.OtherCores())
	return r
}

// rtReport is the RESULTS.md section of one realistic scenario.
type rtReport struct {
	Title, Test string
	Env         *benchEnv
	Params      loadParams
	Setup       []string // paragraphs
	Runs        []*rtRun
	Checks      []gwCheck
	Failures    []string
}

func (r *rtReport) check(target, measured string, ok bool) {
	r.Checks = append(r.Checks, gwCheck{Target: target, Measured: measured, OK: ok})
	if !ok {
		r.Failures = append(r.Failures, target+": measured "+measured)
	}
}

func (r *rtReport) markdown(base *rtRun) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	e := r.Env
	w("## %s\n\n", r.Title)
	w("Written by `%s` (`bash bench/run.sh`) on %s.\n\n", r.Test, e.Date.Format("2006-01-02 15:04 MST"))
	w("%s", e.machineRows())
	w("| PostgreSQL | %s, a local throwaway server (testutil.PostgresDurable), fsync=%s, synchronous_commit=%s, shared_buffers=%s |\n",
		e.PGVersion, e.Setting("fsync"), e.Setting("synchronous_commit"), e.Setting("shared_buffers"))
	w("\n")
	for _, s := range r.Setup {
		w("%s\n\n", s)
	}
	w("Windows: %v warm-up (discarded), then %v measured, %d connections or clients; the load generator shares the "+
		"machine's %d cores with the servers.\n\n", r.Params.Warmup, r.Params.Duration, r.Params.Clients, e.Cores)
	w("| Run | per second | p50 | p99 | max | not 2xx | vs %s | CPU: server | CPU: PostgreSQL | CPU: Redis | CPU: load generator | other processes |\n"+
		"|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|\n", base.Name)
	for _, x := range r.Runs {
		w("| %s | %s | %s | %s | %s | %s | %.1f%% | %s | %s | %s | %s | %.2f cores |\n", x.Name, formatInt(int64(x.rate()+0.5)),
			fmtLatency(x.p(0.5)), fmtLatency(x.p(0.99)), fmtLatency(x.p(1)), x.failed(), 100*x.rate()/max(base.rate(), 1e-9),
			x.CPU.cores(x.CPU.Server), x.CPU.cores(x.CPU.PG), x.CPU.cores(x.CPU.Redis), x.CPU.cores(x.CPU.Wrk), x.CPU.OtherCores())
	}
	w("\n")
	w("CPU columns are cores averaged over the measured window (from /proc): the server process, PostgreSQL's postmaster " +
		"and its children, Redis, and wrk or the Go clients (the test process); the bare handler's server is the test " +
		"process. n/a: not measured (no Redis in the run).\n\n")
	writeCheckTable(w, r.Checks)
	w("\n")
	var noisy []string
	for _, x := range r.Runs {
		if x.CPU.OtherCores() > gwNoisyCores {
			noisy = append(noisy, fmt.Sprintf("%s (%.2f cores)", x.Name, x.CPU.OtherCores()))
		}
	}
	if len(noisy) > 0 {
		w("**Caution:** the machine was shared while this ran: other processes used more than %.2f cores during %s. "+
			"Absolute figures understate what the machine can do; the ratios to the same run's baseline are the figures "+
			"to compare.\n\n", gwNoisyCores, strings.Join(noisy, ", "))
	}
	writeMissed(w, r.Failures)
	w("Reproduce with `go test -tags bench -run '^%s$' -v ./bench/` (`BENCH_DURATION`, `BENCH_WARMUP` set the windows).\n", r.Test)
	return b.String()
}

func (r *rtReport) finish(t *testing.T, section string, base *rtRun) {
	table := r.markdown(base)
	fmt.Println()
	fmt.Println(table)
	for _, f := range r.Failures {
		t.Errorf("target missed: %s", f)
	}
	if err := updateSection(resultsFile, section, table); err != nil {
		t.Errorf("write %s: %v", resultsFile, err)
	}
}

// newMeasurer prepares wrk and the CPU sampling of a realistic scenario.
func newMeasurer(t *testing.T, p loadParams, mon *monitor, redisURL string) *rtMeasurer {
	m := &rtMeasurer{t: t, p: p, wrkBin: findWrk(t), threads: max(1, min(p.Clients, 2)), pg: mon.postmaster}
	if redisURL != "" {
		m.redis = findRedisPID(redisURL)
	}
	return m
}

func realisticParams(t *testing.T) loadParams {
	p, err := defaultParams()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestManyTenantsColdReads is scenario 1: 1,000 tenants with a key each,
// 100,000 accounts read uniformly (mostly cold: entity cache entries live 5 s)
// through a manifest get route limited to 600 rpm per tenant (every
// request one exact GCRA decision in Redis), against a bare fiber handler.
func TestManyTenantsColdReads(t *testing.T) {
	p := realisticParams(t)
	dbURL := testutil.PostgresDurable(t)
	redisURL := testutil.Redis(t)
	tmp := t.TempDir()
	env, err := collectEnv(t.Context(), dbURL, tmp)
	if err != nil {
		t.Fatal(err)
	}
	tenants := make([]string, mtTenants)
	for i := range tenants {
		tenants[i] = mtTenant(i)
	}
	keys := seedData(t, dbURL, filepath.Join(tmp, "seed"), tenants, mtEntities)
	keysFile := filepath.Join(tmp, "keys.txt")
	writeLines(t, keysFile, keys)
	script := readScript(t, tmp, keysFile, mtEntities)

	bin := buildFactline(t, tmp)
	manifestPath := filepath.Join(tmp, "gateway.yaml")
	if err := os.WriteFile(manifestPath, []byte(getManifest(mtRPM)), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startFactlineProcess(t, bin, tmp, append([]string{"serve", "--database-url", dbURL, "--redis-url", redisURL,
		"--manifest", manifestPath, "--data-dir", filepath.Join(tmp, "data"), "--addr", "127.0.0.1:0", "--ratelimit-fail-open=false"},
		profileArgs()...))
	code, body, h := getOnce(t, srv.base+"/v1/accounts/"+mtEntityID(1), keys[1])
	if code != http.StatusOK || h.Get("RateLimit-Limit") != fmt.Sprint(mtRPM) {
		t.Fatalf("probe: status %d, RateLimit-Limit %q: %s", code, h.Get("RateLimit-Limit"), body)
	}
	bare := startBareFiber(t, body, h.Get("Content-Type"))

	mon := newMonitor(t.Context(), openPool(t, dbURL, 1, "factline-bench-realistic-monitor"))
	m := newMeasurer(t, p, mon, redisURL)
	m.profileTarget(tmp, "Factline, 1,000 tenants, 100,000 accounts")
	rBare := m.wrk("bare fiber handler", bare, script, os.Getpid(), nil)
	rProd := m.wrk("Factline, 1,000 tenants, 100,000 accounts", srv.base, script, srv.cmd.Process.Pid, func() { resetLimits(t, redisURL) })

	window := (p.Warmup + p.Duration).Seconds()
	perTenant := float64(rProd.W.Requests) / mtTenants * window / p.Duration.Seconds()
	rep := &rtReport{Title: "Many tenants, cold entities (Postgres + Redis; wrk)", Test: "TestManyTenantsColdReads", Env: env, Params: p,
		Runs: []*rtRun{rBare, rProd}}
	rep.Setup = []string{
		fmt.Sprintf("Server: the `factline` binary of this tree as its own process: `factline serve --database-url … --redis-url … "+
			"--manifest gateway.yaml --ratelimit-fail-open=false`, default log level; %s The manifest has one route:\n\n```yaml\n%s```",
			storePoolNote(env), getManifest(mtRPM)),
		fmt.Sprintf("Data: %s tenants with one live API key each (`auth.CreateKey`), %s accounts, account `acct-NNNNNN` "+
			"belonging to tenant NNNNNN mod 1,000 (100 per tenant), created through internal/host/app before the server starts. "+
			"wrk's Lua script picks an account uniformly for every request and sends its tenant's key: the entity cache "+
			"(100,000 entries) could hold every account, but an entry lives at most 5 s, and at a few thousand reads/s "+
			"a uniform read rarely comes back to an account within that, so most reads miss; the key cache holds all 1,000 keys.", formatInt(mtTenants), formatInt(mtEntities)),
		fmt.Sprintf("Limit: %d rpm per tenant is below the lease threshold (2,000 rpm), so every request is one GCRA script "+
			"call in Redis. The limiter's keys are deleted before the warm-up; a tenant then may pass its burst (%d) plus "+
			"%d per second: over the %.0f s of warm-up and window, the run sent on average %.0f requests per tenant, "+
			"well below %d, so no request is refused by the limit unless the limiter is wrong (the non-2xx check).",
			mtRPM, mtRPM, mtRPM/60, window, perTenant, mtRPM+int(window)*mtRPM/60),
		"Baseline: a bare fiber v2 handler on the same path returning the body captured from the route, loaded by the same wrk command and script.",
	}
	ratio := rProd.rate() / max(rBare.rate(), 1e-9)
	rep.check(fmt.Sprintf("≥ %.0f%% of the bare fiber handler", 100*mtTargetRatio),
		fmt.Sprintf("%.1f%% (%s of %s requests/s)", 100*ratio, formatInt(int64(rProd.rate())), formatInt(int64(rBare.rate()))), ratio >= mtTargetRatio)
	rep.check("p99 < "+fmtLatency(mtTargetP99), "p99 "+fmtLatency(rProd.W.P99), rProd.W.P99 < mtTargetP99)
	rep.check("zero non-2xx responses and socket errors", rProd.failed(), rProd.W.Non2xx == 0 && rProd.W.SocketErrors() == 0)
	if rBare.W.Non2xx > 0 || rBare.W.SocketErrors() > 0 {
		rep.Failures = append(rep.Failures, "bare fiber handler: "+rBare.failed())
	}
	if rProd.W.Non2xx > 0 {
		t.Logf("factline log, requests not answered 200:\n%s", not200Lines(srv.logPath, 20))
	}
	rep.finish(t, "many-tenants", rBare)
}

// TestPluginWrites is scenario 2: POST /v1/entities/:id/deposit (the
// account ledger: decide in WebAssembly, append, snapshot) over 1,000
// accounts next to raw POST /v1/facts deposits on the same accounts.
func TestPluginWrites(t *testing.T) {
	p := realisticParams(t)
	dbURL := testutil.PostgresDurable(t)
	tmp := t.TempDir()
	env, err := collectEnv(t.Context(), dbURL, tmp)
	if err != nil {
		t.Fatal(err)
	}
	keys := seedData(t, dbURL, filepath.Join(tmp, "seed"), []string{benchTenant}, manyEntities)
	bin := buildFactline(t, tmp)
	pluginsDir := filepath.Join(tmp, "plugins")
	buildAccountPlugin(t, pluginsDir)
	domain, _ := filepath.Abs(domainFile)
	srv := startFactlineProcess(t, bin, tmp, append([]string{"serve", "--database-url", dbURL, "--domain", domain,
		"--plugins-dir", pluginsDir, "--plugin-cache-dir", filepath.Join(tmp, "wasm-cache"),
		"--data-dir", filepath.Join(tmp, "data"), "--addr", "127.0.0.1:0"}, profileArgs()...))

	waitDeposit(t, srv.base+"/v1/entities/"+mtEntityID(0)+"/deposit", keys[0])
	mon := newMonitor(t.Context(), openPool(t, dbURL, 1, "factline-bench-realistic-monitor"))
	m := newMeasurer(t, p, mon, "")
	m.profileTarget(tmp, "POST /v1/entities/:id/deposit")
	pick := func(worker, iter int) string { return mtEntityID((iter*p.Clients + worker) % manyEntities) }
	factsURL := srv.base + "/v1/facts"
	deposit := []byte(`{"amount":1.25}`)
	rRaw := m.post("raw POST /v1/facts", keys[0], srv.cmd.Process.Pid, func(w, i int) (string, []byte) {
		return factsURL, []byte(`{"entity_id":"` + pick(w, i) + `","type":"deposit","data":{"amount":1.25}}`)
	})
	rDep := m.post("POST /v1/entities/:id/deposit", keys[0], srv.cmd.Process.Pid, func(w, i int) (string, []byte) {
		return srv.base + "/v1/entities/" + pick(w, i) + "/deposit", deposit
	})

	rep := &rtReport{Title: "Writes through a plugin (account ledger; Postgres)", Test: "TestPluginWrites", Env: env, Params: p,
		Runs: []*rtRun{rRaw, rDep}}
	rep.Setup = []string{
		"Server: the `factline` binary of this tree as its own process: `factline serve --database-url … --domain " +
			"manifests/domain.yaml --plugins-dir …` with the account ledger plugin (`plugins/account`, built with " +
			"`GOOS=wasip1 -buildmode=c-shared`) and no Redis, default log level; " + storePoolNote(env),
		fmt.Sprintf("Data: %s accounts of one tenant; every client sends one request at a time, clients on distinct "+
			"accounts in any round; the runs start once the plugin answers. Deposit: `POST /v1/entities/acct-NNNNNN/deposit` with `{\"amount\":1.25}` (the plugin "+
			"reads the snapshot and facts since, decides, the fact and the new snapshot are written). Baseline: raw "+
			"`POST /v1/facts` of the same deposit fact on the same accounts, in the same process, run first.", formatInt(manyEntities)),
	}
	ratio := rDep.rate() / max(rRaw.rate(), 1e-9)
	rep.check(fmt.Sprintf("≥ %s deposits/s", formatInt(int64(pwTargetRate))), formatInt(int64(rDep.rate()))+" deposits/s", rDep.rate() >= pwTargetRate)
	rep.check(fmt.Sprintf("≥ %.0f%% of raw appends", 100*pwTargetRatio),
		fmt.Sprintf("%.1f%% (%s of %s/s)", 100*ratio, formatInt(int64(rDep.rate())), formatInt(int64(rRaw.rate()))), ratio >= pwTargetRatio)
	rep.check("p99 < "+fmtLatency(pwTargetP99), "p99 "+fmtLatency(rDep.p(0.99)), rDep.p(0.99) < pwTargetP99)
	rep.check("no 504, every deposit answered 201", rDep.failed(), rDep.Status[http.StatusGatewayTimeout] == 0 && rDep.L.Errors == 0)
	if rRaw.L.Errors > 0 {
		rep.Failures = append(rep.Failures, "raw appends: "+rRaw.failed())
	}
	rep.finish(t, "plugin-writes", rRaw)
}

// cores is d as cores averaged over the window, "n/a" when unknown.
func (c gwCPU) cores(d time.Duration) string {
	if d < 0 || c.Wall <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", d.Seconds()/c.Wall.Seconds())
}

// not200Lines is up to n request log lines of path with a status other
// than 200, and any log line above INFO.
func not200Lines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if len(out) == n {
			break
		}
		if (strings.Contains(line, `"msg":"request"`) && !strings.Contains(line, `"status":200,`)) ||
			strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "\n")
}

// storePoolNote says how large the server's store pool is.
func storePoolNote(env *benchEnv) string {
	return fmt.Sprintf("its store pool has its default size, %d connections (`--database-max-conns` 0: 16 per GOMAXPROCS "+
		"%d, at most a quarter of the server's max_connections %s less superuser_reserved_connections %s).",
		env.StorePool(), runtime.GOMAXPROCS(0), env.Setting("max_connections"), env.Setting("superuser_reserved_connections"))
}

// waitDeposit posts a deposit until it is recorded (201): /health
// answers before the plugins are loaded, and the account type's command
// routes answer 404 or 503 until they are.
func waitDeposit(t *testing.T, url, key string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{"amount":1.25}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", url, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			return
		}
		loading := resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusNotFound
		if !loading || time.Now().After(deadline) {
			t.Fatalf("POST %s: status %d: %s", url, resp.StatusCode, b)
		}
		time.Sleep(100 * time.Millisecond) // poll interval; the deadline is above
	}
}

// TestEmbeddedDefault is scenario 3: the read and the write scenario on
// the embedded SQLite store (`factline serve` with no database URL) next
// to the same process on PostgreSQL.
func TestEmbeddedDefault(t *testing.T) {
	p := realisticParams(t)
	dbURL := testutil.PostgresDurable(t)
	tmp := t.TempDir()
	env, err := collectEnv(t.Context(), dbURL, tmp)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildFactline(t, tmp)
	manifestPath := filepath.Join(tmp, "gateway.yaml")
	if err := os.WriteFile(manifestPath, []byte(getManifest(0)), 0o644); err != nil {
		t.Fatal(err)
	}
	domain, _ := filepath.Abs(domainFile)
	tenants := []string{benchTenant}
	type side struct {
		name   string
		srv    *factlineProcess
		keys   []string
		script string
	}
	var sides []*side
	for _, store := range []string{"PostgreSQL", "SQLite"} {
		dir := filepath.Join(tmp, store)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		url := ""
		if store == "PostgreSQL" {
			url = dbURL
		}
		keys := seedData(t, url, filepath.Join(dir, "data"), tenants, manyEntities)
		keysFile := filepath.Join(dir, "keys.txt")
		writeLines(t, keysFile, keys)
		args := []string{"serve", "--domain", domain, "--manifest", manifestPath, "--data-dir", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0"}
		if url != "" {
			args = append(args, "--database-url", url)
		}
		sides = append(sides, &side{name: store, srv: startFactlineProcess(t, bin, dir, args), keys: keys,
			script: readScript(t, dir, keysFile, manyEntities)})
	}
	mon := newMonitor(t.Context(), openPool(t, dbURL, 1, "factline-bench-realistic-monitor"))
	m := newMeasurer(t, p, mon, "")
	pick := func(worker, iter int) string { return mtEntityID((iter*p.Clients + worker) % manyEntities) }
	var reads, writes []*rtRun
	for _, s := range sides {
		reads = append(reads, m.wrk("reads, "+s.name, s.srv.base, s.script, s.srv.cmd.Process.Pid, nil))
	}
	for _, s := range sides {
		factsURL := s.srv.base + "/v1/facts"
		writes = append(writes, m.post("appends, "+s.name, s.keys[0], s.srv.cmd.Process.Pid, func(w, i int) (string, []byte) {
			return factsURL, []byte(`{"entity_id":"` + pick(w, i) + `","type":"deposit","data":{"amount":1.25}}`)
		}))
	}
	rep := &rtReport{Title: "The embedded default (SQLite next to PostgreSQL)", Test: "TestEmbeddedDefault", Env: env, Params: p,
		Runs: []*rtRun{reads[0], reads[1], writes[0], writes[1]}}
	rep.Setup = []string{
		"Servers: the `factline` binary of this tree, twice, as its own processes: `factline serve --data-dir … --domain " +
			"manifests/domain.yaml --manifest gateway.yaml` (no database URL: the embedded SQLite file, as `make run` " +
			"starts), and the same with `--database-url` on a durable PostgreSQL. Neither has Redis (the in-process " +
			"limiter; the route has no limit), default log level. The manifest's one route:\n\n```yaml\n" + getManifest(0) + "```",
		fmt.Sprintf("Data: %s accounts of one tenant on each store. Reads: wrk with a Lua script picking an account "+
			"uniformly per request (all of them fit the entity cache of either store; SQLite's is fed by a 50 ms poll of the file). Appends: raw "+
			"`POST /v1/facts` deposits, one request at a time per Go client, clients on distinct accounts in any round. "+
			"Ratios in the table are to the PostgreSQL reads; the targets compare SQLite reads with PostgreSQL reads.",
			formatInt(manyEntities)),
	}
	ratio := reads[1].rate() / max(reads[0].rate(), 1e-9)
	rep.check(fmt.Sprintf("SQLite appends ≥ %s/s", formatInt(int64(edTargetAppends))), formatInt(int64(writes[1].rate()))+"/s",
		writes[1].rate() >= edTargetAppends)
	rep.check(fmt.Sprintf("SQLite reads ≥ %.0f%% of PostgreSQL reads", 100*edTargetReadRatio),
		fmt.Sprintf("%.1f%% (%s of %s requests/s)", 100*ratio, formatInt(int64(reads[1].rate())), formatInt(int64(reads[0].rate()))),
		ratio >= edTargetReadRatio)
	for _, r := range append(reads, writes...) {
		ok := (r.W != nil && r.W.Non2xx == 0 && r.W.SocketErrors() == 0) || (r.L != nil && r.L.Errors == 0)
		if !ok {
			rep.Failures = append(rep.Failures, r.Name+": "+r.failed())
		}
	}
	rep.finish(t, "embedded", reads[0])
}
