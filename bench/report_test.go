//go:build bench

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/factline/factline/internal/host/store/postgres"
)

// benchEnv describes where a benchmark ran.
type benchEnv struct {
	Date       time.Time
	Uname      string
	CPUModel   string
	Cores      int
	GOMAXPROCS int
	MemTotal   string
	GoVersion  string
	PGVersion  string
	settings   [][2]string
	// Disk: latency of an 8 KiB overwrite plus fdatasync, the shape of a
	// WAL flush, in the test's temporary directory.
	FsyncDir      string
	FsyncN        int
	FsyncP50      time.Duration
	FsyncP99      time.Duration
	FsyncProbeErr error
}

// Setting returns a PostgreSQL setting read by collectEnv.
func (e *benchEnv) Setting(name string) string {
	for _, kv := range e.settings {
		if kv[0] == name {
			return kv[1]
		}
	}
	return ""
}

// pgSettings are the server settings worth recording next to the figures.
var pgSettings = []string{"fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "commit_delay",
	"shared_buffers", "max_wal_size", "max_connections", "superuser_reserved_connections"}

// StorePool is the connection pool a Factline process started with the
// default settings opens on this server (postgres.AutoMaxConns).
func (e *benchEnv) StorePool() int32 {
	maxConns, _ := strconv.Atoi(e.Setting("max_connections"))
	reserved, _ := strconv.Atoi(e.Setting("superuser_reserved_connections"))
	return postgres.AutoMaxConns(runtime.GOMAXPROCS(0), maxConns-reserved)
}

func collectEnv(ctx context.Context, dbURL, tmpDir string) (*benchEnv, error) {
	e := &benchEnv{
		Date:       time.Now().UTC(),
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		CPUModel:   procField("/proc/cpuinfo", "model name"),
		MemTotal:   procField("/proc/meminfo", "MemTotal"),
	}
	if out, err := exec.Command("uname", "-a").Output(); err == nil {
		e.Uname = strings.TrimSpace(string(out))
	} else {
		var u syscall.Utsname
		if syscall.Uname(&u) == nil {
			e.Uname = utsString(u.Sysname[:]) + " " + utsString(u.Nodename[:]) + " " + utsString(u.Release[:]) + " " +
				utsString(u.Version[:]) + " " + utsString(u.Machine[:])
		}
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connect to read server settings: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, `SHOW server_version`).Scan(&e.PGVersion); err != nil {
		return nil, fmt.Errorf("read server version: %w", err)
	}
	for _, name := range pgSettings {
		var v string
		if err := conn.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v); err != nil {
			return nil, fmt.Errorf("read setting %s: %w", name, err)
		}
		e.settings = append(e.settings, [2]string{name, v})
	}
	e.FsyncDir = tmpDir
	e.FsyncN, e.FsyncP50, e.FsyncP99, e.FsyncProbeErr = fsyncProbe(tmpDir)
	return e, nil
}

func utsString(b []int8) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// procField returns the value of the first "key : value" line of a /proc
// file with that key, or "unknown".
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// fsyncProbe times 8 KiB overwrites of a preallocated file, each followed
// by fdatasync, for at most 200 rounds or two seconds.
func fsyncProbe(dir string) (n int, p50, p99 time.Duration, err error) {
	f, err := os.Create(filepath.Join(dir, "fsync-probe"))
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	const block, blocks = 8 << 10, 64
	buf := make([]byte, block)
	if _, err := f.Write(make([]byte, block*blocks)); err != nil {
		return 0, 0, 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, 0, 0, err
	}
	var lat []time.Duration
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; i < 200 && time.Now().Before(deadline); i++ {
		buf[0] = byte(i)
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i%blocks)*block); err != nil {
			return 0, 0, 0, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, 0, 0, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	r := loadResult{Lat: lat}
	return len(lat), r.Pct(0.50), r.Pct(0.99), nil
}

// appendReport is the outcome of TestFactAppends.
type appendReport struct {
	Env    *benchEnv
	Params loadParams

	ManyBase, ManyHTTP *loadResult
	HotBase, HotHTTP   *loadResult

	ProductCheck, BaselineCheck *ledgerCheck

	ManyVerdict, HotVerdict string
	Failures                []string
}

