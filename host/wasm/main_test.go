package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/factline/factline/host/wasm/wasmtest"
	"github.com/factline/factline/sdk/abi"
)

// guests holds the test modules by name; "ledger2" and "ledger3" are the
// ledger built as versions 2.0.0 and 3.0.0.
var guests = map[string][]byte{}

// testCacheDir is the compilation cache the tests share (and keep between
// runs, like a product's cache directory), so each module is compiled once.
var testCacheDir = filepath.Join(os.TempDir(), "factline-wasm-test-cache")

func TestMain(m *testing.M) {
	if err := buildGuests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

func buildGuests() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	specs := []wasmtest.Guest{
		{Name: "ledger", LDFlags: "-X=main.version=2.0.0"},
		{Name: "ledger", LDFlags: "-X=main.version=3.0.0"},
	}
	names := []string{"ledger2", "ledger3"}
	for _, g := range wasmtest.Guests {
		specs = append(specs, wasmtest.Guest{Name: g})
		names = append(names, g)
	}
	paths, err := wasmtest.Build(ctx, specs...)
	if err != nil {
		return err
	}
	bins, err := wasmtest.Read(paths)
	if err != nil {
		return err
	}
	// Fill the shared compilation cache with a normally built helper: the
	// race detector makes wazero's compiler about fifteen times slower.
	if err := wasmtest.Precompile(ctx, testCacheDir, true, paths...); err != nil {
		return err
	}
	for i, n := range names {
		guests[n] = bins[i]
	}
	return nil
}

// newHost returns a host on the shared cache, closed when t ends.
func newHost(t *testing.T, opts Options) *Host {
	t.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = testCacheDir
	}
	h, err := NewHost(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Errorf("close host: %v", err)
		}
	})
	return h
}

// load loads guest name into h.
func load(t *testing.T, h *Host, name string) *Plugin {
	t.Helper()
	p, err := h.Load(t.Context(), guests[name])
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return p
}

// decideInput is a decide call of the test ledger.
func decideInput(command, input string) abi.DecideInput {
	return abi.DecideInput{
		Command: command,
		Entity:  abi.EntityRef{ID: "acct-1", Type: "account", TenantID: "t1", Version: 3},
		State:   json.RawMessage(`{"balance":"10.00","facts":2}`),
		Input:   json.RawMessage(input),
		Now:     1764000000000,
	}
}

// handleInput is a handle call of the test subscription.
func handleInput() abi.HandleInput {
	return abi.HandleInput{Handler: "followup", Fact: abi.Fact{ID: "fct_1", Type: "outcome", Timestamp: 1}}
}
