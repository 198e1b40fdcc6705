//go:build linux

package pluginrt

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadClock reads the CPU time of one OS thread, from any thread of the
// process: Linux gives every thread a CPU clock, (^tid)<<3 | CPUCLOCK_SCHED
// | CPUCLOCK_PERTHREAD (MAKE_THREAD_CPUCLOCK in the kernel).
type threadClock struct{ id int32 }

// currentThreadClock is the clock of the calling thread; the caller has
// locked its goroutine to the thread.
func currentThreadClock() threadClock {
	return threadClock{id: int32(^uint32(unix.Gettid())<<3 | 6)}
}

// now is the thread's CPU time; ok is false when it cannot be read (the
// call then falls back to wall time).
func (c threadClock) now() (d time.Duration, ok bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(c.id, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