// evaluate compares the figures with the targets.
func (r *appendReport) evaluate() {
	var many, hot []string
	ratio := r.ratio(r.ManyHTTP, r.ManyBase)
	if rate := r.ManyHTTP.Rate(); rate < targetManyRate {
		many = append(many, fmt.Sprintf("%s facts/s < %s", formatInt(int64(rate+0.5)), formatInt(int64(targetManyRate))))
	}
	if ratio < targetManyRatio {
		many = append(many, fmt.Sprintf("%.0f%% of the raw baseline < %.0f%%", 100*ratio, 100*targetManyRatio))
	}
	if p99 := r.ManyHTTP.Pct(0.99); p99 >= targetManyP99 {
		many = append(many, fmt.Sprintf("p99 %s >= %s", fmtLatency(p99), fmtLatency(targetManyP99)))
	}
	if r.ManyHTTP.AllErrors > 0 {
		many = append(many, fmt.Sprintf("%d failed requests", r.ManyHTTP.AllErrors))
	}
	if rate := r.HotHTTP.Rate(); rate < targetHotRate {
		hot = append(hot, fmt.Sprintf("%s facts/s < %s", formatInt(int64(rate+0.5)), formatInt(int64(targetHotRate))))
	}
	if !r.ProductCheck.OK() {
		hot = append(hot, "ledger check failed (seq or positions not gap-free)")
	}
	if r.HotHTTP.AllErrors > 0 {
		hot = append(hot, fmt.Sprintf("%d failed requests", r.HotHTTP.AllErrors))
	}
	r.ManyVerdict, r.HotVerdict = verdict(many), verdict(hot)
	for _, m := range many {
		r.Failures = append(r.Failures, "(a) many entities: "+m)
	}
	for _, h := range hot {
		r.Failures = append(r.Failures, "(b) one hot entity: "+h)
	}
	// The baseline must itself be sound, or the ratio means nothing.
	for _, b := range []*loadResult{r.ManyBase, r.HotBase} {
		if b.AllErrors > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%s: %d failed appends", b.Name, b.AllErrors))
		}
	}
	if !r.BaselineCheck.OK() {
		r.Failures = append(r.Failures, "raw baseline: ledger check failed")
	}
}

// otherCPU is the busy time of processes other than the bench process and
// the PostgreSQL server.
func (d serverDelta) otherCPU() time.Duration { return d.HostBusy - d.SelfCPU - d.PGCPU - d.IRQSteal }

// otherCores is otherCPU averaged over the window, in cores.
func (d serverDelta) otherCores() float64 {
	if d.Wall <= 0 || d.PGCPU < 0 {
		return 0
	}
	return max(0, d.otherCPU().Seconds()/d.Wall.Seconds())
}

// noisyCores is how much CPU other processes may use during a measured
// window before the report calls the machine busy.
const noisyCores = 0.15

// noisy names the scenarios during which other processes used more than
// noisyCores.
func (r *appendReport) noisy() []string {
	var out []string
	for _, x := range []*loadResult{r.ManyBase, r.ManyHTTP, r.HotBase, r.HotHTTP} {
		d := x.Server
		if other := d.otherCores(); other > noisyCores {
			out = append(out, fmt.Sprintf("%s (%.2f cores)", x.Name, other))
		}
	}
	return out
}

func verdict(fails []string) string {
	if len(fails) == 0 {
		return "**PASS**"
	}
	return "**FAIL**: " + strings.Join(fails, "; ")
}

func (r *appendReport) ratio(x, base *loadResult) float64 {
	if base.Rate() == 0 {
		return 0
	}
	return x.Rate() / base.Rate()
}

