//go:build bench

package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// loadParams shape every scenario: how many concurrent clients, how long
// they run before measuring starts, and how long the measured window is.
type loadParams struct {
	Clients  int
	Warmup   time.Duration
	Duration time.Duration
	// QuietWait bounds the wait for an idle machine before each scenario.
	QuietWait time.Duration
	// Retries is how many times a scenario whose measured window other
	// processes disturbed is run again (time permitting).
	Retries int
}

// defaultParams are the acceptance settings. BENCH_WARMUP and
// BENCH_DURATION (Go durations) override the times for quick local runs,
// BENCH_QUIET_WAIT the wait for an idle machine (0 skips it) and
// BENCH_RETRIES the reruns of a disturbed scenario; RESULTS.md records
// what was used.
func defaultParams() (loadParams, error) {
	p := loadParams{Clients: 64, Warmup: 2 * time.Second, Duration: 10 * time.Second, QuietWait: 90 * time.Second, Retries: 2}
	if s := os.Getenv("BENCH_RETRIES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return p, fmt.Errorf("BENCH_RETRIES=%q: want a count such as 2", s)
		}
		p.Retries = n
	}
	for _, v := range []struct {
		env string
		dst *time.Duration
	}{{"BENCH_WARMUP", &p.Warmup}, {"BENCH_DURATION", &p.Duration}, {"BENCH_QUIET_WAIT", &p.QuietWait}} {
		if s := os.Getenv(v.env); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 || (v.env == "BENCH_DURATION" && d == 0) {
				return p, fmt.Errorf("%s=%q: want a positive Go duration such as 10s", v.env, s)
			}
			*v.dst = d
		}
	}
	return p, nil
}

// opFunc performs one operation (one fact append) for client worker in its
// iter-th round. A non-nil error counts as a failed operation.
type opFunc func(ctx context.Context, worker, iter int) error

// loadResult is what one scenario measured.
type loadResult struct {
	Name   string
	Params loadParams
	// Window is the measured wall time (the nominal Duration, give or take
	// scheduling).
	Window time.Duration
	// Ops counts operations that succeeded and completed inside the
	// measured window; Lat holds their latencies, sorted.
	Ops int64
	Lat []time.Duration
	// OK counts every successful operation of the run, warm-up and the
	// requests still in flight at the end included: it is what the
	// database must hold afterwards.
	OK int64
	// Errors counts failed operations of the whole run; FirstErrs keeps a
	// few of their messages.
	Errors    int64
	FirstErrs []string
	Server    serverDelta
	// QuietBusy is the machine's busy share (0..1) over the two seconds
	// before the scenario started, after waiting QuietWaited for it to
	// drop; -1 when not measured.
	QuietBusy   float64
	QuietWaited time.Duration
	// Attempt is which run of the scenario this is (1-based), Attempts how
	// many were made; AllOK and AllErrors sum OK and Errors over them all.
	Attempt, Attempts int
	AllOK, AllErrors  int64
	// Waits is what the PostgreSQL backends serving the run were doing,
	// sampled over the window.
	Waits []waitShare
}

// Rate is successful operations per second of the measured window.
func (r *loadResult) Rate() float64 {
	if r.Window <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Window.Seconds()
}

// Pct returns the p-quantile (0 < p <= 1) of the measured latencies by the
// nearest-rank method.
func (r *loadResult) Pct(p float64) time.Duration {
	n := len(r.Lat)
	if n == 0 {
		return 0
	}
	k := int(math.Ceil(p*float64(n))) - 1
	k = max(0, min(k, n-1))
	return r.Lat[k]
}

