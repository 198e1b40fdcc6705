package stream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/host/stream"
	"github.com/factline/factline/internal/teststore"
	tu "github.com/factline/factline/internal/testutil"
	"github.com/factline/factline/internal/testutil/wait"
)

// runGroup runs g until the test ends.
func runGroup(t *testing.T, g *stream.Group) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("group: %v", err)
		}
	})
}

// join runs c in g until the test ends or leave is called; leave returns
// once c has left.
func join(t *testing.T, g *stream.Group, c *stream.Consumer) (leave func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Join(ctx, c) }()
	var once sync.Once
	leave = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("join %s: %v", c.Name, err)
			}
		})
	}
	t.Cleanup(leave)
	return leave
}

// waitMembers waits until the group feeds exactly the consumers named.
func waitMembers(t *testing.T, g *stream.Group, names ...string) {
	t.Helper()
	slices.Sort(names)
	tu.EventuallyNil(t, 30*time.Second, func() error {
		if got := g.Members(); !slices.Equal(got, names) {
			return fmt.Errorf("group members %v, want %v", got, names)
		}
		return nil
	})
}

// readCounter counts, per start position, the reads of the fact stream
// that found facts, while counting is on.
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

// TestGroupMembersJoinAndLeave: consumers that have caught up are fed by
// one read of each batch; one that leaves gets nothing more and keeps its
// checkpoint, and joins again from there; one whose handler fails reads
// on its own and comes back, losing and repeating nothing.
func TestGroupMembersJoinAndLeave(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		st := &readCounter{Store: teststore.Open(t, backend), reads: map[int64]int{}}
		appendN(t, st, 50)
		g := &stream.Group{Store: st, BatchSize: 16, PollInterval: 50 * time.Millisecond}
		runGroup(t, g)
		cols := map[string]*collector{}
		leave := map[string]func(){}
		for _, n := range []string{"a", "b", "c"} {
			cols[n] = newCollector()
			leave[n] = join(t, g, &stream.Consumer{Name: n, Store: st, Handler: cols[n].handle, BatchSize: 16, PollInterval: 50 * time.Millisecond})
		}
		for _, col := range cols {
			wantSequence(t, col.waitFor(t, 50), 1, 50)
		}
		waitMembers(t, g, "a", "b", "c")

		// One read of each new batch serves all three.
		st.count(true)
		appendN(t, st, 20)
		for _, col := range cols {
			wantSequence(t, col.waitFor(t, 70), 1, 70)
		}
		reads := st.count(false)
		if len(reads) == 0 {
			t.Fatal("no reads of the stream counted")
		}
		for after, n := range reads {
			if n > 1 {
				t.Fatalf("the facts after position %d were read %d times for 3 members (reads %v)", after, n, reads)
			}
		}

		// b leaves: the others go on, b gets nothing more.
		leave["b"]()
		waitMembers(t, g, "a", "c")
		appendN(t, st, 10)
		wantSequence(t, cols["a"].waitFor(t, 80), 1, 80)
		wantSequence(t, cols["c"].waitFor(t, 80), 1, 80)
		wantSequence(t, cols["b"].snapshot(), 1, 70)
		if cp, err := st.GetCheckpoint(context.Background(), "b"); err != nil || cp != 70 {
			t.Fatalf("b's checkpoint %d, %v; want 70", cp, err)
		}

		// b joins again from its checkpoint.
		b2 := newCollector()
		join(t, g, &stream.Consumer{Name: "b", Store: st, Handler: b2.handle, BatchSize: 16, PollInterval: 50 * time.Millisecond})
		wantSequence(t, b2.waitFor(t, 10), 71, 80)
		waitMembers(t, g, "a", "b", "c")

		// a's handler refuses a batch: a is dropped, reads on its own and
		// joins again.
		cols["a"].fail.Store(1)
		appendN(t, st, 5)
		wantSequence(t, cols["c"].waitFor(t, 85), 1, 85)
		wantSequence(t, cols["a"].waitFor(t, 85), 1, 85)
		waitMembers(t, g, "a", "b", "c")
		appendN(t, st, 5)
		wantSequence(t, cols["a"].waitFor(t, 90), 1, 90)
		wantSequence(t, b2.waitFor(t, 20), 71, 90)
	})
}

