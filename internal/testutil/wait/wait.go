// Package wait holds the one way tests wait for background work: poll a
// condition until a deadline. It imports only the standard library, so
// the tests of packages a plugin module depends on (internal/pluginrt)
// can use it without adding testutil's servers to the module's go.sum.
package wait

import (
	"testing"
	"time"
)

// Eventually polls cond until it reports true and fails t when timeout
// passes first, naming what it waited for. It is the one way tests wait
// for background work: on a loaded machine nothing runs within a fixed
// time, so give it a timeout of 30 s or more, never a sleep.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyNil(t, timeout, func() error {
		if cond() {
			return nil
		}
		return errNotYet(what)
	})
}

type errNotYet string

func (e errNotYet) Error() string { return "waiting for " + string(e) }

// EventuallyNil polls try until it returns nil and fails t with the last
// error when timeout passes first.
func EventuallyNil(t testing.TB, timeout time.Duration, try func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", timeout, err)
		}
		// The one sleep tests may use: the interval of a poll with a deadline.
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}
