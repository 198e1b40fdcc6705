package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const domainYAML = `
name: test
version: "1"
entities:
  account:
    ledger: builtin
    fields:
      name: {type: string, required: true, storage: ix_s_2}
    facts: [deposit, charge]
  counter:
    ledger: capped
    fields: {}
    facts: [tick]
`

// capped is a state-dependent ledger: it records a tick only while fewer
// than cap ticks exist, so every decision depends on the latest state.
type capped struct{ cap int }

func (capped) Name() string         { return "capped" }
func (capped) StateDependent() bool { return true }

type cappedState struct {
	N int `json:"n"`
}

func (c capped) Decide(_ context.Context, state json.RawMessage, cmd ledger.Command) (ledger.Decision, error) {
	var s cappedState
	if len(state) > 0 {
		if err := json.Unmarshal(state, &s); err != nil {
			return ledger.Decision{}, err
		}
	}
	if s.N >= c.cap {
		return ledger.Decision{}, &ledger.BusinessError{Code: "cap_reached", Message: fmt.Sprintf("cap of %d ticks reached", c.cap)}
	}
	return ledger.Decision{Facts: []ledger.NewFact{{Type: "tick"}}}, nil
}

func (capped) Evolve(_ context.Context, state json.RawMessage, _ json.RawMessage) (json.RawMessage, error) {
	var s cappedState
	if len(state) > 0 {
		if err := json.Unmarshal(state, &s); err != nil {
			return nil, err
		}
	}
	s.N++
	return json.Marshal(s)
}

func newService(t *testing.T, backend string, cap int) *platform.Service {
	t.Helper()
	return serviceWith(t, backend, domainYAML, capped{cap: cap})
}

// serviceWith returns a platform service on a new store of backend, with
// the domain manifest src and the built-in ledgers plus extra (under its
// name), closed when t ends.
func serviceWith(t *testing.T, backend, src string, extra ledger.Ledger) *platform.Service {
	t.Helper()
	d, err := manifest.ParseDomain("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	reg := ledger.Builtin()
	reg[extra.Name()] = extra
	svc, err := platform.New(platform.Options{Store: teststore.Open(t, backend), Domain: d, Ledgers: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

func forEachBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, b := range teststore.Backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// TestGroupCommitHotEntity: 64 writers to one entity through the
// group-committing appender get seq 1..N with no gaps or duplicates.
func TestGroupCommitHotEntity(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		svc := newService(t, backend, 0)
		ctx := context.Background()
		e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "account", Fields: map[string]any{"name": "hot"}})
		if err != nil {
			t.Fatal(err)
		}
		const writers, each = 64, 8
		var wg sync.WaitGroup
		seqs := make(chan int64, writers*each)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					f, err := svc.AppendFact(ctx, "t1", platform.AppendFactInput{EntityID: e.ID, Type: "deposit", Data: map[string]any{"amount": json.Number("1.5")}})
					if err != nil {
						t.Error(err)
						return
					}
					seqs <- f.Seq
				}
			}()
		}
		wg.Wait()
		close(seqs)
		seen := map[int64]bool{}
		for s := range seqs {
			if seen[s] {
				t.Fatalf("seq %d assigned twice", s)
			}
			seen[s] = true
		}
		for s := int64(1); s <= writers*each; s++ {
			if !seen[s] {
				t.Fatalf("seq %d missing", s)
			}
		}
		got, err := svc.GetEntity(ctx, "t1", e.ID, "account", platform.Cached)
		if err != nil || got.Version != writers*each+1 {
			t.Fatalf("entity version %d, %v; want %d", got.Version, err, writers*each+1)
		}
	})
}

// TestStateDependentLedgerUnderContention: concurrent commands against a
// ledger whose decisions depend on state never overshoot its rule, and the
// snapshot written with the facts matches them.
func TestStateDependentLedgerUnderContention(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		const cap = 10
		svc := newService(t, backend, cap)
		ctx := context.Background()
		e, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "counter"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok, refused := 0, 0
		for w := 0; w < 25; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := svc.AppendFact(ctx, "t1", platform.AppendFactInput{EntityID: e.ID, Type: "tick"})
				mu.Lock()
				defer mu.Unlock()
				var pe *problem.Error
				switch {
				case err == nil:
					ok++
				case errors.As(err, &pe) && pe.Kind == problem.Unprocessable:
					refused++
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if ok != cap {
			t.Fatalf("%d ticks recorded, want exactly %d (refused %d)", ok, cap, refused)
		}
		page, err := svc.ListEntityFacts(ctx, "t1", e.ID, "", 100)
		if err != nil || len(page.Items) != cap {
			t.Fatalf("ledger has %d facts, %v", len(page.Items), err)
		}
		stored, err := svc.Store().GetEntity(ctx, "t1", e.ID)
		if err != nil {
			t.Fatal(err)
		}
		var s cappedState
		if err := json.Unmarshal(stored.State, &s); err != nil || s.N != cap {
			t.Fatalf("snapshot %s, want n=%d", stored.State, cap)
		}
	})
}