// refusingStore refuses subscriptions while refuse is set and can end the
// subscriptions it made.
type refusingStore struct {
	store.Store
	refuse     atomic.Bool
	refused    chan struct{} // signalled at each refusal
	subscribed chan struct{} // signalled at each subscription made
	mu         sync.Mutex
	ends       []context.CancelFunc
}

func newRefusingStore(st store.Store) *refusingStore {
	r := &refusingStore{Store: st, refused: make(chan struct{}, 1), subscribed: make(chan struct{}, 1)}
	r.refuse.Store(true)
	return r
}

func (r *refusingStore) SubscribeFacts(ctx context.Context) (<-chan struct{}, error) {
	if r.refuse.Load() {
		signal(r.refused)
		return nil, errors.New("subscription refused")
	}
	sctx, end := context.WithCancel(ctx)
	ch, err := r.Store.SubscribeFacts(sctx)
	if err != nil {
		end()
		return nil, err
	}
	r.mu.Lock()
	r.ends = append(r.ends, end)
	r.mu.Unlock()
	signal(r.subscribed)
	return ch, nil
}

// endAll ends every subscription made so far: their channels close.
func (r *refusingStore) endAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, end := range r.ends {
		end()
	}
	r.ends = nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func waitSignal(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s within 30 s", what)
	}
}

// TestFailedSubscriptionIsRetried: a reader whose subscription to new
// facts is refused reads meanwhile and subscribes again until it is
// made, and subscribes again when a subscription ends; with polling
// effectively off, new facts then reach it through the subscription. The
// same holds for a lone consumer and for a group.
func TestFailedSubscriptionIsRetried(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "group"}[grouped], func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, backend string) {
				base := teststore.Open(t, backend)
				st := newRefusingStore(base)
				appendN(t, base, 3)
				col := newCollector()
				if grouped {
					// The member reads on its own through the plain store
					// and joins at once; the group's reads are the ones
					// under test.
					g := &stream.Group{Store: st, PollInterval: time.Hour}
					runGroup(t, g)
					join(t, g, &stream.Consumer{Name: "sub", Store: base, Handler: col.handle, PollInterval: time.Hour})
					wantSequence(t, col.waitFor(t, 3), 1, 3)
					waitMembers(t, g, "sub")
				} else {
					run(t, &stream.Consumer{Name: "sub", Store: st, Handler: col.handle, PollInterval: time.Hour})
					wantSequence(t, col.waitFor(t, 3), 1, 3)
				}
				// Refused twice and still reading: facts arrive meanwhile.
				waitSignal(t, st.refused, "refused subscription")
				waitSignal(t, st.refused, "second refused subscription")
				appendN(t, base, 2)
				wantSequence(t, col.waitFor(t, 5), 1, 5)

				st.refuse.Store(false)
				waitSignal(t, st.subscribed, "subscription after the refusals")
				for i := 6; i <= 7; i++ {
					appendOne(t, base)
					wantSequence(t, col.waitFor(t, i), 1, int64(i))
				}
				// The subscription ends; the reader makes another.
				st.endAll()
				waitSignal(t, st.subscribed, "subscription after the first ended")
				for i := 8; i <= 9; i++ {
					appendOne(t, base)
					wantSequence(t, col.waitFor(t, i), 1, int64(i))
				}
			})
		})
	}
}

