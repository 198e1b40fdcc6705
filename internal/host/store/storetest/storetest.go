// Package storetest is the conformance suite every [store.Store]
// implementation runs, so the Postgres and SQLite stores cannot drift apart.
//
// An implementation's test calls [Run] with a [Factory]:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, hooks store.Hooks) store.Store {
//			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"), sqlite.Options{Hooks: hooks})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// What the suite assumes of an implementation, beyond the documentation of
// package store:
//
//   - Every subtest calls the factory once (the Close test aside) and expects
//     a fresh, empty store: fact positions start at 1. Subtests share
//     nothing, so they run in parallel (t.Parallel): the factory must be
//     safe for concurrent use, each call opening a store of its own.
//   - The suite closes each store it gets from the factory through
//     t.Cleanup; the factory must not close it, but may register its own
//     cleanup (dropping a schema, say), which then runs after Close.
//   - Sentinel errors are matched with errors.Is, so they may be wrapped.
//   - JSON columns are compared by decoded value, never byte for byte.
//   - Ids used for ordering (entities, configs, API keys) are ASCII letters
//     and digits of equal length, so byte order and any collation agree.
//   - Limits passed to listings are always positive.
//   - Hooks.BeforeAppendCommit is called once per AppendFacts call, after
//     the items are written and before the commit.
//   - Losers of a race on PutConfigVersion get ErrVersionConflict (a unique
//     violation on (tenant, id, version) must be mapped to it).
//   - A missing idempotency record makes CompleteIdempotency return
//     ErrNotFound.
//   - Idempotency times avoid the boundaries: a record is tested either well
//     before or well after ExpiresAt and LockedUntil.
package storetest

import (
	"testing"

	"github.com/factline/factline/internal/host/store"
)

// Factory opens a fresh, empty store for one (sub)test; hooks may be the zero
// value.
type Factory func(t *testing.T, hooks store.Hooks) store.Store

// Run runs every conformance test against the implementation.
func Run(t *testing.T, open Factory) {
	groups := []struct {
		name  string
		tests []test
	}{
		{"Entity", entityTests},
		{"Fact", factTests},
		{"Config", configTests},
		{"APIKey", apiKeyTests},
		{"Idempotency", idempotencyTests},
		{"Checkpoint", checkpointTests},
		{"Plugin", pluginTests},
		{"Webhook", webhookTests},
		{"TenantIsolation", isolationTests},
		{"Lifecycle", lifecycleTests},
		{"Input", inputTests},
		{"DomainUsage", usageTests},
		{"Session", sessionTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, open)
				})
			}
		})
	}
}

// test is one conformance test.
type test struct {
	name string
	fn   func(t *testing.T, open Factory)
}

// setup opens a store with the given hooks and closes it when the test ends.
func setup(t *testing.T, open Factory, hooks store.Hooks) store.Store {
	t.Helper()
	s := open(t, hooks)
	if s == nil {
		t.Fatal("factory returned a nil store")
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}
