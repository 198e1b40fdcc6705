package app_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/factline/factline/internal/testutil"
)

// racePause is how long each load worker waits between its requests under
// the race detector. Back to back, a few workers there take both cores
// for the whole test, and what the test exercises beside the load (a swap,
// a domain change, a failing plugin) then waits for a core; paced, the
// requests still run concurrently with it. Without the race detector
// workers run back to back, which the hot-swap test's load floor needs.
const racePause = 10 * time.Millisecond

// load is requests sent by several workers until Stop: each request
// answers a status, and one other than want counts as a failure.
type load struct {
	ok, failed atomic.Int64
	stop       chan struct{}
	stopOnce   sync.Once
	wg         sync.WaitGroup
	start      time.Time

	mu       sync.Mutex
	failures []string // the statuses that failed, in order
}

// startLoad starts workers goroutines sending request until Stop.
func startLoad(workers, want int, request func() int) *load {
	ld := &load{stop: make(chan struct{}), start: time.Now()}
	for range workers {
		ld.wg.Go(func() {
			for {
				select {
				case <-ld.stop:
					return
				default:
				}
				if code := request(); code == want {
					ld.ok.Add(1)
				} else {
					ld.failed.Add(1)
					ld.mu.Lock()
					ld.failures = append(ld.failures, fmt.Sprint(code))
					ld.mu.Unlock()
				}
				if testutil.Race {
					select {
					case <-ld.stop:
						return
					case <-time.After(racePause):
					}
				}
			}
		})
	}
	return ld
}

// Stop stops the workers and waits for their requests in flight; it may
// be called more than once.
func (ld *load) Stop() {
	ld.stopOnce.Do(func() { close(ld.stop) })
	ld.wg.Wait()
}

// Rate is the successful requests per second since the load started.
func (ld *load) Rate() float64 { return float64(ld.ok.Load()) / time.Since(ld.start).Seconds() }

// Failures returns the statuses of the failed requests.
func (ld *load) Failures() []string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return append([]string(nil), ld.failures...)
}