// TestGroupMembersHandleABatchConcurrently: the members of a group handle
// a batch at the same time, at most Parallelism of them at once, so the
// last member does not wait for the sum of the others' round trips. Each
// handler, once armed, waits (up to 30 s) until the expected number of
// handlers are inside at the same time: handled one after another, or in
// rounds of fewer, none ever is. By default a hundred members, which
// share their Redis round trips, all handle a batch at once.
func TestGroupMembersHandleABatchConcurrently(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setting  int // Group.Parallelism
		members  int
		parallel int // handlers expected inside at once
	}{
		{"bounded", 4, 12, 4},
		{"default: every member at once", 0, 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			membersHandleConcurrently(t, tc.setting, tc.members, tc.parallel)
		})
	}
}

func membersHandleConcurrently(t *testing.T, setting, members, parallel int) {
	forEachBackend(t, func(t *testing.T, backend string) {
		st := teststore.Open(t, backend)
		appendN(t, st, 3)
		g := &stream.Group{Store: st, BatchSize: 16, PollInterval: 50 * time.Millisecond, Parallelism: setting}
		runGroup(t, g)

		var (
			armed    atomic.Bool
			mu       sync.Mutex
			inside   int
			maxIn    int
			reached  = make(chan struct{})
			reachedO sync.Once
			timedOut atomic.Int32
		)
		names := make([]string, 0, members)
		cols := make([]*collector, 0, members)
		for i := range members {
			name := fmt.Sprintf("m%03d", i)
			col := newCollector()
			names, cols = append(names, name), append(cols, col)
			handle := func(ctx context.Context, facts []store.Fact) error {
				if armed.Load() {
					mu.Lock()
					inside++
					maxIn = max(maxIn, inside)
					if inside >= parallel {
						reachedO.Do(func() { close(reached) })
					}
					mu.Unlock()
					select {
					case <-reached:
					case <-time.After(30 * time.Second):
						timedOut.Add(1)
						reachedO.Do(func() { close(reached) }) // the others need not wait too
					}
					mu.Lock()
					inside--
					mu.Unlock()
				}
				return col.handle(ctx, facts)
			}
			join(t, g, &stream.Consumer{Name: name, Store: st, Handler: handle, BatchSize: 16, PollInterval: 50 * time.Millisecond})
		}
		for _, col := range cols {
			wantSequence(t, col.waitFor(t, 3), 1, 3)
		}
		waitMembers(t, g, names...)

		armed.Store(true)
		appendOne(t, st)
		for _, col := range cols {
			wantSequence(t, col.waitFor(t, 4), 1, 4)
		}
		if n := timedOut.Load(); n > 0 {
			t.Fatalf("%d handlers waited 30 s for %d to run at once: the members handled the batch one after another", n, parallel)
		}
		mu.Lock()
		defer mu.Unlock()
		if maxIn > parallel {
			t.Fatalf("%d handlers ran at once, want at most %d", maxIn, parallel)
		}
		waitMembers(t, g, names...)
	})
}

// checkpointCounter counts the checkpoint writes made through it.
type checkpointCounter struct {
	store.Store
	mu     sync.Mutex
	single int   // SetCheckpoint calls
	many   []int // consumers per SetCheckpoints call
}

func (c *checkpointCounter) SetCheckpoint(ctx context.Context, consumer string, pos int64) error {
	c.mu.Lock()
	c.single++
	c.mu.Unlock()
	return c.Store.SetCheckpoint(ctx, consumer, pos)
}

func (c *checkpointCounter) SetCheckpoints(ctx context.Context, positions map[string]int64) error {
	c.mu.Lock()
	c.many = append(c.many, len(positions))
	c.mu.Unlock()
	return c.Store.SetCheckpoints(ctx, positions)
}

func (c *checkpointCounter) reset() (single int, many []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	single, many = c.single, c.many
	c.single, c.many = 0, nil
	return single, many
}

