package conformance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factline/factline/sdk/conformance"
)

// fixtures are the modules under testdata, built once in TestMain.
var (
	fixtures   = map[string][]byte{}
	fixtureErr error
)

var fixtureNames = []string{"noexport", "badabi", "trap", "loop", "sleeps", "hog", "nondeterministic", "panics", "points", "bytesdata", "unstorable"}

func TestMain(m *testing.M) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range fixtureNames {
		wg.Go(func() { // conformance.Build runs at most two builds at once
			b, err := conformance.Build(context.Background(), filepath.Join("testdata", name))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fixtureErr = err
				return
			}
			fixtures[name] = b
		})
	}
	wg.Wait()
	os.Exit(m.Run())
}

// options: a deadline of a second rather than the host's 100ms, so that a
// test machine busy with other tests does not stop a sound call (a Go
// guest's collector can pause a call for tens of milliseconds); a loop is
// stopped all the same.
func options() conformance.Options {
	return conformance.Options{Host: conformance.HostOptions{
		CacheDir:    filepath.Join(os.TempDir(), "factline-wazero-cache"),
		CallTimeout: time.Second,
	}}
}

// followupModule is the repo's followup subscription plugin, built once.
var followupModule = sync.OnceValues(func() ([]byte, error) {
	return conformance.Build(context.Background(), filepath.Join("..", "..", "plugins", "followup"))
})

func followup(t testing.TB) []byte {
	t.Helper()
	b, err := followupModule()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixtures[name]
}

// TestBrokenFixtures: each broken module fails exactly the check that
// concerns it, with a message that says what is wrong.
func TestBrokenFixtures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fixture, check, message string
	}{
		{"noexport", conformance.CheckExports, "missing export factline_evolve"},
		{"badabi", conformance.CheckABIVersion, "factline_abi_version returned 2; this kit and the host implement ABI version 1"},
		{"trap", conformance.CheckMalformedInput, "did not answer with an error reply: factline_decide trapped"},
		{"loop", conformance.CheckDeadline, `ran past the 1s deadline and were stopped by the host, first decide spin (stopped with `},
		{"hog", conformance.CheckMemory, "memory grew from"},
		{"nondeterministic", conformance.CheckDeterminism, `decide "stamp" (thing, input {}) answered differently to the same input`},
		{"bytesdata", conformance.CheckReplay, `command "note" recorded a "noted" fact whose data is not a JSON object: "eyJ0ZXh0IjoiaGkifQ=="`},
		{"unstorable", conformance.CheckReplay, `command "note" recorded a "noted" fact whose data.text must not contain NUL characters`},
		// The SDK recovers the panic into an error reply (status 5), so no
		// trap; but the host answers every such call 500, and the kit
		// passed the module.
		{"panics", conformance.CheckReplay, `command "explode" panicked on the sample input {} (boom); the host answers such a call 500`},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			r := conformance.Check(t.Context(), fixture(t, tc.fixture), options())
			var report strings.Builder
			r.WriteTo(&report)
			t.Log("\n" + report.String())
			if r.Passed() {
				t.Fatal("the broken fixture passed")
			}
			failed := r.Failed()
			if len(failed) != 1 || failed[0].Check != tc.check {
				t.Fatalf("failed checks %v, want only %s", failed, tc.check)
			}
			if !strings.Contains(failed[0].Message, tc.message) {
				t.Fatalf("%s says %q, want it to contain %q", tc.check, failed[0].Message, tc.message)
			}
			if len(r.Results) != len(conformance.Checks) {
				t.Fatalf("%d results, want one per check", len(r.Results))
			}
		})
	}
}

