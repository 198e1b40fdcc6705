//go:build !linux

package pluginrt

import "time"

// threadClock has no per-thread CPU clock to read outside Linux: the
// budget is then wall time, as the hard cap is.
type threadClock struct{}

func currentThreadClock() threadClock { return threadClock{} }

func (threadClock) now() (time.Duration, bool) { return 0, false }
