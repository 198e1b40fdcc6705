// Package conformance checks a plugin module against the Factline plugin
// ABI (sdk/ABI.md): the checks `factline plugin test FILE.wasm` runs, usable
// from any plugin's own go test:
//
//	func TestConformance(t *testing.T) {
//		wasm, _ := os.ReadFile("account.wasm")
//		conformance.Run(t, wasm, conformance.Options{
//			Inputs: map[string][]string{"deposit": {`{"amount":1}`}},
//		})
//	}
//
// The module is loaded with the gateway's own plugin runtime (the module
// runner internal/host/wasm builds on, which imports no gateway code), so a module
// that passes is one the gateway accepts; the checks that need raw bytes
// or an instance's memory size (malformed input, memory) run on one more
// instance, configured as the host configures its own.
package conformance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/factline/factline/sdk/abi"
)

// Options tune a Check. The zero value checks with the host's defaults.
type Options struct {
	// Inputs are sample inputs (JSON text) per command name, for the
	// determinism, replay and memory checks. A command without samples is
	// run with {}; the built-in append gets one raw append per fact type
	// the plugin emits, with empty data, unless Inputs["append"] is set.
	// Give the commands inputs they accept, so that the replay check has
	// facts to replay.
	Inputs map[string][]string
	// Facts are sample facts per handler name, for subscriptions. A
	// handler without samples gets one fact of a made-up type.
	Facts map[string][]abi.Fact
	// Host configures the host runtime the module is loaded in (call
	// deadline, memory cap, compilation cache directory, ...). A zero
	// PoolSize means 2.
	Host HostOptions
	// Calls is the number of calls of the memory check (default 10,000;
	// 1,000 in a binary built with the race detector, which makes every
	// guest loop iteration a slow trip into instrumented Go code).
	Calls int
	// MaxGrowthMiB is how much an instance's memory may grow over those
	// calls, after a warm-up (default 8: a Go guest's heap reaches twice
	// its live size, and at least 4 MiB, before the collector runs, so a
	// few MiB of growth is no leak).
	MaxGrowthMiB int
	// Now is the decision time passed in every call (default
	// 1764000000000).
	Now int64
}

// HostOptions are the limits the module runs under, with the meaning and
// defaults of the gateway's plugin options of the same names (factline
// serve).
type HostOptions struct {
	// CacheDir is the directory of wazero's compilation cache on disk
	// (empty: a temporary one per Check).
	CacheDir string
	// MemoryLimitMiB caps the linear memory of each instance (default 64,
	// at least 8, at most 4096). A guest growing past it traps.
	MemoryLimitMiB int
	// CallTimeout is the budget of one call (default 100ms): CPU time of
	// the thread running it (Linux; wall time elsewhere).
	CallTimeout time.Duration
	// WallCap stops a call that is still running after this much wall
	// time whatever CPU it used (default 10 budgets and at least 10s).
	// The gateway's cap is 10 budgets; the kit's is looser by default
	// because it judges the plugin, not the machine: on a loaded machine
	// a call may wait long for a core without being a runaway, while a
	// guest blocked in a host call (sleeping) still fails.
	WallCap time.Duration
	// PoolSize is the number of instances the module is loaded with.
	PoolSize int
	// Logger receives the runtime's messages and the guest's log lines
	// (default: discard).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Host.PoolSize == 0 {
		o.Host.PoolSize = 2
	}
	if o.Host.CallTimeout == 0 {
		o.Host.CallTimeout = 100 * time.Millisecond
	}
	if o.Host.WallCap == 0 {
		o.Host.WallCap = max(10*o.Host.CallTimeout, 10*time.Second)
	}
	if o.Host.MemoryLimitMiB == 0 {
		o.Host.MemoryLimitMiB = 64
	}
	if o.Calls == 0 {
		o.Calls = 10000
		if raceEnabled {
			o.Calls = 1000
		}
	}
	if o.MaxGrowthMiB == 0 {
		o.MaxGrowthMiB = 8
	}
	if o.Now == 0 {
		o.Now = 1764000000000
	}
	return o
}

// Outcome of one check.
type Outcome string