// TestSleepingCommandIsStopped: a command that sleeps (time.Sleep waits
// in a host function, out of close-on-context-done's reach) is stopped at
// the deadline like a loop; the kit does not wait for it to wake.
func TestSleepingCommandIsStopped(t *testing.T) {
	t.Parallel()
	// A sleeping call uses no CPU: the wall-time cap stops it.
	opts := options()
	opts.Host.WallCap = 2 * time.Second
	done := make(chan conformance.Report, 1)
	go func() { done <- conformance.Check(t.Context(), fixture(t, "sleeps"), opts) }()
	var r conformance.Report
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the kit still waits for a sleeping command after two minutes")
	}
	failed := r.Failed()
	if len(failed) != 1 || failed[0].Check != conformance.CheckDeadline {
		t.Fatalf("failed checks %v, want only %s", failed, conformance.CheckDeadline)
	}
}

// TestReplayWithNothingToReplayWarns: a ledger whose sample commands
// record no fact gets a WARN replay line, not a PASS, and the report still
// passes; the inputs given for a command feed the replay check.
func TestReplayWithNothingToReplayWarns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		inputs  map[string][]string
		outcome conformance.Outcome
		message string
		summary string
	}{
		{"no inputs", nil, conformance.Warn, "nothing to replay", "PASS: points@1.0.0 passes 10 checks, 1 with a warning"},
		{"refused inputs", map[string][]string{"earn": {`{"points":0}`}}, conformance.Warn, "nothing to replay", "1 with a warning"},
		{"accepted inputs", map[string][]string{"earn": {`{"points":5}`, `{"points":0}`}}, conformance.Pass,
			"2 facts recorded over 1 entity types", "PASS: points@1.0.0 passes 10 checks\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := options()
			opts.Inputs = tc.inputs
			opts.Calls = 200
			r := conformance.Check(t.Context(), fixture(t, "points"), opts)
			var out strings.Builder
			r.WriteTo(&out)
			res, _ := r.Result(conformance.CheckReplay)
			if res.Outcome != tc.outcome || !strings.Contains(res.Message, tc.message) {
				t.Fatalf("replay: %s %q, want %s %q\n%s", res.Outcome, res.Message, tc.outcome, tc.message, out.String())
			}
			if !r.Passed() || !strings.Contains(out.String(), tc.summary) {
				t.Fatalf("report (passed %v), want %q:\n%s", r.Passed(), tc.summary, out.String())
			}
		})
	}
}

// TestSampleForAnUndescribedCommandFails: an input given for a command
// the plugin does not describe (a misspelt --input) would be used by no
// check; replay fails naming it and the commands there are.
func TestSampleForAnUndescribedCommandFails(t *testing.T) {
	t.Parallel()
	opts := options()
	opts.Inputs = map[string][]string{"earn": {`{"points":5}`}, "eran": {`{"points":5}`}}
	opts.Calls = 200
	r := conformance.Check(t.Context(), fixture(t, "points"), opts)
	res, _ := r.Result(conformance.CheckReplay)
	const want = `a sample input is given for command "eran", which the plugin does not describe (its commands: earn, points, append)`
	if r.Passed() || res.Outcome != conformance.Fail || res.Message != want {
		t.Fatalf("replay: %s %q, want FAIL %q", res.Outcome, res.Message, want)
	}
	// A subscription serves no commands at all.
	opts.Inputs = map[string][]string{"nosuch": {`{}`}}
	r = conformance.Check(t.Context(), followup(t), opts)
	res, _ = r.Result(conformance.CheckReplay)
	if r.Passed() || res.Outcome != conformance.Fail || !strings.Contains(res.Message, `a sample input is given for command "nosuch", but a subscription serves no commands`) {
		t.Fatalf("a subscription given a command input: %s %q", res.Outcome, res.Message)
	}
}

// TestUnstorableStateFails: a state evolve returns that no store can hold
// (here with a NUL) fails replay, as the host refuses it.
func TestUnstorableStateFails(t *testing.T) {
	t.Parallel()
	opts := options()
	opts.Inputs = map[string][]string{"note": {`{"where":"state"}`}}
	opts.Calls = 200
	r := conformance.Check(t.Context(), fixture(t, "unstorable"), opts)
	res, _ := r.Result(conformance.CheckReplay)
	if r.Passed() || res.Outcome != conformance.Fail || !strings.Contains(res.Message, `evolve of a "noted" fact returned a state whose state.last must not contain NUL characters`) {
		t.Fatalf("replay: %s %q", res.Outcome, res.Message)
	}
}

