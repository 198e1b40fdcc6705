//go:build bench

package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// wrkArgs is one wrk invocation: Conns keep-alive connections spread over
// Threads threads, for Duration, with extra request headers.
type wrkArgs struct {
	Threads  int
	Conns    int
	Duration time.Duration
	Timeout  time.Duration
	Headers  []string // "Name: value"
	// Script is a wrk Lua script (-s) that builds each request; empty
	// sends the same request every time.
	Script string
	URL    string
}

// command returns the wrk command line (without the binary).
func (a wrkArgs) command() []string {
	secs := int(math.Ceil(a.Duration.Seconds()))
	args := []string{"-t", strconv.Itoa(a.Threads), "-c", strconv.Itoa(a.Conns), "-d", strconv.Itoa(max(1, secs)) + "s",
		"--timeout", strconv.Itoa(max(1, int(math.Ceil(a.Timeout.Seconds())))) + "s", "--latency"}
	for _, h := range a.Headers {
		args = append(args, "-H", h)
	}
	if a.Script != "" {
		args = append(args, "-s", a.Script)
	}
	return append(args, a.URL)
}

// wrkResult is what wrk --latency printed.
type wrkResult struct {
	Requests    int64         // completed requests
	Elapsed     time.Duration // wrk's own runtime figure
	RPS         float64       // "Requests/sec"
	P50, P75    time.Duration
	P90, P99    time.Duration
	LatAvg      time.Duration
	LatMax      time.Duration
	Non2xx      int64 // "Non-2xx or 3xx responses"; 0 when the line is absent
	SockConnect int64 // "Socket errors: connect N, read N, write N, timeout N"
	SockRead    int64
	SockWrite   int64
	SockTimeout int64
	// CPU is the CPU time (user + system) of the wrk process.
	CPU    time.Duration
	Output string
}

// SocketErrors is the sum of wrk's socket error counters.
func (r *wrkResult) SocketErrors() int64 {
	return r.SockConnect + r.SockRead + r.SockWrite + r.SockTimeout
}

