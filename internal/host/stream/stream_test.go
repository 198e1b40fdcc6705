package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/factline/factline/internal/host/id"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/stream"
	"github.com/factline/factline/internal/teststore"
	tu "github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { tu.Main(m) }

func forEachBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, b := range teststore.Backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// appendN appends n entity-less facts, one AppendFacts call each.
func appendN(t *testing.T, st store.Store, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		appendOne(t, st)
	}
}

func appendOne(t *testing.T, st store.Store) store.Fact {
	t.Helper()
	now := time.Now().UnixMilli()
	res, err := st.AppendFacts(context.Background(), []store.Append{{Fact: store.Fact{
		ID: id.New(id.Fact), TenantID: "t1", Type: "tick", Timestamp: now, CreatedAt: now, Data: json.RawMessage(`{}`),
	}}})
	if err != nil || res[0].Err != nil {
		t.Errorf("append: %v %v", err, res)
		return store.Fact{}
	}
	return res[0].Fact
}

// collector records what a consumer handled and signals when it has seen
// a position.
type collector struct {
	mu        sync.Mutex
	positions []int64
	changed   chan struct{}
	fail      atomic.Int32 // fail this many more batches
}

func newCollector() *collector { return &collector{changed: make(chan struct{}, 1)} }

func (c *collector) handle(_ context.Context, facts []store.Fact) error {
	if c.fail.Load() > 0 {
		c.fail.Add(-1)
		return errors.New("handler refuses this batch")
	}
	c.mu.Lock()
	for _, f := range facts {
		c.positions = append(c.positions, f.Position)
	}
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
	return nil
}

func (c *collector) snapshot() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.positions...)
}

// waitFor waits until the collector has n positions, or fails after 30 s.
func (c *collector) waitFor(t *testing.T, n int) []int64 {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if got := c.snapshot(); len(got) >= n {
			return got
		}
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatalf("consumer saw %d facts, want %d", len(c.snapshot()), n)
		}
	}
}

func run(t *testing.T, cons *stream.Consumer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("consumer: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func wantSequence(t *testing.T, got []int64, from, to int64) {
	t.Helper()
	if int64(len(got)) != to-from+1 {
		t.Fatalf("got %d positions, want %d..%d: %v", len(got), from, to, got)
	}
	for i, p := range got {
		if p != from+int64(i) {
			t.Fatalf("position[%d] = %d, want %d (%v)", i, p, from+int64(i), got)
		}
	}
}

func TestDeliversEveryFactInOrderAndCheckpoints(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		st := teststore.Open(t, backend)
		appendN(t, st, 120)
		reg := prometheus.NewRegistry()
		m, err := stream.NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		c := newCollector()
		stop := run(t, &stream.Consumer{Name: "proj", Store: st, Handler: c.handle, BatchSize: 25, Metrics: m})
		wantSequence(t, c.waitFor(t, 120), 1, 120)
		appendN(t, st, 5)
		wantSequence(t, c.waitFor(t, 125), 1, 125)
		stop()
		cp, err := st.GetCheckpoint(context.Background(), "proj")
		if err != nil || cp != 125 {
			t.Fatalf("checkpoint %d, %v; want 125", cp, err)
		}
		if lag := testutil.ToFloat64(m.Lag("proj")); lag != 0 {
			t.Fatalf("lag %v after catching up", lag)
		}
	})
}

func TestResumesFromCheckpointAfterRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		loc := teststore.Location(t, backend)
		st := teststore.OpenAt(t, backend, loc)
		appendN(t, st, 10)
		c1 := newCollector()
		stop := run(t, &stream.Consumer{Name: "hooks", Store: st, Handler: c1.handle})
		wantSequence(t, c1.waitFor(t, 10), 1, 10)
		stop()
		appendN(t, st, 7) // written while no consumer runs
		st.Close()

		st2 := teststore.OpenAt(t, backend, loc) // a new process, in effect
		defer st2.Close()
		c2 := newCollector()
		run(t, &stream.Consumer{Name: "hooks", Store: st2, Handler: c2.handle})
		wantSequence(t, c2.waitFor(t, 7), 11, 17)
		// Another consumer starts from the beginning on its own checkpoint.
		c3 := newCollector()
		run(t, &stream.Consumer{Name: "other", Store: st2, Handler: c3.handle})
		wantSequence(t, c3.waitFor(t, 17), 1, 17)
	})
}