// markdown renders the report as the RESULTS.md section (without the
// markers).
func (r *appendReport) markdown() string {
	var b strings.Builder
	e, p := r.Env, r.Params
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	w("## Fact appends (HTTP, Postgres)\n\n")
	w("Written by `TestFactAppends` (`bash bench/run.sh`) on %s.\n\n", e.Date.Format("2006-01-02 15:04 MST"))
	w("%s", e.machineRows())
	var set []string
	for _, kv := range e.settings {
		set = append(set, kv[0]+"="+kv[1])
	}
	w("| PostgreSQL | %s, a local throwaway server (testutil.PostgresDurable) on 127.0.0.1: %s |\n", e.PGVersion, strings.Join(set, ", "))
	if e.FsyncProbeErr != nil {
		w("| Disk | fdatasync probe failed: %v |\n", e.FsyncProbeErr)
	} else {
		w("| Disk | 8 KiB overwrite + fdatasync in the temp dir: p50 %s, p99 %s (%d rounds) |\n", fmtLatency(e.FsyncP50), fmtLatency(e.FsyncP99), e.FsyncN)
	}
	w("\n")
	w("Load: %d concurrent clients per scenario, %s warm-up then %s measured; facts/s counts appends that "+
		"completed inside the measured window, latency is per append (request sent to response read). ",
		p.Clients, p.Warmup, p.Duration)
	w("HTTP: `POST /v1/facts` with `X-API-Key` and `{\"entity_id\":…,\"type\":\"deposit\",\"data\":{\"amount\":1.25}}`, " +
		"keep-alive HTTP/1.1 over loopback from one shared `net/http` Transport, against Factline started in the same " +
		"process (`internal/host/app`, Postgres store, group-commit appender). ")
	w("Raw pgx: the same appends made directly by %d goroutines on a %d-connection pgxpool, one fact per transaction "+
		"with the statements of `internal/host/store/postgres` (lock `fact_head` and the entity row; update the entity, insert "+
		"the fact, move the head; commit), in a second database on the same server. "+
		"(a) spreads appends round-robin over %s accounts; (b) puts every client on one account.\n\n",
		p.Clients, p.Clients, formatInt(manyEntities))

	w("| Scenario | Path | facts/s | p50 | p99 | vs raw | Target | Result |\n")
	w("|---|---|---:|---:|---:|---:|---|---|\n")
	row := func(scn, path string, x *loadResult, vs, target, result string) {
		w("| %s | %s | %s | %s | %s | %s | %s | %s |\n", scn, path, formatInt(int64(x.Rate()+0.5)),
			fmtLatency(x.Pct(0.50)), fmtLatency(x.Pct(0.99)), vs, target, result)
	}
	row("(a) "+formatInt(manyEntities)+" entities", "raw pgx, 1 fact/tx", r.ManyBase, "100%", "reference", "—")
	row("(a) "+formatInt(manyEntities)+" entities", "HTTP `POST /v1/facts`", r.ManyHTTP,
		fmt.Sprintf("%.0f%%", 100*r.ratio(r.ManyHTTP, r.ManyBase)),
		fmt.Sprintf("≥ %s facts/s, ≥ %.0f%% of raw, p99 < %s", formatInt(int64(targetManyRate)), 100*targetManyRatio, fmtLatency(targetManyP99)),
		r.ManyVerdict)
	row("(b) 1 hot entity", "raw pgx, 1 fact/tx", r.HotBase, "100%", "reference", "—")
	row("(b) 1 hot entity", "HTTP `POST /v1/facts`", r.HotHTTP,
		fmt.Sprintf("%.0f%%", 100*r.ratio(r.HotHTTP, r.HotBase)),
		fmt.Sprintf("≥ %s facts/s, seq gap-free", formatInt(int64(targetHotRate))),
		r.HotVerdict)
	w("\n")

	w("Ledger checks after both scenarios (every request awaited, then the `facts` table queried):\n\n")
	check := func(name string, c *ledgerCheck, hot *loadResult) {
		switch {
		case c.Err != nil:
			w("- %s: **check failed to run**: %v\n", name, c.Err)
		case len(c.Problems) > 0:
			w("- %s: **FAIL**: %s\n", name, strings.Join(c.Problems, "; "))
		default:
			w("- %s: **PASS**: the hot entity's seq is exactly 1..%s (no gaps, no duplicates; version and fact_seq agree) "+
				"and equals the %s appends its clients saw succeed; every entity's seq is 1..n; global positions are exactly "+
				"1..%s with `fact_head` at %s, one per successful append.\n",
				name, formatInt(c.HotFacts), formatInt(hot.AllOK), formatInt(c.TotalFacts), formatInt(c.HeadPos))
		}
	}
	check("Factline", r.ProductCheck, r.HotHTTP)
	check("Raw baseline", r.BaselineCheck, r.HotBase)
	w("\n")

	w("Where the time goes, over each measured window (server-wide PostgreSQL counters; CPU from /proc):\n\n")
	w("| Scenario | Path | append commits/s | facts per commit | other write tx/s | WAL bytes per fact | CPU: bench process | CPU: PostgreSQL | CPU: irq, softirq, steal | CPU: other processes | machine busy | busy just before | attempt |\n")
	w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	cores := func(d, wall time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()/wall.Seconds()) }
	diag := func(scn, path string, x *loadResult) {
		d := x.Server
		before := "n/a"
		if x.QuietBusy >= 0 {
			before = fmt.Sprintf("%.0f%%", 100*x.QuietBusy)
			if x.QuietWaited > 3*time.Second {
				before += fmt.Sprintf(" (after %v)", x.QuietWaited.Round(time.Second))
			}
		}
		if d.Wall <= 0 {
			w("| %s | %s | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | %s | %d of %d |\n", scn, path, before, x.Attempt, x.Attempts)
			return
		}
		secs := d.Wall.Seconds()
		commits := float64(d.Commits) / secs
		otherTx := float64(d.WriteTxs-d.Commits) / secs
		perCommit, walPer, pg, other := "n/a", "n/a", "n/a", "n/a"
		if d.Commits > 0 {
			perCommit = fmt.Sprintf("%.1f", float64(d.Facts)/float64(d.Commits))
		}
		if d.Facts > 0 {
			walPer = formatInt(d.WALBytes / d.Facts)
		}
		if d.PGCPU >= 0 {
			pg = cores(d.PGCPU, d.Wall)
			other = cores(max(0, d.otherCPU()), d.Wall)
		}
		busy := 0.0
		if d.HostAll > 0 {
			busy = 100 * float64(d.HostBusy) / float64(d.HostAll)
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f%% of %d cores | %s | %d of %d |\n", scn, path,
			formatInt(int64(commits+0.5)), perCommit, formatInt(int64(max(0, otherTx)+0.5)), walPer,
			cores(d.SelfCPU, d.Wall), pg, cores(d.IRQSteal, d.Wall), other, busy, e.Cores, before, x.Attempt, x.Attempts)
	}
	diag("(a)", "raw pgx", r.ManyBase)
	diag("(a)", "HTTP", r.ManyHTTP)
	diag("(b)", "raw pgx", r.HotBase)
	diag("(b)", "HTTP", r.HotHTTP)
	w("\n")
	w("CPU columns are in cores, averaged over the window. \"bench process\" is the Go test process: the HTTP clients "+
		"and the Factline server for the HTTP rows, the pgx goroutines for the raw rows. \"PostgreSQL\" is the server's "+
		"postmaster and its children. Interrupt work (loopback networking runs partly in soft interrupts) and steal belong "+
		"to no process; \"other processes\" is the rest of the machine's busy time. \"busy just before\" is the machine's "+
		"load over the 2 s before the scenario started (the run waits up to %s for it to drop below 10%%). A scenario whose "+
		"window other processes disturbed (more than %.2f cores) is run again, up to %d more times; the table shows the "+
		"least disturbed attempt, and the ledger checks count the appends of every attempt. \"append commits\" are the "+
		"transactions that committed the window's facts (distinct `xmin` of their rows); \"other write tx\" are the "+
		"remaining transaction ids assigned on the server meanwhile (in Factline, mostly the checkpoint writes of its "+
		"in-process stream consumers).\n\n", p.QuietWait, noisyCores, p.Retries)
	w("PostgreSQL connections of the path under test by activity, averaged over samples of `pg_stat_activity` every "+
		"20 ms (Factline: its store pool of up to %d plus the LISTEN connection; raw pgx: its pool of %d):\n\n",
		r.Env.StorePool(), p.Clients)
	for _, x := range []*loadResult{r.ManyBase, r.ManyHTTP, r.HotBase, r.HotHTTP} {
		var parts []string
		for i, ws := range x.Waits {
			if i == 6 {
				break
			}
			parts = append(parts, fmt.Sprintf("%s %.1f", ws.What, ws.Avg))
		}
		if len(parts) == 0 {
			parts = []string{"n/a"}
		}
		w("- %s: %s\n", x.Name, strings.Join(parts, "; "))
	}
	w("\n")
	if noisy := r.noisy(); len(noisy) > 0 {
		w("**Caution:** other processes used more than %.2f cores during %s; the machine was not quiet and those figures "+
			"understate what it can do.\n\n", noisyCores, strings.Join(noisy, ", "))
	}
	if len(r.Failures) > 0 {
		w("Targets missed:\n\n")
		for _, f := range r.Failures {
			w("- %s\n", f)
		}
		w("\n")
	}
	w("Reproduce with `make bench` or `bash bench/run.sh` on an otherwise idle machine (`BENCH_DURATION`, `BENCH_WARMUP` " +
		"shorten the windows for a trial; `BENCH_QUIET_WAIT` bounds the wait for an idle machine, 0 skips it; " +
		"`BENCH_RETRIES` sets how often a disturbed scenario is rerun; " +
		"`BENCH_CPUPROFILE=file` writes a CPU profile of the process during the HTTP (a) window).\n")
	return b.String()
}

