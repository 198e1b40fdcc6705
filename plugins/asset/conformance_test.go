package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/factline/factline/sdk/conformance"
)

// TestConformance builds the plugin module and runs the conformance kit on
// it, as `factline plugin test asset.wasm` does.
func TestConformance(t *testing.T) {
	t.Parallel()
	module, err := conformance.Build(t.Context(), ".")
	if err != nil {
		t.Fatal(err)
	}
	conformance.Run(t, module, conformance.Options{
		Inputs: map[string][]string{
			"record_invocation": {`{"subtype":"call","data":{"to":"+15550100"}}`, `{}`},
			"record_outcome":    {`{"subtype":"no_answer","data":{"contact_id":"c1"}}`, `{"subtype":"deal_won"}`, `{}`},
			"append":            {`{"type":"outcome","subtype":"answered"}`, `{"type":"invocation"}`, `{"type":"note"}`},
		},
		Host: conformance.HostOptions{CacheDir: filepath.Join(os.TempDir(), "factline-wazero-cache"), CallTimeout: time.Second},
	})
}