// TestGroupSavesMembersCheckpointsInOneWrite: after a batch, the group
// saves the checkpoints of all its members in one store write, not one
// write per member.
func TestGroupSavesMembersCheckpointsInOneWrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		const members = 6
		st := &checkpointCounter{Store: teststore.Open(t, backend)}
		appendN(t, st, 3)
		g := &stream.Group{Store: st, BatchSize: 16, PollInterval: 50 * time.Millisecond}
		runGroup(t, g)
		names := make([]string, 0, members)
		cols := make([]*collector, 0, members)
		for i := range members {
			name := string(rune('a' + i))
			col := newCollector()
			names, cols = append(names, name), append(cols, col)
			join(t, g, &stream.Consumer{Name: name, Store: st, Handler: col.handle, BatchSize: 16, PollInterval: 50 * time.Millisecond})
		}
		for _, col := range cols {
			wantSequence(t, col.waitFor(t, 3), 1, 3)
		}
		waitMembers(t, g, names...)

		st.reset()
		last := appendOne(t, st).Position
		for _, col := range cols {
			wantSequence(t, col.waitFor(t, 4), 1, 4)
		}
		for _, n := range names {
			wait.EventuallyNil(t, 30*time.Second, func() error {
				cp, err := st.GetCheckpoint(context.Background(), n)
				if err == nil && cp != last {
					err = fmt.Errorf("%s's checkpoint %d, want %d", n, cp, last)
				}
				return err
			})
		}
		single, many := st.reset()
		if single != 0 || !slices.Equal(many, []int{members}) {
			t.Fatalf("checkpoint writes for one batch: %d single, SetCheckpoints of %v consumers; want 0 single and one of %d", single, many, members)
		}
	})
}

// holdingSaves holds the first SetCheckpoints call made after hold until
// release is closed (or 60 s pass, longer than any wait of the test, so
// that a failing test ends).
type holdingSaves struct {
	store.Store
	mu       sync.Mutex
	armed    bool
	held     chan struct{} // closed when the held write has started
	release  chan struct{}
	timedOut atomic.Bool
}

func (h *holdingSaves) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.held, h.release = true, make(chan struct{}), make(chan struct{})
}

func (h *holdingSaves) SetCheckpoints(ctx context.Context, positions map[string]int64) error {
	h.mu.Lock()
	armed := h.armed
	h.armed = false
	held, release := h.held, h.release
	h.mu.Unlock()
	if armed {
		close(held)
		select {
		case <-release:
		case <-time.After(60 * time.Second):
			h.timedOut.Store(true)
		}
	}
	return h.Store.SetCheckpoints(ctx, positions)
}

// TestGroupHandlesNextBatchWhileCheckpointsSave: the checkpoint write of
// one batch does not hold the next batch back; the next batch is read and
// handled while it runs, and the checkpoints end at the last fact once it
// lands.
func TestGroupHandlesNextBatchWhileCheckpointsSave(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		st := &holdingSaves{Store: teststore.Open(t, backend)}
		appendN(t, st, 3)
		g := &stream.Group{Store: st, BatchSize: 16, PollInterval: 50 * time.Millisecond}
		runGroup(t, g)
		col := newCollector()
		join(t, g, &stream.Consumer{Name: "a", Store: st, Handler: col.handle, BatchSize: 16, PollInterval: 50 * time.Millisecond})
		wantSequence(t, col.waitFor(t, 3), 1, 3)
		waitMembers(t, g, "a")

		st.hold()
		appendOne(t, st)
		wantSequence(t, col.waitFor(t, 4), 1, 4)
		waitSignal(t, st.held, "the checkpoint write of fact 4")
		last := appendOne(t, st).Position
		wantSequence(t, col.waitFor(t, 5), 1, 5)
		if st.timedOut.Load() {
			t.Fatal("fact 5 was handled only after the checkpoint write of fact 4 ended")
		}
		close(st.release)
		wait.EventuallyNil(t, 30*time.Second, func() error {
			cp, err := st.GetCheckpoint(context.Background(), "a")
			if err == nil && cp != last {
				err = fmt.Errorf("checkpoint %d, want %d", cp, last)
			}
			return err
		})
	})
}

