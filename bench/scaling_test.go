//go:build bench

package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil"
)

// scaleProcesses are the gateway process counts measured.
var scaleProcesses = []int{1, 2, 4}

// scaleAccounts is how many accounts the appends spread over (one per
// client connection, so clients never queue on one entity's row).
const scaleAccounts = 64

// scalePoint is one measured (path, process count) pair.
type scalePoint struct {
	Path      string
	Procs     int
	R         *loadResult
	Facts     int64 // facts appended over the whole run (warm-up included)
	Commits   int64 // transactions that committed them
	RunWindow time.Duration
}

// TestScaling measures fact appends through HTTP (POST /v1/facts, one
// Postgres) and the read path (an authenticated, rate-limited GET of an
// entity, one Redis) with 1, 2 and 4 factline processes, the real binary,
// on loopback. 64 client connections are spread round-robin over the
// processes; each point runs for the warm-up plus the measured window.
func TestScaling(t *testing.T) {
	p, err := defaultParams()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	dbURL := testutil.PostgresDurable(t)
	redisURL := testutil.Redis(t)
	tmp := t.TempDir()
	env, err := collectEnv(ctx, dbURL, tmp)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildFactline(t, tmp)
	manifestPath := filepath.Join(tmp, "gateway.yaml")
	if err := os.WriteFile(manifestPath, []byte(gwManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	key := createKeyCLI(t, bin, dbURL)
	db := openPool(t, dbURL, 2, "factline-bench-scaling-monitor")
	head := func() int64 {
		var h int64
		if err := db.QueryRow(ctx, `SELECT coalesce(max(position), 0) FROM facts`).Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}

	tr := &http.Transport{MaxIdleConnsPerHost: p.Clients, MaxConnsPerHost: p.Clients, MaxIdleConns: 4 * p.Clients, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	do := func(ctx context.Context, method, url, body string, want int) error {
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("X-API-Key", key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
		}
		return nil
	}

	var points []scalePoint
	for _, n := range scaleProcesses {
		var bases []string
		var procs []*factlineProcess
		for i := range n {
			dir := filepath.Join(tmp, fmt.Sprintf("p%d-%d", n, i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			fp := startFactlineProcess(t, bin, dir, []string{"serve", "--database-url", dbURL, "--redis-url", redisURL,
				"--manifest", manifestPath, "--addr", "127.0.0.1:0", "--ratelimit-fail-open=false"})
			procs = append(procs, fp)
			bases = append(bases, fp.base)
		}
		if n == 1 {
			createAccountHTTP(t, bases[0], key)
			for a := range scaleAccounts {
				body := fmt.Sprintf(`{"type":"account","id":"acct-scale-%d","name":"Scale","status":"active","subtype":"customer"}`, a)
				if err := do(ctx, "POST", bases[0]+"/v1/entities", body, http.StatusCreated); err != nil {
					t.Fatal(err)
				}
			}
		}
		appendOp := func(ctx context.Context, w, _ int) error {
			body := `{"entity_id":"acct-scale-` + strconv.Itoa(w%scaleAccounts) + `","type":"deposit","data":{"amount":1.25}}`
			return do(ctx, "POST", bases[w%n]+"/v1/facts", body, http.StatusCreated)
		}
		readOp := func(ctx context.Context, w, _ int) error {
			return do(ctx, "GET", bases[w%n]+"/v1/accounts/"+gwEntity, "", http.StatusOK)
		}
		waitQuiet(ctx, p.QuietWait)
		h0, t0 := head(), time.Now()
		ra, err := runLoad(ctx, fmt.Sprintf("appends, %d processes", n), p, appendOp, nil, target{}, "")
		if err != nil {
			t.Fatal(err)
		}
		h1, run := head(), time.Since(t0)
		pt := scalePoint{Path: "append", Procs: n, R: ra, Facts: h1 - h0, RunWindow: run}
		if err := db.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM facts WHERE position > $1 AND position <= $2`, h0, h1).Scan(&pt.Commits); err != nil {
			t.Fatal(err)
		}
		points = append(points, pt)
		t.Logf("appends, %d processes: %.0f facts/s, p50 %v, p99 %v, errors %d %v, %.1f facts per commit",
			n, ra.Rate(), ra.Pct(0.5), ra.Pct(0.99), ra.Errors, ra.FirstErrs, float64(pt.Facts)/float64(max(pt.Commits, 1)))

		resetLimits(t, redisURL)
		waitQuiet(ctx, p.QuietWait)
		rr, err := runLoad(ctx, fmt.Sprintf("reads, %d processes", n), p, readOp, nil, target{}, "")
		if err != nil {
			t.Fatal(err)
		}
		points = append(points, scalePoint{Path: "read", Procs: n, R: rr})
		t.Logf("reads, %d processes: %.0f requests/s, p50 %v, p99 %v, errors %d %v", n, rr.Rate(), rr.Pct(0.5), rr.Pct(0.99), rr.Errors, rr.FirstErrs)
		for _, fp := range procs { // the cleanup waits for them to exit
			_ = fp.cmd.Process.Signal(syscall.SIGTERM)
		}
		tr.CloseIdleConnections()
	}

	table := scalingMarkdown(env, p, redisVersion(ctx, redisURL), points)
	fmt.Println()
	fmt.Println(table)
	for _, pt := range points {
		if pt.R.Errors > 0 {
			t.Errorf("%s, %d processes: %d failed requests: %v", pt.Path, pt.Procs, pt.R.Errors, pt.R.FirstErrs)
		}
	}
	if err := updateSection(resultsFile, "scaling", table); err != nil {
		t.Errorf("write %s: %v", resultsFile, err)
	}
}

func scalingMarkdown(env *benchEnv, p loadParams, redisV string, points []scalePoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Scaling: 1, 2 and 4 gateway processes on one Postgres and one Redis\n\n")
	fmt.Fprintf(&b, "Written by `TestScaling` (`bash bench/run.sh -run TestScaling`) on %s.\n\n", env.Date.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "| Machine | |\n|---|---|\n")
	fmt.Fprintf(&b, "| Kernel | `%s` |\n", env.Uname)
	fmt.Fprintf(&b, "| CPU | %s, %d cores (each process at the default GOMAXPROCS %d) |\n", env.CPUModel, env.Cores, runtime.NumCPU())
	fmt.Fprintf(&b, "| Memory | %s |\n", fmtMem(env.MemTotal))
	fmt.Fprintf(&b, "| Go | %s |\n", env.GoVersion)
	fmt.Fprintf(&b, "| PostgreSQL | %s, a local throwaway server (testutil.PostgresDurable) on 127.0.0.1: fsync=%s, synchronous_commit=%s |\n",
		env.PGVersion, env.Setting("fsync"), env.Setting("synchronous_commit"))
	fmt.Fprintf(&b, "| Redis | %s on 127.0.0.1 |\n\n", redisV)
	fmt.Fprintf(&b, "Load: %d keep-alive HTTP/1.1 connections from one Go process (one `net/http` Transport, %d goroutines each sending one request at a time), "+
		"spread round-robin over the processes; each point runs %v of warm-up then %v measured, and stops by itself. "+
		"Every process is the `factline` binary started with `serve --database-url … --redis-url … --manifest gateway.yaml` on 127.0.0.1:0. "+
		"Appends: `POST /v1/facts` `{\"entity_id\":\"acct-scale-N\",\"type\":\"deposit\",\"data\":{\"amount\":1.25}}`, client N on account N of %d. "+
		"Reads: `GET /v1/accounts/%s` (API key, Redis GCRA limit of %d per minute, entity from Postgres), the gateway benchmark's route. "+
		"Ratios are to the 1-process figure of the same path in this run.\n\n",
		p.Clients, p.Clients, p.Warmup, p.Duration, scaleAccounts, gwEntity, gwRPM)
	fmt.Fprintf(&b, "**The machine has %d cores.** The processes, PostgreSQL, Redis and the load generator share them, so 2 and 4 processes measure contention for the same cores, not scale-out. "+
		"The run was made once, on a shared machine that other builds and tests were loading at the same time: read the ratios, not the absolute figures.\n\n", env.Cores)
	fmt.Fprintf(&b, "| Path | Processes | requests/s | vs 1 process | p50 | p99 | failed | facts per commit | append commits/s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	base := map[string]float64{}
	for _, pt := range points {
		if pt.Procs == 1 {
			base[pt.Path] = pt.R.Rate()
		}
	}
	for _, pt := range points {
		ratio := "—"
		if base[pt.Path] > 0 {
			ratio = fmt.Sprintf("%.2f×", pt.R.Rate()/base[pt.Path])
		}
		fpc, cps := "—", "—"
		if pt.Path == "append" && pt.Commits > 0 {
			fpc = fmt.Sprintf("%.1f", float64(pt.Facts)/float64(pt.Commits))
			cps = fmt.Sprintf("%.0f", float64(pt.Commits)/pt.RunWindow.Seconds())
		}
		name := "`POST /v1/facts`"
		if pt.Path == "read" {
			name = "`GET /v1/accounts/:id`"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %d | %s | %s |\n", name, pt.Procs, formatInt(int64(pt.R.Rate()+0.5)), ratio,
			fmtLatency(pt.R.Pct(0.5)), fmtLatency(pt.R.Pct(0.99)), pt.R.Errors, fpc, cps)
	}
	fmt.Fprintf(&b, "\n\"facts per commit\" is the facts of the whole point (warm-up included) over the distinct transactions (`xmin`) that committed them; "+
		"\"append commits/s\" divides those transactions by the point's wall time. Every append commit holds the `fact_head` row lock until it commits: "+
		"see [docs/scaling.md](../docs/scaling.md) for the ceiling this implies.\n\n")
	fmt.Fprintf(&b, "Reproduce with `bash bench/run.sh -run TestScaling` (`BENCH_DURATION`, `BENCH_WARMUP` set the windows; `BENCH_QUIET_WAIT=0` skips the wait for an idle machine).\n")
	return b.String()
}