// runLoad runs op from p.Clients goroutines for p.Warmup+p.Duration and
// measures the operations that complete inside the last p.Duration. No
// new operation starts after the window closes; the ones in flight are
// awaited (and counted in OK and Errors, not in Ops). mon, when non-nil,
// samples server counters and tg's fact head at the window's edges and the
// activity of tg's connections during it; profile, when non-empty,
// is a file that receives a CPU profile of this process over the window.
func runLoad(ctx context.Context, name string, p loadParams, op opFunc, mon *monitor, tg target, profile string) (*loadResult, error) {
	type workerOut struct {
		lat    []time.Duration
		ok     int64
		errors int64
		errs   []string
	}
	outs := make([]workerOut, p.Clients)
	start := time.Now()
	windowStart := start.Add(p.Warmup)
	windowEnd := windowStart.Add(p.Duration)

	// Sample the server and the CPU at the window's edges.
	var (
		sampleErr   error
		before      serverSample
		after       serverSample
		waits       []waitShare
		sampler     sync.WaitGroup
		profileFile *os.File
	)
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		sleepUntil(ctx, windowStart)
		if mon != nil {
			before, sampleErr = mon.sample(ctx, tg.db)
		}
		if profile != "" {
			f, err := os.Create(profile)
			if err == nil {
				if err = pprof.StartCPUProfile(f); err != nil {
					f.Close()
				} else {
					profileFile = f
				}
			}
			if err != nil && sampleErr == nil {
				sampleErr = fmt.Errorf("cpu profile: %w", err)
			}
		}
		if mon != nil {
			waits = mon.sampleWaits(ctx, windowEnd, tg.app)
		} else {
			sleepUntil(ctx, windowEnd)
		}
		if profileFile != nil {
			pprof.StopCPUProfile()
			profileFile.Close()
		}
		if mon != nil && sampleErr == nil {
			after, sampleErr = mon.sample(ctx, tg.db)
		}
	}()

	var wg sync.WaitGroup
	var stopped atomic.Bool
	for w := range p.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := &outs[w]
			out.lat = make([]time.Duration, 0, 1<<12)
			for iter := 0; ; iter++ {
				t0 := time.Now()
				if !t0.Before(windowEnd) || ctx.Err() != nil || stopped.Load() {
					return
				}
				err := op(ctx, w, iter)
				t1 := time.Now()
				if err != nil {
					out.errors++
					if len(out.errs) < 3 {
						out.errs = append(out.errs, err.Error())
					}
					if out.errors >= 1000 {
						// Something is badly wrong; stop hammering it.
						stopped.Store(true)
					}
					continue
				}
				out.ok++
				if !t1.Before(windowStart) && !t1.After(windowEnd) {
					out.lat = append(out.lat, t1.Sub(t0))
				}
			}
		}()
	}
	wg.Wait()
	sampler.Wait()

	r := &loadResult{Name: name, Params: p, Window: p.Duration}
	for _, o := range outs {
		r.Lat = append(r.Lat, o.lat...)
		r.OK += o.ok
		r.Errors += o.errors
		for _, e := range o.errs {
			if len(r.FirstErrs) < 5 {
				r.FirstErrs = append(r.FirstErrs, e)
			}
		}
	}
	slices.Sort(r.Lat)
	r.Ops = int64(len(r.Lat))
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if sampleErr != nil {
		return r, sampleErr
	}
	if mon != nil {
		r.Server = after.sub(before)
		if err := countCommits(ctx, tg.db, before.head, after.head, &r.Server); err != nil {
			return r, err
		}
		r.Waits = waits
	}
	return r, nil
}

func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// target is the database a scenario appends to.
type target struct {
	app string        // application_name of the connections doing the appends
	db  *pgxpool.Pool // a connection to the database, for the fact head
}

