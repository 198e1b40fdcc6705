//go:build bench

package bench

import (
	"fmt"
	"strings"
	"time"
)

// gwNoisyCores is the load of other work, measured while the servers idle,
// above which the report calls the machine busy.
const gwNoisyCores = 0.15

// gwRun is one measured wrk run.
type gwRun struct {
	Name string
	Cmd  string // the wrk command line, key redacted
	W    *wrkResult
	CPU  gwCPU
	// IdleBusy is how many cores other work kept busy over the two
	// seconds before the run, while the servers idled (-1 unknown), and
	// QuietWaited how long the run waited for the machine to settle.
	IdleBusy    float64
	QuietWaited time.Duration
	// Attempts counts the runs made (disturbed runs are repeated).
	Attempts int
}

// gwReport is the outcome of TestGatewayThroughput.
type gwReport struct {
	Env          *benchEnv
	Params       loadParams
	Threads      int
	WrkVersion   string
	RedisVersion string

	Probe          *routeProbe
	RemainingAfter string
	Bare, Product  *gwRun

	Checks   []gwCheck
	Failures []string
}

// gwCheck is one target with its measured value.
type gwCheck struct {
	Target, Measured string
	OK               bool
}

func (r *gwReport) ratio() float64 {
	if r.Bare.W.RPS == 0 {
		return 0
	}
	return r.Product.W.RPS / r.Bare.W.RPS
}

// evaluate compares the figures with the targets.
func (r *gwReport) evaluate() {
	pw, bw := r.Product.W, r.Bare.W
	add := func(target, measured string, ok bool) {
		r.Checks = append(r.Checks, gwCheck{Target: target, Measured: measured, OK: ok})
		if !ok {
			r.Failures = append(r.Failures, target+": measured "+measured)
		}
	}
	add(fmt.Sprintf("≥ %s requests/s", formatInt(int64(gwTargetRPS))), formatInt(int64(pw.RPS+0.5))+" requests/s", pw.RPS >= gwTargetRPS)
	add(fmt.Sprintf("≥ %.0f%% of the bare fiber handler", 100*gwTargetRatio),
		fmt.Sprintf("%.1f%% (%s of %s requests/s)", 100*r.ratio(), formatInt(int64(pw.RPS+0.5)), formatInt(int64(bw.RPS+0.5))),
		r.ratio() >= gwTargetRatio)
	add("p99 < "+fmtLatency(gwTargetP99), "p99 "+fmtLatency(pw.P99), pw.P99 < gwTargetP99)
	add("zero non-2xx responses (wrk)", fmt.Sprintf("%s non-2xx of %s requests", formatInt(pw.Non2xx), formatInt(pw.Requests)), pw.Non2xx == 0)
	add("zero socket errors (wrk)", fmt.Sprintf("connect %d, read %d, write %d, timeout %d", pw.SockConnect, pw.SockRead, pw.SockWrite, pw.SockTimeout),
		pw.SocketErrors() == 0)
	add("RateLimit-Remaining present on the route",
		fmt.Sprintf("`RateLimit-Limit: %s`, `RateLimit-Remaining: %s` before the run, `%s` after it", r.Probe.Limit, r.Probe.Remaining, r.RemainingAfter),
		r.Probe.Remaining != "" && r.RemainingAfter != "")
	// The baseline must be sound, or the ratio means nothing.
	if bw.Non2xx > 0 || bw.SocketErrors() > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("bare fiber handler: %d non-2xx responses, %d socket errors", bw.Non2xx, bw.SocketErrors()))
	}
}

