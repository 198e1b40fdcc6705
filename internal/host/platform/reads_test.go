package platform_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/store"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

// countingStore is a real store that counts the entity reads and the
// append transactions it serves.
type countingStore struct {
	store.Store
	gets, appends atomic.Int64
	last          atomic.Pointer[[]store.Append] // the last AppendFacts call's items
}

func (c *countingStore) GetEntity(ctx context.Context, tenant, id string) (*store.Entity, error) {
	c.gets.Add(1)
	return c.Store.GetEntity(ctx, tenant, id)
}

func (c *countingStore) AppendFacts(ctx context.Context, items []store.Append) ([]store.AppendResult, error) {
	c.appends.Add(1)
	c.last.Store(&items)
	return c.Store.AppendFacts(ctx, items)
}

// gated is capped (state-dependent, counting its ticks) whose command
// "hold" waits in Decide until released, after saying so on held.
type gated struct {
	capped
	held, release chan struct{}
}

func (g gated) Decide(ctx context.Context, state json.RawMessage, cmd ledger.Command) (ledger.Decision, error) {
	if cmd.Name == "hold" {
		g.held <- struct{}{}
		<-g.release
	}
	return g.capped.Decide(ctx, state, cmd)
}

func newCountingService(t *testing.T, backend string) (*platform.Service, *countingStore, gated) {
	t.Helper()
	d, err := manifest.ParseDomain("test.yaml", []byte(domainYAML))
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: teststore.Open(t, backend)}
	g := gated{capped: capped{cap: 1000}, held: make(chan struct{}, 1), release: make(chan struct{})}
	reg := ledger.Builtin()
	reg["capped"] = g
	svc, err := platform.New(platform.Options{Store: cs, Domain: d, Ledgers: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc, cs, g
}

func ticks(t *testing.T, svc *platform.Service, id string) int {
	t.Helper()
	e, err := svc.Store().GetEntity(context.Background(), "t1", id)
	if err != nil {
		t.Fatal(err)
	}
	var s cappedState
	if err := json.Unmarshal(e.State, &s); err != nil {
		t.Fatalf("state %s: %v", e.State, err)
	}
	return s.N
}

// TestStateDependentWriteReadsEntityOnce: a write through a state-dependent
// ledger reads the entity once (none when the caller hands over its copy),
// not again once it holds the entity's lock, when no other writer of the
// process wrote it meanwhile.
func TestStateDependentWriteReadsEntityOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		svc, cs, _ := newCountingService(t, backend)
		ctx := context.Background()
		e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "counter"})
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name  string
			reads int64
			write func() error
		}{
			{"AppendFact", 1, func() error {
				_, err := svc.AppendFact(ctx, "t1", platform.AppendFactInput{EntityID: e.ID, Type: "tick"})
				return err
			}},
			{"RunCommand", 1, func() error {
				_, err := svc.RunCommand(ctx, "t1", e.ID, "tick", nil, platform.Provenance{})
				return err
			}},
			{"RunCommandOn a fresh copy", 0, func() error {
				cur, err := svc.LoadEntity(ctx, "t1", e.ID)
				if err != nil {
					return err
				}
				cs.gets.Store(0)
				_, err = svc.RunCommandOn(ctx, "t1", cur, "tick", nil, platform.Provenance{})
				return err
			}},
		}
		for i, c := range cases {
			cs.gets.Store(0)
			if err := c.write(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if got := cs.gets.Load(); got != c.reads {
				t.Errorf("%s read the entity %d times, want %d", c.name, got, c.reads)
			}
			if n := ticks(t, svc, e.ID); n != i+1 {
				t.Fatalf("%s: snapshot counts %d ticks, want %d", c.name, n, i+1)
			}
		}
	})
}

// TestWriterRereadsEntityWrittenWhileItWaited: a writer that read the
// entity before another writer of the process wrote it reads it again once
// it holds the lock, so it decides on the latest state at the first
// attempt (no version conflict, no second append).
func TestWriterRereadsEntityWrittenWhileItWaited(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		svc, cs, g := newCountingService(t, backend)
		ctx := context.Background()
		e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "counter"})
		if err != nil {
			t.Fatal(err)
		}
		first := make(chan error, 1)
		go func() {
			_, err := svc.RunCommand(ctx, "t1", e.ID, "hold", nil, platform.Provenance{})
			first <- err
		}()
		select {
		case <-g.held: // the first writer holds the lock, deciding
		case <-time.After(time.Minute):
			t.Fatal("the first writer never decided")
		}
		cs.gets.Store(0)
		second := make(chan error, 1)
		go func() {
			_, err := svc.AppendFact(ctx, "t1", platform.AppendFactInput{EntityID: e.ID, Type: "tick"})
			second <- err
		}()
		// The second writer has read the entity (at version 1) and now
		// waits for the lock the first one holds.
		testutil.Eventually(t, time.Minute, "the second writer's read", func() bool { return cs.gets.Load() >= 1 })
		close(g.release)
		for _, ch := range []chan error{first, second} {
			if err := <-ch; err != nil {
				t.Fatal(err)
			}
		}
		if got := cs.gets.Load(); got != 2 {
			t.Errorf("the second writer read the entity %d times, want 2 (before and after the lock)", got)
		}
		if got := cs.appends.Load(); got != 2 {
			t.Errorf("%d append transactions, want 2 (one per writer, no retry)", got)
		}
		if n := ticks(t, svc, e.ID); n != 2 {
			t.Fatalf("snapshot counts %d ticks, want 2", n)
		}
	})
}

// TestRunCommandOnStaleCopyRetries: a copy that another write made stale
// before the command ran still yields a decision on the latest state.
func TestRunCommandOnStaleCopyRetries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		svc, _, _ := newCountingService(t, backend)
		ctx := context.Background()
		e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "counter"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.AppendFact(ctx, "t1", platform.AppendFactInput{EntityID: e.ID, Type: "tick"}); err != nil {
			t.Fatal(err)
		}
		out, err := svc.RunCommandOn(ctx, "t1", e, "tick", nil, platform.Provenance{}) // e is at version 1
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Facts) != 1 || out.Facts[0].Seq != 2 {
			t.Fatalf("facts %+v, want one at seq 2", out.Facts)
		}
		if n := ticks(t, svc, e.ID); n != 2 {
			t.Fatalf("snapshot counts %d ticks, want 2", n)
		}
	})
}

// TestAppendFactMarksGeneratedIDsFresh: a fact id the platform generated is
// handed to the store as fresh (not looked up); a caller's id is not.
func TestAppendFactMarksGeneratedIDsFresh(t *testing.T) {
	svc, cs, _ := newCountingService(t, "sqlite")
	ctx := context.Background()
	e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "account", Fields: map[string]any{"name": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id    string
		fresh bool
	}{{"", true}, {"fct_caller_chosen", false}} {
		if _, err := svc.AppendFact(ctx, "t1", platform.AppendFactInput{ID: c.id, EntityID: e.ID, Type: "deposit", Data: map[string]any{"amount": json.Number("1")}}); err != nil {
			t.Fatal(err)
		}
		items := *cs.last.Load()
		if len(items) != 1 || items[0].FreshID != c.fresh {
			t.Errorf("fact id %q: FreshID %v, want %v", c.id, items[0].FreshID, c.fresh)
		}
	}
}
