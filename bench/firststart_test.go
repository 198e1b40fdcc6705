//go:build bench

package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// First start benchmark parameters (issue 15, scenario 6, first part).
const (
	firstStartTarget = 4 * time.Minute
	// firstStartBound is how long a start may take before the run gives up.
	firstStartBound = 30 * time.Minute
)

// startRun is one `make run` of a clone, from exec to GET /health
// answering 200.
type startRun struct {
	Name      string
	Health    time.Duration // to the first 200 of /health
	Lines     int           // lines of output before that
	Downloads int           // "go: downloading" lines among them
	// Milestones are the times of the lines that open each phase.
	Milestones []milestone
	CPU        time.Duration // CPU time of make and the commands it waited for
	Cores      float64       // the whole machine's busy cores during the run
}

type milestone struct {
	Line string
	At   time.Duration
}

// firstStartPhases are the lines of `make run` that open a phase, by
// prefix.
var firstStartPhases = []string{"go: downloading", "Building ", "Building bin/factline", "Starting factline"}

// makeRun runs `make run` in dir with env and the address and data dir
// given, until /health answers 200; then it stops the whole process group
// with SIGTERM.
func makeRun(t *testing.T, name, dir string, env []string, data string) startRun {
	t.Helper()
	port := freeTCPPort(t)
	cmd := exec.Command("make", "run", "ADDR=127.0.0.1:"+strconv.Itoa(port), "DATA_DIR="+data)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	logPath := filepath.Join(filepath.Dir(data), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()

	run := startRun{Name: name}
	var mu sync.Mutex
	seen := map[string]bool{}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("make run: %v", err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(logf, "%8.1fs %s\n", time.Since(start).Seconds(), line)
			mu.Lock()
			run.Lines++
			if strings.HasPrefix(line, "go: downloading") {
				run.Downloads++
			}
			for _, p := range firstStartPhases {
				if strings.HasPrefix(line, p) && !seen[p] {
					seen[p] = true
					run.Milestones = append(run.Milestones, milestone{Line: line, At: time.Since(start)})
				}
			}
			mu.Unlock()
		}
		io.Copy(io.Discard, pr)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	busy0, _, _ := hostCPU()

	client := &http.Client{Timeout: 2 * time.Second}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/health"
	deadline := start.Add(firstStartBound)
	var health time.Duration
	for health == 0 {
		select {
		case err := <-exited:
			<-read
			t.Fatalf("%s: make run ended before /health answered: %v\n%s", name, err, tailFile(logPath, 4000))
		default:
		}
		if time.Now().After(deadline) {
			break
		}
		if resp, err := client.Get(url); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				health = time.Since(start)
				break
			}
		}
		time.Sleep(100 * time.Millisecond) // polling interval, the resolution of the figure
	}
	busy1, _, _ := hostCPU()
	mu.Lock()
	got := run
	mu.Unlock()

	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	<-read
	if health == 0 {
		t.Fatalf("%s: /health did not answer 200 within %v\n%s", name, firstStartBound, tailFile(logPath, 4000))
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		got.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	got.Health = health
	got.Cores = float64(busy1-busy0) / float64(health)
	return got
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// firstStartEnv is the environment with Go's caches moved into dir, empty.
func firstStartEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPATH":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"GOCACHE="+filepath.Join(dir, "go-build"),
		"GOPATH="+filepath.Join(dir, "gopath"),
		"GOMODCACHE="+filepath.Join(dir, "gopath", "pkg", "mod"),
		// The module cache is read-only by default: let the test's
		// cleanup remove it.
		"GOFLAGS=-modcacherw")
}

