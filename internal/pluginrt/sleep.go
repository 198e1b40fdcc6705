package pluginrt

import (
	"context"
	"sync"
	"time"
)

// Sleeper is one instance's nanosleep (wazero.ModuleConfig.WithNanosleep).
// A guest that sleeps (time.Sleep, or a Go scheduler with every goroutine
// waiting on a timer) waits in WASI's poll_oneoff, a host function, where
// close-on-context-done cannot stop it: wazero checks the context at the
// guest's loop edges and calls only. A call's deadline then went unheeded
// for as long as the guest asked to sleep. A Sleeper's sleep ends early
// once the context of the current call (Watch) is done, and the guest is
// stopped at its next check.
type Sleeper struct {
	mu   sync.Mutex
	done <-chan struct{}
}

// Watch makes sleeps end once ctx is done. Call it before each call into
// the instance (and before instantiating it: init may sleep too).
func (s *Sleeper) Watch(ctx context.Context) {
	s.mu.Lock()
	s.done = ctx.Done()
	s.mu.Unlock()
}

// Sleep is the nanosleep function.
func (s *Sleeper) Sleep(ns int64) {
	if ns <= 0 {
		return
	}
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}
