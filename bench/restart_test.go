//go:build bench

package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/sdk/conformance"
)

// Warm restart benchmark parameters (issue 15, scenario 6, second part).
const (
	restartRounds = 5
	restartTarget = time.Second
)

// restartPlugins are the plugins of plugins/ that `make run` loads.
var restartPlugins = []string{"account", "asset", "followup", "generic"}

// restartRun is one start of the server: from exec to /ready answering
// 200.
type restartRun struct {
	Name  string
	Ready []time.Duration // one per round
	CPU   []time.Duration // the server's CPU time (user + system) until ready, one per round
}

func (r *restartRun) add(wall, cpu time.Duration) {
	r.Ready, r.CPU = append(r.Ready, wall), append(r.CPU, cpu)
}

func medianOf(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func (r *restartRun) median() time.Duration { return medianOf(r.Ready) }

func (r *restartRun) max() time.Duration { return slices.Max(r.Ready) }

// timeToReady starts bin with args, waits for /ready to answer 200 and
// stops the process with SIGTERM; it returns the time from the start to
// the first 200 of /ready and the CPU time the process had used by then.
func timeToReady(t *testing.T, bin, dir string, args []string) (time.Duration, time.Duration) {
	t.Helper()
	start := time.Now()
	cmd, exited, stop, logPath := launchFactline(t, bin, dir, args)
	defer stop()

	client := &http.Client{Timeout: 5 * time.Second}
	deadline := start.Add(2 * time.Minute)
	var base string
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("factline serve exited before it was ready: %v\n%s", err, tailFile(logPath, 3000))
		default:
		}
		if base == "" {
			b, _ := os.ReadFile(filepath.Join(dir, "factline.stdout"))
			if m := listeningRe.FindSubmatch(b); m != nil {
				base = string(m[1])
			}
		}
		if base != "" {
			resp, err := client.Get(base + "/ready")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					wall := time.Since(start)
					var cpu time.Duration
					if f := procStat(cmd.Process.Pid); f != nil {
						u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
						k, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
						cpu = time.Duration(u+k) * clockTick
					}
					return wall, cpu
				}
			}
		}
		time.Sleep(5 * time.Millisecond) // polling interval, the resolution of the figure
	}
	t.Fatalf("factline serve not ready within 2 minutes\n%s", tailFile(logPath, 3000))
	return 0, 0
}