// TestFirstStart is the first part of scenario 6: from a fresh clone with
// empty Go caches, `make run` until GET /health answers 200, under 4
// minutes on an idle 2-core machine. The baseline is the same `make run`
// again on the same clone with the caches it filled (and a new data dir).
func TestFirstStart(t *testing.T) {
	tmp := t.TempDir()
	clone := filepath.Join(tmp, "factline")
	if out, err := exec.Command("git", "clone", "--quiet", "--no-hardlinks", "..", clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	head, _ := exec.Command("git", "-C", clone, "rev-parse", "--short", "HEAD").Output()
	env := firstStartEnv(tmp)
	quiet, _ := waitQuiet(t.Context(), 30*time.Second)
	idleBefore := quiet * float64(runtime.NumCPU()) // cores busy before the run

	first := makeRun(t, "first start: fresh clone, empty Go caches", clone, env, filepath.Join(tmp, "data-first"))
	warm := makeRun(t, "again: caches warm, new data dir (baseline)", clone, env, filepath.Join(tmp, "data-warm"))
	t.Logf("first %v (%d lines, %d downloads, cores %.2f), warm %v", first.Health, first.Lines, first.Downloads, first.Cores, warm.Health)

	pass := first.Health < firstStartTarget
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("## First start (`make run` from a fresh clone with empty Go caches)\n\n")
	w("Written by `TestFirstStart` (`bash bench/run.sh -run TestFirstStart`) on %s UTC.\n\n", time.Now().UTC().Format("2006-01-02 15:04"))
	uname, _ := exec.Command("uname", "-srm").Output()
	w("| Machine | |\n|---|---|\n")
	w("| Kernel | `%s` |\n", strings.TrimSpace(string(uname)))
	w("| CPU | %s, %d cores |\n", procField("/proc/cpuinfo", "model name"), runtime.NumCPU())
	w("| Go | %s %s/%s |\n\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	w("What runs: `git clone` of this repository's HEAD (%s; uncommitted changes are not in it), then in the clone "+
		"`make run ADDR=127.0.0.1:PORT DATA_DIR=…` with `GOCACHE`, `GOPATH` and `GOMODCACHE` in new empty directories, "+
		"so every module is downloaded from the Go module proxy (`%s`) and every package is compiled, the plugins of "+
		"`plugins/` for WebAssembly and the binary with them built in. The figure runs from starting `make` to the first "+
		"200 of `GET /health` (polled every 100 ms). Downloads go over the network, so their part depends on the link as "+
		"well as on the machine. Baseline: `make run` again in the same clone with the caches the first run filled.\n\n",
		strings.TrimSpace(string(head)), goEnv("GOPROXY"))
	w("| Start | to /health 200 | lines of progress shown before it | modules downloaded | CPU time (make and the builds) | machine cores busy |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range []startRun{first, warm} {
		w("| %s | %s | %d | %d | %.0f s | %.2f of %d |\n", r.Name, fmtSeconds(r.Health), r.Lines, r.Downloads, r.CPU.Seconds(), r.Cores, runtime.NumCPU())
	}
	w("\nPhases of the first start (the first line of each, and when it came):\n\n| at | line |\n|---:|---|\n")
	for _, m := range first.Milestones {
		w("| %s | `%s` |\n", fmtSeconds(m.At), strings.ReplaceAll(m.Line, "|", "\\|"))
	}
	w("\nThe first start takes %.1f× the baseline.\n\n", float64(first.Health)/float64(max(warm.Health, 1)))
	result := "**PASS**"
	if !pass {
		result = "**FAIL**"
	}
	w("| Target | Measured | Result |\n|---|---|---|\n")
	w("| first start under %s on an idle 2-core machine | %s | %s |\n\n", fmtSeconds(firstStartTarget), fmtSeconds(first.Health), result)
	others := first.Cores - first.CPU.Seconds()/first.Health.Seconds()
	if idleBefore > 0.2 || others > 0.2 {
		w("**Caution:** the machine was not idle: other processes used about %.2f cores during the first start (%.2f just "+
			"before it; load average %s when the section was written), so the time to /health includes waiting for the CPU; "+
			"the CPU time is the steadier figure.\n\n", max(others, 0), idleBefore, loadAvg())
	} else {
		w("The machine was otherwise idle: other processes used about %.2f cores during the first start (load average %s "+
			"when the section was written).\n\n", max(others, 0), loadAvg())
	}
	w("Reproduce with `bash bench/run.sh -run TestFirstStart` (it needs the Go module proxy; the clone and its caches are removed afterwards).\n")
	md := b.String()
	fmt.Println(md)
	if err := updateSection(resultsFile, "first-start", md); err != nil {
		t.Errorf("write %s: %v", resultsFile, err)
	}
	if !pass {
		t.Errorf("target missed: first start %v >= %v", first.Health, firstStartTarget)
	}
}

func fmtSeconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func goEnv(name string) string {
	out, err := exec.Command(goTool(), "env", name).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
