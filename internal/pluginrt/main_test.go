package pluginrt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// pluginVersion is result.plugin_version of a test ledger's deposit.
func pluginVersion(t *testing.T, res abi.DecideResult) string {
	t.Helper()
	var r struct {
		PluginVersion string `json:"plugin_version"`
	}
	if err := json.Unmarshal(res.Result, &r); err != nil {
		t.Fatalf("result %s: %v", res.Result, err)
	}
	return r.PluginVersion
}

// peek returns the instance at the head of a one-instance pool, leaving it
// there.
func peek(t *testing.T, p *Plugin) *instance {
	t.Helper()
	select {
	case in := <-p.pool:
		p.pool <- in
		return in
	case <-time.After(10 * time.Second):
		t.Fatal("no instance came back to the pool")
		return nil
	}
}