var (
	wrkRequestsRe = regexp.MustCompile(`^\s*(\d+) requests in ([0-9.]+[a-z]+),`)
	wrkRPSRe      = regexp.MustCompile(`^Requests/sec:\s+([0-9.]+)`)
	wrkPctRe      = regexp.MustCompile(`^\s*(50|75|90|99)%\s+([0-9.]+[a-z]+)\s*$`)
	wrkLatencyRe  = regexp.MustCompile(`^\s*Latency\s+([0-9.]+[a-z]+)\s+[0-9.]+[a-z]+\s+([0-9.]+[a-z]+)`)
	wrkNon2xxRe   = regexp.MustCompile(`^\s*Non-2xx or 3xx responses:\s+(\d+)`)
	wrkSocketRe   = regexp.MustCompile(`^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

// parseWrk reads the output of `wrk --latency`.
func parseWrk(out string) (*wrkResult, error) {
	r := &wrkResult{Output: out}
	var haveRPS, haveReqs bool
	pcts := map[string]*time.Duration{"50": &r.P50, "75": &r.P75, "90": &r.P90, "99": &r.P99}
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		var err error
		switch {
		case wrkRPSRe.MatchString(line):
			m := wrkRPSRe.FindStringSubmatch(line)
			r.RPS, err = strconv.ParseFloat(m[1], 64)
			haveRPS = true
		case wrkRequestsRe.MatchString(line):
			m := wrkRequestsRe.FindStringSubmatch(line)
			if r.Requests, err = strconv.ParseInt(m[1], 10, 64); err == nil {
				r.Elapsed, err = parseWrkDuration(m[2])
			}
			haveReqs = true
		case wrkPctRe.MatchString(line):
			m := wrkPctRe.FindStringSubmatch(line)
			*pcts[m[1]], err = parseWrkDuration(m[2])
			seen[m[1]] = true
		case wrkLatencyRe.MatchString(line):
			m := wrkLatencyRe.FindStringSubmatch(line)
			if r.LatAvg, err = parseWrkDuration(m[1]); err == nil {
				r.LatMax, err = parseWrkDuration(m[2])
			}
		case wrkNon2xxRe.MatchString(line):
			r.Non2xx, err = strconv.ParseInt(wrkNon2xxRe.FindStringSubmatch(line)[1], 10, 64)
		case wrkSocketRe.MatchString(line):
			m := wrkSocketRe.FindStringSubmatch(line)
			for i, dst := range []*int64{&r.SockConnect, &r.SockRead, &r.SockWrite, &r.SockTimeout} {
				if err == nil {
					*dst, err = strconv.ParseInt(m[i+1], 10, 64)
				}
			}
		}
		if err != nil {
			return r, fmt.Errorf("wrk output line %q: %w", line, err)
		}
	}
	switch {
	case !haveRPS:
		return r, fmt.Errorf("wrk output has no Requests/sec line")
	case !haveReqs:
		return r, fmt.Errorf("wrk output has no \"N requests in T\" line")
	case !seen["50"] || !seen["99"]:
		return r, fmt.Errorf("wrk output has no latency distribution (was --latency passed?)")
	}
	return r, nil
}

// parseWrkDuration parses wrk's time figures: a number with one of the
// units us, ms, s, m, h.
func parseWrkDuration(s string) (time.Duration, error) {
	i := strings.IndexFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' })
	if i <= 0 {
		return 0, fmt.Errorf("time %q has no unit", s)
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("time %q: %w", s, err)
	}
	units := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour}
	u, ok := units[s[i:]]
	if !ok {
		return 0, fmt.Errorf("time %q: unknown unit %q", s, s[i:])
	}
	return time.Duration(v * float64(u)), nil
}

// runWrk runs wrk to the end and parses what it printed.
func runWrk(ctx context.Context, bin string, a wrkArgs) (*wrkResult, error) {
	cmd := exec.CommandContext(ctx, bin, a.command()...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String()
	if err != nil {
		return &wrkResult{Output: out}, fmt.Errorf("wrk %s: %w\n%s%s", strings.Join(a.command(), " "), err, out, stderr.String())
	}
	r, err := parseWrk(out)
	if cmd.ProcessState != nil {
		r.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return r, fmt.Errorf("%w\n%s%s", err, out, stderr.String())
	}
	return r, nil
}

// TestGatewayWrkParse pins the parser to what wrk 4.1 prints.
func TestGatewayWrkParse(t *testing.T) {
	const out = `Running 10s test @ http://127.0.0.1:39999/v1/accounts/acct-1
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     4.61ms    2.95ms  48.21ms   83.10%
    Req/Sec     7.12k   512.33     8.60k    71.50%
  Latency Distribution
     50%    3.89ms
     75%    5.42ms
     90%    7.84ms
     99%   15.67ms
  141752 requests in 10.01s, 98.31MB read
  Socket errors: connect 0, read 1, write 0, timeout 3
  Non-2xx or 3xx responses: 17
Requests/sec:  14161.04
Transfer/sec:      9.82MB
`
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{Requests: 141752, Elapsed: 10010 * time.Millisecond, RPS: 14161.04,
		P50: 3890 * time.Microsecond, P75: 5420 * time.Microsecond, P90: 7840 * time.Microsecond, P99: 15670 * time.Microsecond,
		LatAvg: 4610 * time.Microsecond, LatMax: 48210 * time.Microsecond, Non2xx: 17, SockRead: 1, SockTimeout: 3}
	got := *r
	got.Output = ""
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"requests", got.Requests, want.Requests}, {"rps", got.RPS, want.RPS}, {"non2xx", got.Non2xx, want.Non2xx},
		{"socket read", got.SockRead, want.SockRead}, {"socket timeout", got.SockTimeout, want.SockTimeout},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	near := func(name string, got, want time.Duration) {
		if d := got - want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("elapsed", got.Elapsed, want.Elapsed)
	near("p50", got.P50, want.P50)
	near("p75", got.P75, want.P75)
	near("p90", got.P90, want.P90)
	near("p99", got.P99, want.P99)
	near("avg", got.LatAvg, want.LatAvg)
	near("max", got.LatMax, want.LatMax)
	if got.SocketErrors() != 4 {
		t.Errorf("socket errors = %d, want 4", got.SocketErrors())
	}

	// A clean run prints neither error line.
	clean := strings.NewReplacer("  Socket errors: connect 0, read 1, write 0, timeout 3\n", "",
		"  Non-2xx or 3xx responses: 17\n", "", "     99%   15.67ms", "     99%  812.00us").Replace(out)
	r, err = parseWrk(clean)
	if err != nil {
		t.Fatal(err)
	}
	if r.Non2xx != 0 || r.SocketErrors() != 0 || r.P99 != 812*time.Microsecond {
		t.Errorf("clean output: non2xx %d, socket errors %d, p99 %v", r.Non2xx, r.SocketErrors(), r.P99)
	}
	if _, err := parseWrk("Running 10s test\n"); err == nil {
		t.Error("parseWrk accepted output without figures")
	}
}