func TestRejectsUnregisteredLedger(t *testing.T) {
	d, err := manifest.ParseDomain("test.yaml", []byte(domainYAML))
	if err != nil {
		t.Fatal(err)
	}
	_, err = platform.New(platform.Options{Store: teststore.Open(t, "sqlite"), Domain: d, Ledgers: ledger.Builtin()})
	if err == nil {
		t.Fatal("a manifest naming an unknown ledger was accepted")
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(platform.EncodeCursor(platform.ListingEntities, "ent_01H"))
	f.Add(platform.EncodeCursor(platform.ListingFacts, "ent_01H"))
	f.Add("%%%")
	f.Fuzz(func(t *testing.T, c string) {
		key, err := platform.DecodeCursor(platform.ListingEntities, c)
		if err == nil && c != "" && platform.EncodeCursor(platform.ListingEntities, key) != c {
			t.Fatalf("cursor %q decodes to %q which encodes differently", c, key)
		}
	})
}

// TestCursorsBelongToTheirListing: a cursor is read only by the listing
// that returned it; another endpoint's, or another entity's facts', is a
// 400 naming the cursor, not a position read there.
func TestCursorsBelongToTheirListing(t *testing.T) {
	listings := []platform.Listing{platform.ListingEntities, platform.ListingFacts, platform.ListingConfigs,
		platform.ListingDeliveries, platform.ListingDeadLetter, platform.ListingEntityFacts("acct-1"), platform.ListingEntityFacts("acct-2")}
	for _, from := range listings {
		c := platform.EncodeCursor(from, "42")
		for _, to := range listings {
			key, err := platform.DecodeCursor(to, c)
			switch {
			case from == to && (err != nil || key != "42"):
				t.Errorf("%s's own cursor: %q, %v", from, key, err)
			case from != to:
				var pe *problem.Error
				if !errors.As(err, &pe) || len(pe.Errors) != 1 || pe.Errors[0].Field != "cursor" {
					t.Errorf("%s's cursor given to %s: %q, %v", from, to, key, err)
				}
			}
		}
	}
}

func FuzzDecodeObject(f *testing.F) {
	f.Add([]byte(`{"a":0.1,"b":[1,2,{"c":null}]}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := platform.DecodeObject(b)
		if err == nil && m == nil {
			t.Fatal("nil object without error")
		}
	})
}

// TestEntitiesOfATypeNoLongerDeclared: after the domain loses a type (a
// restart or reload without its manifest), every write to a stored entity
// of it is the contract's unknown entity type, naming the entity, and
// changes nothing; reads still serve it.
func TestEntitiesOfATypeNoLongerDeclared(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		ctx := context.Background()
		svc := newService(t, backend, 10)
		if _, err := svc.CreateEntity(ctx, "t1", platform.CreateEntityInput{Type: "account", ID: "acct-1", Fields: map[string]any{"name": "One"}}); err != nil {
			t.Fatal(err)
		}
		without, err := manifest.ParseDomain("test.yaml", []byte(`
name: test
version: "2"
entities:
  counter:
    ledger: capped
    fields: {}
    facts: [tick]
`))
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.SetDomain(without); err != nil {
			t.Fatal(err)
		}
		const want = "Unknown entity type: account (the type of entity acct-1, which no domain manifest declares now)"
		writes := map[string]func() error{
			"append fact": func() error {
				_, err := svc.AppendFact(ctx, "t1", platform.AppendFactInput{EntityID: "acct-1", Type: "deposit"})
				return err
			},
			"update": func() error {
				_, err := svc.UpdateEntity(ctx, "t1", platform.UpdateEntityInput{ID: "acct-1", ExpectedVersion: 1, Patch: map[string]any{"name": "Two"}})
				return err
			},
			"command": func() error {
				_, err := svc.RunCommand(ctx, "t1", "acct-1", ledger.CommandAppend, json.RawMessage(`{"type":"deposit"}`), platform.Provenance{})
				return err
			},
		}
		for name, write := range writes {
			var pe *problem.Error
			if err := write(); !errors.As(err, &pe) || pe.Kind != problem.BadRequest || pe.Detail != want {
				t.Errorf("%s: %v, want a bad request %q", name, err, want)
			}
		}
		e, err := svc.LoadEntity(ctx, "t1", "acct-1")
		if err != nil {
			t.Fatal(err)
		}
		if e.Version != 1 {
			t.Errorf("entity at version %d after refused writes, want 1", e.Version)
		}
		assertNoFacts(t, svc, "acct-1")
	})
}