// TestGroupAdmitsAConsumerThatNeverReadsAShortBatch: a consumer reading on
// its own that trails the group by one batch while the stream grows by a
// batch each time it reads one (so every read it makes is full) joins the
// group; it does not wait for a short read that never comes.
func TestGroupAdmitsAConsumerThatNeverReadsAShortBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		const batch = 16
		st := teststore.Open(t, backend)
		g := &stream.Group{Store: st, BatchSize: batch, PollInterval: 50 * time.Millisecond}
		runGroup(t, g)
		lead := newCollector()
		join(t, g, &stream.Consumer{Name: "lead", Store: st, Handler: lead.handle, BatchSize: batch, PollInterval: 50 * time.Millisecond})
		waitMembers(t, g, "lead")
		appendN(t, st, batch)
		lead.waitFor(t, batch)

		// Until it is a member, each batch the trailing consumer handles on
		// its own adds a batch to the stream.
		var member atomic.Bool
		trail := newCollector()
		grow := func(ctx context.Context, facts []store.Fact) error {
			if !member.Load() {
				appendN(t, st, batch)
			}
			return trail.handle(ctx, facts)
		}
		join(t, g, &stream.Consumer{Name: "trail", Store: st, Handler: grow, BatchSize: batch, PollInterval: 50 * time.Millisecond})
		tu.EventuallyNil(t, 30*time.Second, func() error {
			if got := g.Members(); !slices.Contains(got, "trail") {
				return fmt.Errorf("group members %v, want trail among them", got)
			}
			return nil
		})
		member.Store(true)
		appendOne(t, st)
		// Every fact reaches both, in order, none twice.
		tu.EventuallyNil(t, 30*time.Second, func() error {
			head, err := st.HeadPosition(context.Background())
			if err != nil {
				return err
			}
			for name, col := range map[string]*collector{"lead": lead, "trail": trail} {
				got := col.snapshot()
				if int64(len(got)) != head {
					return fmt.Errorf("%s saw %d facts, want %d", name, len(got), head)
				}
			}
			return nil
		})
		wantSequence(t, lead.snapshot(), 1, lead.snapshot()[len(lead.snapshot())-1])
		wantSequence(t, trail.snapshot(), 1, trail.snapshot()[len(trail.snapshot())-1])
	})
}

// TestGroupMemberStoresSkippedFactsWhenQuiet: a member that acts on none
// of the last facts skips saving its checkpoint for them within a second
// of its last save, but stores the position past them once the stream
// goes quiet; otherwise /v1/admin/stream shows it lagging for good and a
// restart reads those facts again.
func TestGroupMemberStoresSkippedFactsWhenQuiet(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		st := teststore.Open(t, backend)
		var relevantUpTo atomic.Int64
		relevantUpTo.Store(1 << 62)
		g := &stream.Group{Store: st, BatchSize: 16, PollInterval: 50 * time.Millisecond}
		runGroup(t, g)
		col := newCollector()
		join(t, g, &stream.Consumer{Name: "picky", Store: st, Handler: col.handle, BatchSize: 16, PollInterval: 50 * time.Millisecond,
			Relevant: func(f *store.Fact) bool { return f.Position <= relevantUpTo.Load() }})
		waitMembers(t, g, "picky")
		stored := func(want int64) {
			t.Helper()
			wait.EventuallyNil(t, 30*time.Second, func() error {
				cp, err := st.GetCheckpoint(context.Background(), "picky")
				if err == nil && cp != want {
					err = fmt.Errorf("stored checkpoint %d, want %d", cp, want)
				}
				return err
			})
		}
		acted := appendOne(t, st).Position
		stored(acted)
		relevantUpTo.Store(acted)
		skipped := appendOne(t, st).Position
		col.waitFor(t, 2)
		stored(skipped)
	})
}
