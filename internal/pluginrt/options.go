package pluginrt

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"time"
)

// The bounds of an instance's memory cap (Options.MemoryLimitMiB).
const (
	MinMemoryLimitMiB = 8
	MaxMemoryLimitMiB = 4096
)

// Options configure a Host. The zero value is usable: every field has a
// default.
type Options struct {
	// CacheDir is the directory of wazero's compilation cache on disk,
	// shared by every runtime of the host and by later processes. Empty
	// keeps compiled code in memory only.
	CacheDir string
	// MemoryLimitMiB caps the linear memory of each instance (default 64,
	// at least 8, at most 4096). A guest growing past it traps.
	MemoryLimitMiB int
	// CallTimeout is the budget of one call into a guest (default 100ms):
	// CPU time of the thread running it (Linux; wall time elsewhere), so a
	// call starved of CPU on a loaded machine is not taken for a runaway.
	// A guest that has used its budget, or is still running after
	// WallCap, is stopped and its instance discarded.
	CallTimeout time.Duration
	// WallCap is the longest a call may take in wall time whatever CPU it
	// used (default 10 times CallTimeout, at least CallTimeout): what
	// stops a guest blocked in a host function or starved for good.
	WallCap time.Duration
	// PoolSize is the number of instances kept per loaded plugin version
	// (default 2*GOMAXPROCS, at most 1024).
	PoolSize int
	// beforeFill, when set (tests), runs before the background filling of
	// a loaded plugin's pool starts.
	beforeFill func()
	// DisableDeadline compiles guests without close-on-context-done and
	// runs calls without a deadline. Benchmarks only: a looping guest then
	// hangs its caller forever.
	DisableDeadline bool
	// Logger receives the host's own messages and the guests' log lines
	// (default: discard).
	Logger *slog.Logger
	// Observer hears of every call of every plugin version the host
	// loads (nil: none). The gateway's Prometheus metrics are one
	// (internal/host/wasm); this package imports no metrics library.
	Observer Observer
}

// Observer hears of the calls of the plugin versions a Host loads.
type Observer interface {
	// Loaded is called once a version has loaded; the Recorder it returns
	// (nil: none) gets every call of that version.
	Loaded(plugin, version string) Recorder
}

// Recorder records the calls of one loaded plugin version.
type Recorder interface {
	// Record is called after each call, on the caller's goroutine, with
	// how long the call took, waiting for an instance included.
	Record(c Call, o Outcome, d time.Duration)
	// Closed is called once, when the version has closed.
	Closed()
}

// Limits the ABI sets.
const (
	// MaxOutputBytes is the largest output a call may return (sdk/ABI.md).
	MaxOutputBytes = 4 << 20
	// gomemlimitHeadroomMiB is how far below the memory cap GOMEMLIMIT
	// is set, so a Go guest's collector works hard before the cap traps.
	gomemlimitHeadroomMiB = 8
	// minInitTimeout bounds instantiation (the guest's _initialize).
	minInitTimeout = 2 * time.Second
)

func (o Options) withDefaults() (Options, error) {
	if o.MemoryLimitMiB == 0 {
		o.MemoryLimitMiB = 64
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = 100 * time.Millisecond
	}
	if o.WallCap == 0 {
		o.WallCap = hardCapFactor * o.CallTimeout
	}
	o.WallCap = max(o.WallCap, o.CallTimeout)
	if o.PoolSize == 0 {
		o.PoolSize = 2 * runtime.GOMAXPROCS(0)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var errs []error
	if o.MemoryLimitMiB < MinMemoryLimitMiB || o.MemoryLimitMiB > MaxMemoryLimitMiB {
		errs = append(errs, fmt.Errorf("MemoryLimitMiB %d: want %d..%d", o.MemoryLimitMiB, MinMemoryLimitMiB, MaxMemoryLimitMiB))
	}
	if o.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("CallTimeout %v: want > 0", o.CallTimeout))
	}
	if o.PoolSize < 0 || o.PoolSize > 1024 {
		errs = append(errs, fmt.Errorf("PoolSize %d: want 1..1024", o.PoolSize))
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("wasm: options: %w", err)
	}
	return o, nil
}

// memoryLimitPages is the cap in 64 KiB wasm pages.
func (o Options) memoryLimitPages() uint32 { return uint32(o.MemoryLimitMiB) * 16 }

// gomemlimit is the GOMEMLIMIT a Go guest gets: the cap minus 8 MiB, or
// three quarters of a small cap.
func (o Options) gomemlimit() string {
	mib := o.MemoryLimitMiB - gomemlimitHeadroomMiB
	if alt := o.MemoryLimitMiB * 3 / 4; mib < alt {
		mib = alt
	}
	return fmt.Sprintf("%dMiB", mib)
}

// initTimeout is the CPU budget of one instantiation (and of the
// describe calls after it), with a wall cap of 10 times it.
func (o Options) initTimeout() time.Duration {
	return max(20*o.CallTimeout, minInitTimeout)
}