// TestWarmRestart is the second part of scenario 6: a restart with the
// plugin compilation cache warm reaches ready (plugins loaded) in under
// 1 s. The server is started as `make run` starts it (embedded store,
// the repo's manifests, the four plugins of plugins/), first on an empty
// data dir and compilation cache, then restarted on them; the baseline is
// the same restart without plugins.
func TestWarmRestart(t *testing.T) {
	tmp := t.TempDir()
	bin := buildFactline(t, tmp)
	pluginsDir := filepath.Join(tmp, "plugins")
	if err := os.MkdirAll(pluginsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var wasmBytes int
	for _, name := range restartPlugins {
		mod, err := conformance.Build(t.Context(), "../plugins/"+name)
		if err != nil {
			t.Fatalf("build plugin %s: %v", name, err)
		}
		wasmBytes += len(mod)
		if err := os.WriteFile(filepath.Join(pluginsDir, name+".wasm"), mod, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	domain, _ := filepath.Abs(domainFile)
	manifest, _ := filepath.Abs("../manifests/gateway.yaml")
	args := func(data, plugins, cache string) []string {
		a := []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", data, "--domain", domain, "--manifest", manifest,
			"--plugin-cache-dir", cache}
		if plugins != "" {
			a = append(a, "--plugins-dir", plugins)
		}
		return a
	}

	// Without plugins: the rest of the start (process, store, manifests).
	bare := &restartRun{Name: "restart without plugins (baseline)"}
	bareData, bareCache := filepath.Join(tmp, "bare-data"), filepath.Join(tmp, "bare-cache")
	timeToReady(t, bin, tmp, args(bareData, "", bareCache)) // creates the data dir
	for range restartRounds {
		bare.add(timeToReady(t, bin, tmp, args(bareData, "", bareCache)))
	}

	data, cache := filepath.Join(tmp, "data"), filepath.Join(tmp, "wasm-cache")
	cold := &restartRun{Name: "first start: empty data dir and compilation cache"}
	cold.add(timeToReady(t, bin, tmp, args(data, pluginsDir, cache)))
	warm := &restartRun{Name: "restart, compilation cache warm"}
	for range restartRounds {
		warm.add(timeToReady(t, bin, tmp, args(data, pluginsDir, cache)))
	}
	t.Logf("ready: bare %v, cold %v, warm %v; CPU: bare %v, cold %v, warm %v", bare.Ready, cold.Ready, warm.Ready, bare.CPU, cold.CPU, warm.CPU)

	pass := warm.median() < restartTarget
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("## Warm restart (plugins loaded from the compilation cache; embedded store)\n\n")
	w("Written by `TestWarmRestart` (`bash bench/run.sh -run TestWarmRestart`) on %s UTC.\n\n", time.Now().UTC().Format("2006-01-02 15:04"))
	uname, _ := exec.Command("uname", "-srm").Output()
	w("| Machine | |\n|---|---|\n")
	w("| Kernel | `%s` |\n", strings.TrimSpace(string(uname)))
	w("| CPU | %s, %d cores (GOMAXPROCS %d) |\n", procField("/proc/cpuinfo", "model name"), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	w("| Go | %s %s/%s |\n\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	w("Server: the `factline` binary of this tree as its own process, as `make run` starts it: `factline serve --data-dir … "+
		"--domain manifests/domain.yaml --manifest manifests/gateway.yaml` on the embedded store, with the %d plugins of "+
		"`plugins/` (%s, %.1f MB of WebAssembly in all) given by `--plugins-dir` rather than built in, and `--plugin-cache-dir` "+
		"pointing at a directory of the run's own, so that the first start compiles with an empty cache. Each figure runs from "+
		"starting the process to the first 200 of `GET /ready` (polled every 5 ms), which answers 503 while plugins load; "+
		"the process is stopped with SIGTERM between rounds. Baseline: the same restarts on a data dir of their own without "+
		"`--plugins-dir`.\n\n", len(restartPlugins), strings.Join(restartPlugins, ", "), float64(wasmBytes)/1e6)
	w("| Start | rounds | to ready: median | max | each | server CPU time until ready: median |\n|---|---:|---:|---:|---|---:|\n")
	for _, r := range []*restartRun{bare, cold, warm} {
		each := make([]string, len(r.Ready))
		for i, d := range r.Ready {
			each[i] = fmtLatency(d)
		}
		w("| %s | %d | %s | %s | %s | %s |\n", r.Name, len(r.Ready), fmtLatency(r.median()), fmtLatency(r.max()), strings.Join(each, ", "),
			fmtLatency(medianOf(r.CPU)))
	}
	w("\nPlugin loading adds %s to the median restart (warm %s against the baseline's %s); the first start takes %.1f× a warm restart.\n\n",
		fmtLatency(warm.median()-bare.median()), fmtLatency(warm.median()), fmtLatency(bare.median()),
		float64(cold.median())/float64(max(warm.median(), 1)))
	result := "**PASS**"
	if !pass {
		result = "**FAIL**"
	}
	w("| Target | Measured | Result |\n|---|---|---|\n")
	w("| a restart with the compilation cache warm is ready (plugins loaded) in < %s | median %s of %d restarts (max %s) | %s |\n\n",
		fmtLatency(restartTarget), fmtLatency(warm.median()), len(warm.Ready), fmtLatency(warm.max()), result)
	w("The machine may be shared with other work while this runs (load average %s when the section was written); the times "+
		"to ready are wall-clock times and include waiting for the CPU, so on a busy machine the server's CPU time until "+
		"ready (user + system, from /proc, in 10 ms ticks; the compilation cache is read and instances made on up to "+
		"GOMAXPROCS threads, so it can exceed the wall time) is the steadier figure.\n\n", loadAvg())
	w("Reproduce with `bash bench/run.sh -run TestWarmRestart`.\n")
	md := b.String()
	fmt.Println(md)
	if err := updateSection(resultsFile, "warm-restart", md); err != nil {
		t.Errorf("write %s: %v", resultsFile, err)
	}
	if !pass {
		t.Errorf("target missed: warm restart median %v >= %v", warm.median(), restartTarget)
	}
}

// loadAvg is the first three fields of /proc/loadavg, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
