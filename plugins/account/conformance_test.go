package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/factline/factline/sdk/conformance"
)

// TestConformance builds the plugin module and runs the conformance kit on
// it, as `factline plugin test account.wasm` does.
func TestConformance(t *testing.T) {
	t.Parallel()
	module, err := conformance.Build(t.Context(), ".")
	if err != nil {
		t.Fatal(err)
	}
	conformance.Run(t, module, conformance.Options{
		Inputs: map[string][]string{
			"deposit": {`{"amount":0.1}`, `{"amount":"25.50","currency":"USD","reference":"r-1"}`},
			"charge":  {`{"amount":1}`, `{"amount":1000,"allow_overdraft":true}`, `{"amount":1000}`},
			"credit":  {`{"amount":0.5}`},
			"payout":  {`{"amount":2}`},
			"cost":    {`{"amount":0.25}`},
			"append":  {`{"type":"deposit","subtype":"wire","data":{"amount":3}}`, `{"type":"cost","data":{"amount":-1}}`},
		},
		// A second rather than the host's 100ms: a busy test machine must not
		// fail a sound call; a runaway one is stopped all the same.
		Host: conformance.HostOptions{CacheDir: filepath.Join(os.TempDir(), "factline-wazero-cache"), CallTimeout: time.Second},
	})
}
