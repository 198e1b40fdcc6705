package projector_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factline/factline/internal/host/projection"
	"github.com/factline/factline/internal/host/projector"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// readCounter counts, per start position, the reads of the fact stream
// that found facts.
type readCounter struct {
	store.Store
	mu       sync.Mutex
	counting bool
	reads    map[int64]int
}

func (r *readCounter) ReadFacts(ctx context.Context, after int64, limit int) ([]store.Fact, error) {
	facts, err := r.Store.ReadFacts(ctx, after, limit)
	if err == nil && len(facts) > 0 {
		r.mu.Lock()
		if r.counting {
			r.reads[after]++
		}
		r.mu.Unlock()
	}
	return facts, err
}

func (r *readCounter) count(on bool) map[int64]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counting = on
	out := r.reads
	r.reads = map[int64]int{}
	return out
}

// waitAllReady waits for every named projection to answer consistently
// with want calls, and then for their readers to settle.
func waitAllReady(t *testing.T, s *projector.Service, names []string, want int) {
	t.Helper()
	for _, n := range names {
		waitConsistentNamed(t, s, n, want)
	}
	// A runtime turns ready while it handles its last backfill batch and
	// joins the shared reader right after.
	waitMembers(t, s, len(names))
}

// waitMembers waits until n runtimes are fed by the shared reader.
func waitMembers(t *testing.T, s *projector.Service, n int) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%d runtimes on the shared reader", n), func() bool {
		return len(s.GroupMembers()) == n
	})
}

// TestSharedTailReadsOnce: projections that have caught up are fed by one
// reader of the fact stream: every new batch is read once for all of
// them, not once per projection, and each still counts every fact once.
func TestSharedTailReadsOnce(t *testing.T) {
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			base := teststore.Open(t, backend)
			st := &readCounter{Store: base, reads: map[int64]int{}}
			createContact(t, st, "c1")
			start := factsSoFar()
			appendCalls(t, st, 200)
			names := []string{"p1", "p2", "p3", "p4"}
			for _, n := range names {
				createNamedConfig(t, st, "cfg_"+n, n, 2)
			}
			s := newService(t, st, stateFor(t, backend))
			waitAllReady(t, s, names, calls(start, 200))

			st.count(true)
			// Six batches, each taken by every projection before the next.
			for i := 1; i <= 6; i++ {
				appendCalls(t, st, 50)
				for _, n := range names {
					waitConsistentNamed(t, s, n, calls(start, 200+50*i))
				}
			}
			reads := st.count(false)
			if len(reads) == 0 {
				t.Fatal("no reads of the stream counted")
			}
			for after, n := range reads {
				if n > 1 {
					t.Fatalf("the facts after position %d were read %d times for %d caught-up projections (reads %v)", after, n, len(names), reads)
				}
			}
		})
	}
}

// failKeys is a go-redis hook that fails the commands naming a key that
// contains a given text while it is set.
type failKeys struct{ text atomic.Pointer[string] }

func (f *failKeys) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failKeys) hit(cmd redis.Cmder) bool {
	p := f.text.Load()
	if p == nil {
		return false
	}
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.Contains(s, *p) {
			return true
		}
	}
	return false
}

var errInjected = errors.New("injected failure")

func (f *failKeys) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.hit(cmd) {
			cmd.SetErr(errInjected)
			return errInjected
		}
		return next(ctx, cmd)
	}
}

func (f *failKeys) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if f.hit(c) {
				for _, c := range cmds {
					c.SetErr(errInjected)
				}
				return errInjected
			}
		}
		return next(ctx, cmds)
	}
}