func TestFailedBatchIsRetriedNotSkipped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		st := teststore.Open(t, backend)
		appendN(t, st, 30)
		c := newCollector()
		c.fail.Store(2)
		run(t, &stream.Consumer{Name: "flaky", Store: st, Handler: c.handle, BatchSize: 10})
		wantSequence(t, c.waitFor(t, 30), 1, 30)
	})
}

// TestWakesOnNotification: with polling effectively off, a new fact still
// reaches the consumer promptly.
func TestWakesOnNotification(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		st := teststore.Open(t, backend)
		c := newCollector()
		run(t, &stream.Consumer{Name: "live", Store: st, Handler: c.handle, PollInterval: time.Hour})
		for i := 1; i <= 3; i++ {
			appendOne(t, st)
			wantSequence(t, c.waitFor(t, i), 1, int64(i))
		}
	})
}

// TestLateCommitIsNeverSkipped holds one append's transaction open after it
// has taken its position, while a second append is started concurrently.
// The second cannot commit first (positions are taken under a lock held to
// commit), so the consumer sees neither until the first commits, then both
// in position order: it never skips a fact that commits late.
func TestLateCommitIsNeverSkipped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		release := make(chan struct{})
		held := make(chan struct{})
		var calls atomic.Int32
		hooks := store.Hooks{BeforeAppendCommit: func(context.Context) {
			if calls.Add(1) == 1 {
				close(held)
				<-release
			}
		}}
		st := teststore.OpenHooked(t, backend, teststore.Location(t, backend), hooks)
		defer st.Close()
		c := newCollector()
		run(t, &stream.Consumer{Name: "gap", Store: st, Handler: c.handle, PollInterval: 20 * time.Millisecond})

		first := make(chan store.Fact, 1)
		go func() { first <- appendOne(t, st) }()
		<-held // the first append holds its transaction open
		second := make(chan store.Fact, 1)
		go func() { second <- appendOne(t, st) }()

		// While the first is held, nothing may be delivered and the second
		// may not complete. (A broken store fails here; a correct one
		// passes however long we wait.)
		select {
		case f := <-second:
			t.Fatalf("second append committed (position %d) while the first was still open", f.Position)
		case <-c.changed:
			t.Fatalf("consumer received %v while the first append was uncommitted", c.snapshot())
		case <-time.After(300 * time.Millisecond):
		}
		close(release)
		f1, f2 := <-first, <-second
		if f1.Position != 1 || f2.Position != 2 {
			t.Fatalf("positions %d, %d; want 1, 2", f1.Position, f2.Position)
		}
		wantSequence(t, c.waitFor(t, 2), 1, 2)
	})
}

// TestConcurrentWritersDeliveredExactlyOnce: many writers, one consumer,
// every position exactly once in order.
func TestConcurrentWritersDeliveredExactlyOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		st := teststore.Open(t, backend)
		c := newCollector()
		run(t, &stream.Consumer{Name: "all", Store: st, Handler: c.handle, BatchSize: 7})
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				appendN(t, st, 25)
			}()
		}
		wg.Wait()
		wantSequence(t, c.waitFor(t, 200), 1, 200)
	})
}

// TestProjectionConsumerSeriesNameNoTenant: /metrics may be served on the
// API port without a key; a projection consumer's name holds a tenant id
// and a config id, so its series carry a digest of the name instead.
func TestProjectionConsumerSeriesNameNoTenant(t *testing.T) {
	st := teststore.Open(t, "sqlite")
	reg := prometheus.NewRegistry()
	m, err := stream.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, st, 3)
	const name = "projection:acme-corp:cfg_01SECRETCONFIG:65cc5f60d932"
	c := newCollector()
	stop := run(t, &stream.Consumer{Name: name, Store: st, Handler: c.handle, Metrics: m})
	wantSequence(t, c.waitFor(t, 3), 1, 3)
	stop()
	label := stream.MetricLabel(name)
	if !regexp.MustCompile(`^projection:[0-9a-f]{12}$`).MatchString(label) || stream.MetricLabel("webhooks") != "webhooks" {
		t.Fatalf("labels %q, %q", label, stream.MetricLabel("webhooks"))
	}
	var text strings.Builder
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				fmt.Fprintf(&text, "%s{%s=%q}\n", f.GetName(), l.GetName(), l.GetValue())
			}
		}
	}
	if strings.Contains(text.String(), "acme-corp") || strings.Contains(text.String(), "cfg_01SECRETCONFIG") ||
		!strings.Contains(text.String(), `factline_stream_consumer_position{consumer="`+label+`"}`) {
		t.Fatalf("series:\n%s", text.String())
	}
}
