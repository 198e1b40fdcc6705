package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// dirPrefix starts the name of every directory this package creates under
// the temporary directory; sweepStale looks for it.
const dirPrefix = "factline-testutil-"

// ownerFile, inside a server directory, names the process that owns it.
const ownerFile = "owner"

// servers is the state of one test binary: the servers it started and
// whether Main is running.
var servers = struct {
	mu      sync.Mutex
	main    bool
	stopped bool
	stops   []func() error  // in start order; run in reverse
	swept   map[string]bool // base directories swept of stale servers
}{}

// Main runs the tests of m, then stops every server this binary started and
// exits with the code of m.Run. Servers are also stopped when the process
// receives SIGINT, SIGTERM or SIGHUP.
//
// When the tests pass, Main then fails the binary if goroutines are left
// running (go.uber.org/goleak), apart from the known long-lived ones in
// leakIgnores and those ignore names: a service a test started and never
// stopped shows up here.
func Main(m *testing.M, ignore ...goleak.Option) {
	servers.mu.Lock()
	servers.main = true
	servers.mu.Unlock()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(os.Stderr, "testutil: %v: stopping test servers\n", s)
			if err := stopAll(); err != nil {
				fmt.Fprintf(os.Stderr, "testutil: %v\n", err)
			}
			code := 1
			if n, ok := s.(syscall.Signal); ok {
				code = 128 + int(n)
			}
			os.Exit(code)
		case <-done:
		}
	}()

	code := m.Run()
	signal.Stop(sig)
	close(done)
	if err := stopAll(); err != nil {
		fmt.Fprintf(os.Stderr, "testutil: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if code == 0 {
		if err := findLeaks(append(leakIgnores(), ignore...)); err != nil {
			fmt.Fprintf(os.Stderr, "testutil: goroutines left running after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakWait is how long goroutines may take to end after the tests:
// fasthttp's idle-worker cleaner sees a server's Shutdown only when its
// 10 s sleep ends. FACTLINE_TESTUTIL_LEAK_WAIT (a duration) sets another
// for a binary that leaks on purpose (TestMainFailsOnLeftGoroutines).
const leakWait = 15 * time.Second

// findLeaks polls goleak until no unexpected goroutine is left or
// leakWait has passed.
func findLeaks(opts []goleak.Option) error {
	wait := leakWait
	if d, err := time.ParseDuration(os.Getenv("FACTLINE_TESTUTIL_LEAK_WAIT")); err == nil {
		wait = d
	}
	deadline := time.Now().Add(wait)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// leakIgnores are goroutines that outlive every test on purpose; each
// has its reason.
func leakIgnores() []goleak.Option {
	return []goleak.Option{
		// Main's own signal handling: Notify starts the runtime's signal
		// loop, which never ends.
		goleak.IgnoreTopFunction("os/signal.signal_recv"),
		goleak.IgnoreTopFunction("os/signal.loop"),
		// fasthttp refreshes the Date header of every server once a
		// second from one goroutine it starts on first use and never ends.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// A stopped server's worker pool cleaner ends when it next wakes,
		// up to 10 s later (fasthttp's MaxIdleWorkerDuration): waiting for
		// it cost every package that serves HTTP 10 s at exit.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	}
}

// requireMain fails t when the test binary does not run through Main, since
// its servers would then outlive it.
func requireMain(t testing.TB) {
	t.Helper()
	servers.mu.Lock()
	ok, stopped := servers.main, servers.stopped
	servers.mu.Unlock()
	if !ok {
		t.Fatal("testutil: this package starts test servers but its TestMain does not call testutil.Main; " +
			"add `func TestMain(m *testing.M) { testutil.Main(m) }`")
	}
	if stopped {
		t.Fatal("testutil: test servers were already stopped")
	}
}

// onStop registers fn to run when the binary's servers are stopped.
func onStop(fn func() error) {
	servers.mu.Lock()
	defer servers.mu.Unlock()
	servers.stops = append(servers.stops, fn)
}

// TempDir creates a directory, named from prefix, under the temporary
// directory for what a test binary's tests share (built plugins, a
// compilation cache). Main removes it after the tests, or on a signal;
// the binary must run through Main. t.TempDir is the one for a single
// test's files.
func TempDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", fmt.Errorf("testutil: %w", err)
	}
	onStop(func() error { return os.RemoveAll(dir) })
	return dir, nil
}

// stopAll runs every registered stop function once, newest first.
func stopAll() error {
	servers.mu.Lock()
	stops := servers.stops
	servers.stops = nil
	servers.stopped = true
	servers.mu.Unlock()
	var errs []error
	for i := len(stops) - 1; i >= 0; i-- {
		errs = append(errs, stops[i]())
	}
	return errors.Join(errs...)
}

// newServerDir creates a private directory for one server and records this
// process as its owner before anything else can find it. inMemory asks for
// a memory-backed file system (/dev/shm) when there is one.
func newServerDir(kind string, inMemory bool) (string, error) {
	tempDir, err := tempBase()
	if err != nil {
		return "", err
	}
	sweepOnce(tempDir)
	base := tempDir
	if inMemory {
		if m, ok := memoryBase(); ok {
			base = m
		}
	}
	dir, err := serverDirIn(base, kind)
	if err != nil && base != tempDir {
		dir, err = serverDirIn(tempDir, kind) // /dev/shm refused us
	}
	return dir, err
}

func serverDirIn(base, kind string) (string, error) {
	sweepOnce(base)
	dir, err := os.MkdirTemp(base, dirPrefix+kind+"-")
	if err != nil {
		return "", fmt.Errorf("create server directory: %w", err)
	}
	owner := strconv.Itoa(os.Getpid()) + " " + processStart(os.Getpid()) + "\n"
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("create server directory: %w", err)
	}
	return dir, nil
}

// tempBase returns the directory that holds server directories. As root it
// must be searchable by the postgres user, which a private TMPDIR may not be.
func tempBase() (string, error) {
	base := os.TempDir()
	if os.Geteuid() != 0 || worldSearchable(base) {
		return base, nil
	}
	if worldSearchable("/tmp") {
		return "/tmp", nil
	}
	return "", fmt.Errorf("neither %s nor /tmp is searchable by other users", base)
}

// memoryBase returns /dev/shm when it is a directory other users can
// search (the postgres user, as root).
func memoryBase() (string, bool) {
	const shm = "/dev/shm"
	fi, err := os.Stat(shm)
	if err != nil || !fi.IsDir() || !worldSearchable(shm) {
		return "", false
	}
	return shm, true
}

// worldSearchable reports whether every directory on the path to dir lets
// other users through.
func worldSearchable(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// processStart returns the start time of process pid in clock ticks since
// boot (field 22 of /proc/PID/stat), or "" when it cannot be read. Together
// with the pid it identifies a process even after its pid is reused.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}

// ownerAlive reports whether the process recorded in an owner file still
// runs.
func ownerAlive(content string) bool {
	f := strings.Fields(content)
	if len(f) == 0 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	if len(f) > 1 {
		if start := processStart(pid); start != "" && start != f[1] {
			return false // the pid now belongs to another process
		}
	}
	return true
}

// sweepOnce runs sweepStale the first time a server is started.
func sweepOnce(base string) {
	servers.mu.Lock()
	if servers.swept[base] {
		servers.mu.Unlock()
		return
	}
	if servers.swept == nil {
		servers.swept = make(map[string]bool)
	}
	servers.swept[base] = true
	servers.mu.Unlock()
	sweepStale(base)
}

// sweepStale stops the servers of test binaries that died without stopping
// them and removes their directories. A directory without an owner file is
// being created, unless it is an hour old.
func sweepStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		owner, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) || time.Since(fi.ModTime()) < time.Hour {
				continue
			}
		} else if ownerAlive(string(owner)) {
			continue
		}
		// PostgreSQL: SIGQUIT is an immediate shutdown of the postmaster.
		killPIDFile(filepath.Join(dir, "data", "postmaster.pid"), syscall.SIGQUIT)
		killPIDFile(filepath.Join(dir, redisPIDFile), syscall.SIGKILL)
		os.RemoveAll(dir)
	}
}

// killPIDFile sends sig to the process whose pid is the first line of path
// and waits up to 5s for it to exit.
func killPIDFile(path string, sig syscall.Signal) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return
	}
	if syscall.Kill(pid, sig) != nil {
		return
	}
	waitExit(pid, 5*time.Second)
}

// waitExit polls until process pid is gone or timeout passes.
func waitExit(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || zombie(pid) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// zombie reports whether pid has exited but was not reaped yet (a daemon
// whose parent is a PID 1 that does not reap).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}