// TestSharedTailFollowerFails: when one projection fed by the shared reader
// fails (its cached state refuses its writes), the others go on; the
// failed one reads on its own from its checkpoint until its state is back,
// joins again, and ends with every fact counted once.
func TestSharedTailFollowerFails(t *testing.T) {
	st := teststore.Open(t, "postgres")
	opt, err := redis.ParseURL(testutil.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	hook := &failKeys{}
	rdb.AddHook(hook)
	state := projection.NewRedisState(rdb).WithPrefix(fmt.Sprintf("tailfail%d:", time.Now().UnixNano()))
	createContact(t, st, "c1")
	start := factsSoFar()
	appendCalls(t, st, 100)
	names := []string{"f1", "f2", "f3"}
	for _, n := range names {
		createNamedConfig(t, st, "cfg_"+n, n, 2)
	}
	s := newService(t, st, state)
	waitAllReady(t, s, names, calls(start, 100))

	broken := ":cfg_f2:"
	hook.text.Store(&broken)
	appendCalls(t, st, 150)
	for _, n := range []string{"f1", "f3"} {
		waitConsistentNamed(t, s, n, calls(start, 250))
	}
	// f2 cannot have taken the new facts: its state answers an error or
	// the count from before.
	rows, _, err := s.Query(context.Background(), tenant, "f2", map[string]any{"aggregate": true})
	if err == nil && fmt.Sprint(rows[0].(map[string]any)["count"]) != fmt.Sprint(calls(start, 100)) {
		t.Fatalf("f2 took facts while its state refused writes: %v", rows)
	}
	hook.text.Store(nil)
	appendCalls(t, st, 50)
	for _, n := range names {
		waitConsistentNamed(t, s, n, calls(start, 300))
	}
	// Back on the shared reader: more facts reach all three.
	appendCalls(t, st, 50)
	for _, n := range names {
		waitConsistentNamed(t, s, n, calls(start, 350))
	}
}

// TestSharedTailJoinBehind: a projection that catches up while the shared
// reader is ahead of it, or behind it, joins without losing or repeating
// a fact, while writers keep appending.
func TestSharedTailJoinBehind(t *testing.T) {
	st := teststore.Open(t, "sqlite")
	createContact(t, st, "c1")
	start := factsSoFar()
	appendCalls(t, st, 300)
	createNamedConfig(t, st, "cfg_j1", "j1", 2)
	s := newService(t, st, projection.NewMemoryState())
	waitAllReady(t, s, []string{"j1"}, calls(start, 300))
	// Writers append in small batches while more projections backfill and
	// join one after another.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var appended atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		pace := time.NewTicker(5 * time.Millisecond) // load pacing, not ordering
		defer pace.Stop()
		for {
			select {
			case <-stop:
				return
			case <-pace.C:
			}
			appendCalls(t, st, 7)
			appended.Add(7)
		}
	}()
	names := []string{"j1"}
	for i := 2; i <= 5; i++ {
		n := fmt.Sprintf("j%d", i)
		createNamedConfig(t, st, "cfg_"+n, n, 2)
		names = append(names, n)
		waitMembers(t, s, i)
	}
	// Keep appending past the last join.
	after := appended.Load() + 70
	testutil.Eventually(t, 30*time.Second, "appends after the last join", func() bool { return appended.Load() >= after })
	close(stop)
	wg.Wait()
	total := 300 + int(appended.Load())
	for _, n := range names {
		waitConsistentNamed(t, s, n, calls(start, total))
	}
}

// TestSharedTailDecodesOnce: the projections fed by the shared reader
// share the decoded facts of each batch: every fact is decoded once, not
// once per projection.
func TestSharedTailDecodesOnce(t *testing.T) {
	for _, backend := range teststore.Backends {
		t.Run(backend, func(t *testing.T) {
			st := teststore.Open(t, backend)
			createContact(t, st, "c1")
			start := factsSoFar()
			appendCalls(t, st, 50)
			names := []string{"p1", "p2", "p3", "p4"}
			for _, n := range names {
				createNamedConfig(t, st, "cfg_"+n, n, 2)
			}
			s := newService(t, st, stateFor(t, backend))
			waitAllReady(t, s, names, calls(start, 50))

			before := s.Decodes()
			for i := 1; i <= 4; i++ {
				appendCalls(t, st, 50)
				for _, n := range names {
					waitConsistentNamed(t, s, n, calls(start, 50+50*i))
				}
			}
			want := int64(calls(start+50, 200))
			if got := s.Decodes() - before; got != want {
				t.Fatalf("%d facts decoded for %d new call facts and %d projections, want each decoded once", got, want, len(names))
			}
		})
	}
}