// markdown renders the report as the RESULTS.md section (without the
// markers).
func (r *gwReport) markdown() string {
	var b strings.Builder
	e, p := r.Env, r.Params
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	w("## Gateway throughput (authenticated, rate-limited GET; Postgres + Redis; wrk)\n\n")
	w("Written by `TestGatewayThroughput` (`bash bench/run.sh`) on %s.\n\n", e.Date.Format("2006-01-02 15:04 MST"))
	w("%s", e.machineRows())
	w("| PostgreSQL | %s, a local throwaway server (testutil.PostgresDurable) on 127.0.0.1, fsync=%s, synchronous_commit=%s, shared_buffers=%s |\n",
		e.PGVersion, e.Setting("fsync"), e.Setting("synchronous_commit"), e.Setting("shared_buffers"))
	w("| Redis | %s, a local throwaway server (testutil.Redis) on 127.0.0.1 |\n", r.RedisVersion)
	w("| Load generator | %s, on the same machine, over loopback |\n", r.WrkVersion)
	w("\n")

	w("Server: the `factline` binary built from this tree (`go build -trimpath ./cmd/factline`) and run as its own " +
		"process, as in production: `factline serve --database-url … --redis-url … --manifest gateway.yaml " +
		"--addr 127.0.0.1:0 --ratelimit-fail-open=false`, default log level (one JSON line per request on stderr, " +
		"which factline writes in batches, here to a file). The manifest has one route:\n\n")
	w("```yaml\n%s```\n\n", gwManifest)
	w("`rpm` is %s, the most the manifest accepts; its burst of as many requests is never used up by a run (the "+
		"limiter's Redis keys are deleted before each Factline attempt), so the limit is evaluated on every request "+
		"and refuses none: GCRA in Redis, where at this limit one script call leases up to 64 admissions of the hot "+
		"key to the process (docs/decisions.md). Failing closed turns any Redis failure into a 503, which the non-2xx "+
		"check below would count. The API key comes from `factline keys create --tenant %s --mode live`, the account "+
		"from `POST /v1/entities`; every request is `GET /v1/accounts/%s` with `X-API-Key`: key check (cached in the "+
		"process after the first request), the Redis limit, the entity read (PostgreSQL, through the process's entity "+
		"cache, which PostgreSQL change notifications keep current), the `{data, meta}` envelope (%d bytes).\n\n",
		formatInt(gwRPM), benchTenant, gwEntity, len(r.Probe.Body))
	w("Baseline: a fiber v2 app with nothing but one handler on the same path that returns the body captured from " +
		"the route (same bytes, same `Content-Type`), served from the Go test process on its own loopback port.\n\n")
	w("Load: the same wrk command for both, %d threads and %d keep-alive connections; a %s warm-up run whose "+
		"figures are discarded, then the measured run of %s. Latencies are wrk's `--latency` percentiles. wrk, "+
		"the server, PostgreSQL and Redis share the machine's %d cores.\n\n",
		r.Threads, p.Clients, p.Warmup, p.Duration, e.Cores)
	w("```\n%s\n%s\n```\n\n", r.Bare.Cmd, r.Product.Cmd)

	w("| Server | requests/s | p50 | p75 | p90 | p99 | max | requests | non-2xx | socket errors | vs bare |\n")
	w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, x *gwRun, vs string) {
		v := x.W
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, formatInt(int64(v.RPS+0.5)),
			fmtLatency(v.P50), fmtLatency(v.P75), fmtLatency(v.P90), fmtLatency(v.P99), fmtLatency(v.LatMax),
			formatInt(v.Requests), formatInt(v.Non2xx), formatInt(v.SocketErrors()), vs)
	}
	row("bare fiber v2 handler (same bytes)", r.Bare, "100%")
	row("Factline `GET "+gwRoute+"` (auth + Redis limit + Postgres)", r.Product, fmt.Sprintf("%.1f%%", 100*r.ratio()))
	w("\n")

	writeCheckTable(w, r.Checks)
	w("\n")

	w("Where the CPU went during each measured run (from /proc):\n\n")
	w("| Run | server process | PostgreSQL | Redis | wrk | other | machine busy | busy just before | runs |\n")
	w("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	cpu := func(name string, x *gwRun) {
		c := x.CPU
		secs := c.Wall.Seconds()
		if secs <= 0 {
			w("| %s | n/a | n/a | n/a | n/a | n/a | n/a | n/a | %d |\n", name, x.Attempts)
			return
		}
		cores := func(d time.Duration) string {
			if d < 0 {
				return "n/a"
			}
			return fmt.Sprintf("%.2f cores", d.Seconds()/secs)
		}
		busy := 0.0
		if c.HostAll > 0 {
			busy = 100 * float64(c.HostBusy) / float64(c.HostAll)
		}
		idle := "n/a"
		if x.IdleBusy >= 0 {
			idle = fmt.Sprintf("%.2f cores", x.IdleBusy)
		}
		w("| %s | %s | %s | %s | %s | %s | %.0f%% of %d cores | %s | %d |\n", name, cores(c.Server), cores(c.PG), cores(c.Redis),
			cores(c.Wrk), fmt.Sprintf("%.2f cores", c.OtherCores()), busy, e.Cores, idle, x.Attempts)
	}
	cpu("bare fiber handler", r.Bare)
	cpu("Factline", r.Product)
	w("\n")
	w("\"server process\" is the Go test process for the bare handler and the `factline serve` process for Factline; "+
		"\"PostgreSQL\" is the postmaster and its children; \"other\" is the rest of the machine's busy time (kernel "+
		"threads, loopback interrupt work that belongs to no process, anything else running). \"busy just before\" "+
		"is the machine's load over the 2 s before the warm-up, with every server idle; each run first waits up to "+
		"%s for it to drop below 10%%. A run during which other processes used more than %.2f cores is repeated, "+
		"%d times at most, and the least disturbed one is kept (\"runs\").\n\n", p.QuietWait, gwNoisyCores, p.Retries)
	var noisy []string
	for _, x := range []*gwRun{r.Bare, r.Product} {
		if x.CPU.OtherCores() > gwNoisyCores {
			noisy = append(noisy, fmt.Sprintf("%s (%.2f cores)", x.Name, x.CPU.OtherCores()))
		}
	}
	if len(noisy) > 0 {
		w("**Caution:** other processes used more than %.2f cores during %s; the machine was not quiet and "+
			"those figures understate what it can do.\n\n", gwNoisyCores, strings.Join(noisy, ", "))
	}
	writeMissed(w, r.Failures)
	w("Reproduce with `make bench` or `go test -tags bench -run TestGatewayThroughput -v ./bench/` (`BENCH_DURATION`, " +
		"`BENCH_WARMUP` shorten the windows for a trial; `BENCH_GATEWAY_CPUPROFILE=file` additionally serves the route " +
		"from internal/host/app inside the test process and writes a CPU profile of it under the same wrk load).\n")
	return b.String()
}

// writeCheckTable writes a report's targets with PASS or FAIL each.
func writeCheckTable(w func(string, ...any), checks []gwCheck) {
	w("| Target | Measured | Result |\n|---|---|---|\n")
	for _, c := range checks {
		res := "**PASS**"
		if !c.OK {
			res = "**FAIL**"
		}
		w("| %s | %s | %s |\n", c.Target, c.Measured, res)
	}
}

// writeMissed lists a report's missed targets, or says every one was met.
func writeMissed(w func(string, ...any), failures []string) {
	if len(failures) == 0 {
		w("Every target met.\n\n")
		return
	}
	w("Targets missed:\n\n")
	for _, f := range failures {
		w("- %s\n", f)
	}
	w("\n")
}
