package wasm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/factline/factline/internal/host/wasm/wasmtest"
	"github.com/factline/factline/sdk/abi"
)

// guests holds the test modules by name; "ledger2" and "ledger3" are the
// ledger built as versions 2.0.0 and 3.0.0.
var guests map[string][]byte

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

func buildGuests() (err error) {
	guests, err = wasmtest.BuildAll(context.Background(), testCacheDir)
	return err
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
func decideInput(command, input string) abi.DecideInput { return wasmtest.DecideInput(command, input) }

// handleInput is a handle call of the test subscription.
func handleInput() abi.HandleInput { return wasmtest.HandleInput() }
