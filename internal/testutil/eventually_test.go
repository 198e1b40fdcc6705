package testutil_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factline/factline/internal/testutil"
)

// fatalTB records a Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestEventually(t *testing.T) {
	t.Parallel()
	t.Run("returns once the condition holds", func(t *testing.T) {
		t.Parallel()
		var n atomic.Int32
		testutil.Eventually(t, 30*time.Second, "three calls", func() bool { return n.Add(1) == 3 })
		if n.Load() != 3 {
			t.Fatalf("%d calls, want 3", n.Load())
		}
	})
	t.Run("fails with the last error after the timeout", func(t *testing.T) {
		t.Parallel()
		f := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			testutil.EventuallyNil(f, 20*time.Millisecond, func() error { return errors.New("still 3 rows") })
		}()
		<-done
		if !strings.Contains(f.msg, "still 3 rows") || !strings.Contains(f.msg, "20ms") {
			t.Fatalf("failure %q does not name the timeout and the last error", f.msg)
		}
	})
	t.Run("names what it waited for", func(t *testing.T) {
		t.Parallel()
		f := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			testutil.Eventually(f, time.Millisecond, "the checkpoint", func() bool { return false })
		}()
		<-done
		if !strings.Contains(f.msg, "the checkpoint") {
			t.Fatalf("failure %q does not name what it waited for", f.msg)
		}
	})
}