func TestNotAModule(t *testing.T) {
	t.Parallel()
	r := conformance.Check(t.Context(), []byte("not wasm"), options())
	res, _ := r.Result(conformance.CheckExports)
	if res.Outcome != conformance.Fail || !strings.Contains(res.Message, "not a WebAssembly module") {
		t.Fatalf("exports: %+v", res)
	}
	for _, res := range r.Results[1:] {
		if res.Outcome != conformance.Skip {
			t.Fatalf("%s: %s", res.Check, res.Outcome)
		}
	}
}

func ExampleCheck() {
	r := conformance.Check(context.Background(), fixtures["nondeterministic"], options())
	for _, res := range r.Results {
		fmt.Println(res.Outcome, res.Check)
	}
	fmt.Println(r.Passed())
	// Output:
	// PASS exports
	// PASS abi_version
	// PASS describe
	// PASS load
	// PASS unknown_command
	// PASS malformed_input
	// FAIL determinism
	// PASS replay
	// PASS memory
	// PASS deadline
	// false
}

// Test writes the report `factline plugin test` prints: one line per check
// and a summary.
func ExampleTest() {
	var out strings.Builder
	ok := conformance.Test(context.Background(), &out, fixtures["badabi"], options())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	fmt.Println(ok)
	fmt.Println(lines[1])
	fmt.Println(lines[len(lines)-1])
	// Output:
	// false
	// FAIL abi_version      factline_abi_version returned 2; this kit and the host implement ABI version 1
	// FAIL: 1 of 10 checks failed (raw@1.0.0)
}

func ExampleBuild() {
	module, err := conformance.Build(context.Background(), "testdata/panics")
	fmt.Println(err, string(module[:4]) == "\x00asm")
	// Output: <nil> true
}

func ExampleReport_WriteTo() {
	r := conformance.Report{Plugin: "demo@1.0.0", Results: []conformance.Result{
		{Check: conformance.CheckExports, Outcome: conformance.Pass, Message: "all 8 exports present"},
		{Check: conformance.CheckMemory, Outcome: conformance.Fail, Message: "memory grew from 8.0 MiB to 64.0 MiB"},
	}}
	r.WriteTo(os.Stdout)
	fmt.Println(slices.Collect(func(yield func(string) bool) {
		for _, f := range r.Failed() {
			yield(f.Check)
		}
	}))
	// Output:
	// PASS exports          all 8 exports present
	// FAIL memory           memory grew from 8.0 MiB to 64.0 MiB
	// FAIL: 1 of 2 checks failed (demo@1.0.0)
	// [memory]
}

// TestSoundPluginPassesOnABusyMachine: with the gateway's 100ms budget,
// a sound plugin checked while every P of the Go scheduler is busy with
// spinning goroutines (a call then waits for a core most of its wall
// time) passes: calls are bounded by their CPU time, the raw probes as
// much as the pooled calls. (Not parallel: it loads the machine.)
func TestSoundPluginPassesOnABusyMachine(t *testing.T) {
	opts := options()
	opts.Host.CallTimeout = 100 * time.Millisecond
	opts.Inputs = map[string][]string{"earn": {`{"points":5}`}}
	opts.Calls = 200
	var quit atomic.Bool
	var wg sync.WaitGroup
	// Twice as many spinners as Ps: a call gets about a third of a core,
	// so it waits for one most of its wall time and would pass 100ms of
	// wall time long before its CPU time. More spinners only make the
	// test take longer.
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for n := 0; !quit.Load(); n++ {
			}
		})
	}
	r := conformance.Check(t.Context(), fixture(t, "points"), opts)
	quit.Store(true)
	wg.Wait()
	if !r.Passed() {
		var out strings.Builder
		r.WriteTo(&out)
		t.Fatalf("a sound plugin failed on a busy machine:\n%s", out.String())
	}
}