// fmtMem renders a /proc/meminfo "N kB" value in GiB.
// startBenchProfile starts a CPU profile of the test process into the
// file BENCH_CPUPROFILE names, if any; the returned func stops it.
func startBenchProfile(t *testing.T) (stop func()) {
	t.Helper()
	path := os.Getenv("BENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			t.Errorf("close the CPU profile: %v", err)
		}
	}
}

// benchWindow is the measured window: BENCH_DURATION when set (a trial
// run), else def.
func benchWindow(t *testing.T, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv("BENCH_DURATION")
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("BENCH_DURATION=%q: want a positive Go duration", s)
	}
	return d
}

// machineRows is the head of a section's machine table: kernel, CPU,
// memory and Go. The section adds the rows of the servers it ran.
func (e *benchEnv) machineRows() string {
	return fmt.Sprintf("| Machine | |\n|---|---|\n| Kernel | `%s` |\n| CPU | %s, %d cores (GOMAXPROCS %d) |\n| Memory | %s |\n| Go | %s |\n",
		e.Uname, e.CPUModel, e.Cores, e.GOMAXPROCS, fmtMem(e.MemTotal), e.GoVersion)
}

func fmtMem(v string) string {
	n, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	if err != nil {
		return v
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<20))
}

// fmtLatency renders a latency in milliseconds.
func fmtLatency(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 1:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.0f ms", ms)
	}
}