// countCommits sets d.Commits to the number of transactions that committed
// the facts at positions (from, to]: the distinct xmin of those rows.
func countCommits(ctx context.Context, db *pgxpool.Pool, from, to int64, d *serverDelta) error {
	d.Facts = to - from
	err := db.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM facts WHERE position > $1 AND position <= $2`, from, to).
		Scan(&d.Commits)
	if err != nil {
		return fmt.Errorf("count append commits: %w", err)
	}
	return nil
}

// monitor samples server-wide counters that show where the time goes:
// PostgreSQL write transactions (transaction ids handed out), WAL bytes,
// and the CPU time of this process and of the whole machine.
type monitor struct {
	pool *pgxpool.Pool
	// postmaster is the PID of the local PostgreSQL server, 0 when it
	// cannot be found (a remote server): its CPU is then not reported.
	postmaster int
}

// newMonitor finds the server's postmaster through its data directory, so
// the CPU of the server's processes can be told from everything else's.
func newMonitor(ctx context.Context, pool *pgxpool.Pool) *monitor {
	m := &monitor{pool: pool}
	var dir string
	if err := pool.QueryRow(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		return m
	}
	b, err := os.ReadFile(dir + "/postmaster.pid")
	if err != nil {
		return m
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil && procStat(pid) != nil {
		m.postmaster = pid
	}
	return m
}

type serverSample struct {
	at       time.Time
	xid      int64 // next transaction id to be assigned
	walBytes int64 // current WAL insert position
	head     int64 // committed fact_head.position of the target database
	selfCPU  time.Duration
	pgCPU    time.Duration // -1 when unknown
	hostBusy time.Duration // summed over all CPUs
	hostAll  time.Duration
	irqSteal time.Duration
}

// serverDelta is the change of a serverSample over the measured window.
type serverDelta struct {
	Wall     time.Duration
	WriteTxs int64 // transaction ids assigned, server-wide
	Facts    int64 // facts committed in the target database
	Commits  int64 // transactions that committed them
	WALBytes int64
	SelfCPU  time.Duration
	PGCPU    time.Duration // -1 when unknown
	HostBusy time.Duration
	HostAll  time.Duration
	IRQSteal time.Duration
}

func (a serverSample) sub(b serverSample) serverDelta {
	pg := a.pgCPU - b.pgCPU
	if a.pgCPU < 0 || b.pgCPU < 0 {
		pg = -1
	}
	return serverDelta{
		Wall:     a.at.Sub(b.at),
		WriteTxs: a.xid - b.xid,
		WALBytes: a.walBytes - b.walBytes,
		SelfCPU:  a.selfCPU - b.selfCPU,
		PGCPU:    pg,
		HostBusy: a.hostBusy - b.hostBusy,
		HostAll:  a.hostAll - b.hostAll,
		IRQSteal: a.irqSteal - b.irqSteal,
	}
}

func (m *monitor) sample(ctx context.Context, db *pgxpool.Pool) (serverSample, error) {
	s := serverSample{at: time.Now()}
	// pg_current_snapshot does not assign a transaction id, so sampling
	// does not disturb the count; xmax is the next id to be assigned.
	err := m.pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
       (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&s.xid, &s.walBytes)
	if err != nil {
		return s, fmt.Errorf("sample server counters: %w", err)
	}
	if err := db.QueryRow(ctx, `SELECT position FROM fact_head`).Scan(&s.head); err != nil {
		return s, fmt.Errorf("sample fact head: %w", err)
	}
	f := procStat(os.Getpid())
	if f == nil {
		return s, fmt.Errorf("read /proc/self/stat")
	}
	s.selfCPU = ticks(f[11]) + ticks(f[12])
	s.pgCPU = -1
	if m.postmaster != 0 {
		s.pgCPU = serverCPU(m.postmaster)
	}
	if s.hostBusy, s.hostAll, s.irqSteal, err = hostCPUDetail(); err != nil {
		return s, err
	}
	return s, nil
}

// clockTick is USER_HZ, the unit of /proc CPU times; 100 on every Linux
// platform Go supports.
const clockTick = 10 * time.Millisecond

// procStat returns the fields of /proc/PID/stat after the command name:
// f[0] is field 3 (state), so field n is f[n-3]. Nil when unreadable.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil
	}
	return f
}

func ticks(field string) time.Duration {
	n, _ := strconv.ParseInt(field, 10, 64)
	return time.Duration(n) * clockTick
}

// serverCPU returns the CPU time of a PostgreSQL server: its postmaster
// (including the children it has reaped: cutime, cstime) and its live
// children (backends, WAL writer, checkpointer ...).
func serverCPU(postmaster int) time.Duration {
	var total time.Duration
	if f := procStat(postmaster); f != nil {
		// utime 14, stime 15, cutime 16, cstime 17.
		total += ticks(f[11]) + ticks(f[12]) + ticks(f[13]) + ticks(f[14])
	}
	ents, _ := os.ReadDir("/proc")
	pp := strconv.Itoa(postmaster)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmaster {
			continue
		}
		// ppid is field 4.
		if f := procStat(pid); f != nil && f[1] == pp {
			total += ticks(f[11]) + ticks(f[12])
		}
	}
	return total
}

// hostCPU returns the busy and total CPU time of the machine, summed over
// its CPUs (idle and iowait count as not busy).
func hostCPU() (busy, all time.Duration, err error) {
	busy, all, _, err = hostCPUDetail()
	return busy, all, err
}

// hostCPUDetail is hostCPU that also returns the part of busy that belongs
// to no process: interrupts, soft interrupts and steal.
func hostCPUDetail() (busy, all, irqSteal time.Duration, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, 0, fmt.Errorf("/proc/stat: unexpected format")
	}
	var total, idle, irq int64
	// user nice system idle iowait irq softirq steal (guest time is
	// already inside user and nice).
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += n
		switch i {
		case 3, 4:
			idle += n
		case 5, 6, 7:
			irq += n
		}
	}
	return time.Duration(total-idle) * clockTick, time.Duration(total) * clockTick, time.Duration(irq) * clockTick, nil
}

// waitQuiet waits, for at most maxWait, until the machine has been less
// than 10% busy for two seconds, and returns how busy it was over the last
// two seconds and how long it waited. Other work on the machine would
// otherwise end up in the figures.
func waitQuiet(ctx context.Context, maxWait time.Duration) (busy float64, waited time.Duration) {
	start := time.Now()
	for {
		b0, a0, err := hostCPU()
		if err != nil {
			return -1, time.Since(start)
		}
		sleepUntil(ctx, time.Now().Add(2*time.Second))
		b1, a1, err := hostCPU()
		if err != nil || a1 == a0 {
			return -1, time.Since(start)
		}
		busy = float64(b1-b0) / float64(a1-a0)
		if busy < 0.10 || time.Since(start) >= maxWait || ctx.Err() != nil {
			return busy, time.Since(start)
		}
	}
}

// waitShare is one activity of PostgreSQL backends and how many backends
// were in it on average over the samples.
type waitShare struct {
	What string
	Avg  float64
}

// sampleWaits polls pg_stat_activity every 20 ms until the deadline and
// returns the average number of client backends named app per activity,
// most common first. "idle in transaction" means a transaction is waiting
// for its client's next statement (with the locks it holds still held).
func (m *monitor) sampleWaits(ctx context.Context, until time.Time, app string) []waitShare {
	counts := map[string]int{}
	samples := 0
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(until) && ctx.Err() == nil {
		rows, err := m.pool.Query(ctx, `SELECT CASE
    WHEN state = 'idle in transaction' THEN 'idle in transaction (waiting for the client)'
    WHEN state = 'idle' THEN 'idle (no transaction)'
    WHEN wait_event IS NULL THEN 'running (CPU)'
    ELSE wait_event_type || ': ' || wait_event END AS what, count(*)
FROM pg_stat_activity
WHERE backend_type = 'client backend' AND application_name = $1
GROUP BY 1`, app)
		if err == nil {
			for rows.Next() {
				var what string
				var n int
				if rows.Scan(&what, &n) == nil {
					counts[what] += n
				}
			}
			rows.Close()
			if rows.Err() == nil {
				samples++
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	if samples == 0 {
		return nil
	}
	out := make([]waitShare, 0, len(counts))
	for what, n := range counts {
		out = append(out, waitShare{What: what, Avg: float64(n) / float64(samples)})
	}
	slices.SortFunc(out, func(a, b waitShare) int {
		if a.Avg != b.Avg {
			if a.Avg > b.Avg {
				return -1
			}
			return 1
		}
		return strings.Compare(a.What, b.What)
	})
	return out
}