// Outcomes.
const (
	Pass Outcome = "PASS"
	Fail Outcome = "FAIL"
	Skip Outcome = "SKIP" // could not run: an earlier failure explains why
	// Warn: nothing failed, but the check had nothing to check (a ledger
	// whose sample commands recorded no fact has nothing to replay). It
	// does not fail the report.
	Warn Outcome = "WARN"
)

// Result is one check's outcome.
type Result struct {
	Check   string // for example "determinism"
	Outcome Outcome
	Message string
}

// Report is the outcome of every check, in order.
type Report struct {
	Plugin  string // name@version, when the module described itself
	Results []Result
}

// The checks, in the order they run.
const (
	CheckExports        = "exports"
	CheckABIVersion     = "abi_version"
	CheckDescribe       = "describe"
	CheckLoad           = "load"
	CheckUnknownCommand = "unknown_command"
	CheckMalformedInput = "malformed_input"
	CheckDeterminism    = "determinism"
	CheckReplay         = "replay"
	CheckMemory         = "memory"
	CheckDeadline       = "deadline"
)

// Checks lists the checks in the order they run.
var Checks = []string{
	CheckExports, CheckABIVersion, CheckDescribe, CheckLoad, CheckUnknownCommand,
	CheckMalformedInput, CheckDeterminism, CheckReplay, CheckMemory, CheckDeadline,
}

// Passed reports whether no check failed.
func (r Report) Passed() bool {
	for _, res := range r.Results {
		if res.Outcome == Fail {
			return false
		}
	}
	return true
}

// Result returns the result of the named check.
func (r Report) Result(check string) (Result, bool) {
	for _, res := range r.Results {
		if res.Check == check {
			return res, true
		}
	}
	return Result{}, false
}

// Warnings returns the checks that passed with a warning.
func (r Report) Warnings() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Outcome == Warn {
			out = append(out, res)
		}
	}
	return out
}

// Failed returns the failed checks.
func (r Report) Failed() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Outcome == Fail {
			out = append(out, res)
		}
	}
	return out
}

// WriteTo writes one line per check and a summary line:
//
//	PASS exports          all 8 exports present with their signatures
//	FAIL determinism      decide "deposit" answered differently to the same input: ...
//	FAIL: 1 of 10 checks failed (account@1.0.0)
//
// A report with no failure but warnings ends "PASS: account@1.0.0 passes
// 10 checks, 1 with a warning".
func (r Report) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	for _, res := range r.Results {
		fmt.Fprintf(&b, "%s %-16s %s\n", res.Outcome, res.Check, res.Message)
	}
	failed, warned, name := len(r.Failed()), len(r.Warnings()), r.Plugin
	if name == "" {
		name = "the module"
	}
	if failed == 0 && warned > 0 {
		fmt.Fprintf(&b, "PASS: %s passes %d checks, %d with a warning\n", name, len(r.Results), warned)
	} else if failed == 0 {
		fmt.Fprintf(&b, "PASS: %s passes %d checks\n", name, len(r.Results))
	} else {
		fmt.Fprintf(&b, "FAIL: %d of %d checks failed (%s)\n", failed, len(r.Results), name)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// Test checks a module and writes the report to w; it returns whether
// no check failed (a warning does not fail). It is what `factline plugin test` runs.
func Test(ctx context.Context, w io.Writer, module []byte, opts Options) bool {
	r := Check(ctx, module, opts)
	_, _ = r.WriteTo(w)
	return r.Passed()
}

// Run checks a module in a test: every result is logged and every failed
// check is a test error (a warning is logged, not an error).
func Run(t testing.TB, module []byte, opts Options) Report {
	t.Helper()
	ctx := context.Background()
	if d, ok := t.(interface{ Context() context.Context }); ok {
		ctx = d.Context()
	}
	r := Check(ctx, module, opts)
	for _, res := range r.Results {
		if res.Outcome == Fail {
			t.Errorf("conformance: %s: %s", res.Check, res.Message)
		} else {
			t.Logf("conformance: %s %s: %s", res.Outcome, res.Check, res.Message)
		}
	}
	return r
}
