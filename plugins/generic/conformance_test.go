package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/factline/factline/sdk/conformance"
)

// TestConformance builds the plugin module and runs the conformance kit on
// it, as `factline plugin test generic.wasm` does: raw appends of every
// fact type, against each of the six entity types.
func TestConformance(t *testing.T) {
	t.Parallel()
	module, err := conformance.Build(t.Context(), ".")
	if err != nil {
		t.Fatal(err)
	}
	var appends []string
	for _, t := range Ledger.Emits {
		appends = append(appends, `{"type":"`+t+`","subtype":"conformance","data":{"n":1}}`)
	}
	conformance.Run(t, module, conformance.Options{
		Inputs: map[string][]string{"append": appends},
		Host:   conformance.HostOptions{CacheDir: filepath.Join(os.TempDir(), "factline-wazero-cache"), CallTimeout: time.Second},
	})
}
