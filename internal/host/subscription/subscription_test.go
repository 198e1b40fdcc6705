package subscription_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/subscription"
	"github.com/factline/factline/internal/host/wasm"
	"github.com/factline/factline/internal/lifecycle"
	"github.com/factline/factline/internal/teststore"
	"github.com/factline/factline/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// noHandlers serves no handler: consumers run and retry, which is all
// these tests look at.
type noHandlers struct{}

func (noHandlers) SubscriptionHandler(string) (*wasm.Plugin, bool) { return nil, false }

func sub(name, pattern string) manifest.Subscription {
	return manifest.Subscription{Name: name, Patterns: []string{pattern}, Handler: "h"}
}

// TestRunnerFollowsTheSet: Set before Start only records; Start runs a
// consumer per subscription; Set adds and removes them while running; a
// second Start is an error; Set after Stop starts nothing.
func TestRunnerFollowsTheSet(t *testing.T) {
	st := teststore.Open(t, "sqlite")
	domain, err := manifest.ParseDomain("d.yaml", []byte("name: d\nversion: \"1\"\nentities:\n  thing:\n    ledger: builtin\n    fields: {}\n    facts: [made]\n"))
	if err != nil {
		t.Fatal(err)
	}
	plat, err := platform.New(platform.Options{Store: st, Domain: domain, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plat.Close)
	r, err := subscription.New(subscription.Options{Platform: plat, Store: st, Handlers: noHandlers{},
		Subscriptions: []manifest.Subscription{sub("a", "thing.made")}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r.Set([]manifest.Subscription{sub("a", "thing.made"), sub("b", "thing.made")})
	if got := r.Running(); len(got) != 0 {
		t.Fatalf("running before Start: %v", got)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := r.Running(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("running after Start: %v", got)
	}
	r.Set([]manifest.Subscription{sub("b", "thing.other"), sub("c", "thing.made")})
	if got := r.Running(); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("running after Set: %v", got)
	}
	if err := r.Start(t.Context()); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.Set([]manifest.Subscription{sub("d", "thing.made")})
	if got := r.Running(); len(got) != 0 {
		t.Fatalf("running after Stop and Set: %v", got)
	}
}
