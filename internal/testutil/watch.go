package testutil

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// WatchRecorder is an entity watcher (store.EntityWatcher) for the stores'
// feed tests: it queues what it is told as lines ("changed tenant/id",
// "resync live", "resync down") and fails the test when a call starts
// while another is running, which the watch contract rules out.
type WatchRecorder struct {
	t      testing.TB
	events chan string
	empty  atomic.Bool // what Empty answers

	mu     sync.Mutex
	inCall bool
}

// watchWait bounds every wait for a watcher to hear of a change.
const watchWait = 30 * time.Second

// NewWatchRecorder returns a recorder that holds up to 10,000 calls.
func NewWatchRecorder(t testing.TB) *WatchRecorder {
	return &WatchRecorder{t: t, events: make(chan string, 10000)}
}

func (r *WatchRecorder) enter() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inCall {
		r.t.Error("the watcher was called while another call was running")
	}
	r.inCall = true
}

func (r *WatchRecorder) leave() {
	r.mu.Lock()
	r.inCall = false
	r.mu.Unlock()
}

// EntityChanged records "changed tenantID/id".
func (r *WatchRecorder) EntityChanged(tenantID, id string) {
	r.enter()
	defer r.leave()
	r.events <- "changed " + tenantID + "/" + id
}

// Resync records "resync live" or "resync down".
func (r *WatchRecorder) Resync(live bool) {
	r.enter()
	defer r.leave()
	if live {
		r.events <- "resync live"
	} else {
		r.events <- "resync down"
	}
}

// Empty answers what SetEmpty last set (false at first).
func (r *WatchRecorder) Empty() bool {
	r.enter()
	defer r.leave()
	return r.empty.Load()
}

// SetEmpty sets what Empty answers.
func (r *WatchRecorder) SetEmpty(empty bool) { r.empty.Store(empty) }

// Next waits up to 30 s for the next call and checks it is want.
func (r *WatchRecorder) Next(t testing.TB, want string) {
	t.Helper()
	select {
	case got := <-r.events:
		if got != want {
			t.Fatalf("watcher got %q, want %q", got, want)
		}
	case <-time.After(watchWait):
		t.Fatalf("watcher got nothing in %v, want %q", watchWait, want)
	}
}

// None checks that no call is queued now; after says what came before.
func (r *WatchRecorder) None(t testing.TB, after string) {
	t.Helper()
	select {
	case got := <-r.events:
		t.Fatalf("after %s the watcher got %q, want nothing", after, got)
	default:
	}
}

// QuietFor checks that no call arrives within d.
func (r *WatchRecorder) QuietFor(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case got := <-r.events:
		t.Fatalf("watcher got %q, want nothing", got)
	case <-time.After(d):
	}
}