// formatInt renders n with thousands separators.
func formatInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// updateSection replaces the text between <!-- bench:NAME --> and
// <!-- /bench:NAME --> in the file at path with body, keeping everything
// else; it appends the section when the markers are missing and creates
// the file when it does not exist.
func updateSection(path, name, body string) error {
	start, end := "<!-- bench:"+name+" -->", "<!-- /bench:"+name+" -->"
	section := start + "\n" + strings.TrimRight(body, "\n") + "\n" + end + "\n"
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		old = []byte("# Benchmark results\n\nEach section is written by one benchmark under bench/ (`make bench`) and " +
			"replaced when it runs again; its figures come from the machine it names.\n\n")
	case err != nil:
		return err
	}
	s := string(old)
	i := strings.Index(s, start)
	j := strings.Index(s, end)
	switch {
	case i >= 0 && j > i:
		rest := s[j+len(end):]
		rest = strings.TrimPrefix(rest, "\n")
		s = s[:i] + section + rest
	case i >= 0 || j >= 0:
		return fmt.Errorf("%s: unbalanced %s / %s markers; fix them by hand", path, start, end)
	default:
		if s != "" && !strings.HasSuffix(s, "\n\n") {
			s = strings.TrimRight(s, "\n") + "\n\n"
		}
		s += section
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
