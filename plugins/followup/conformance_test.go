package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/factline/factline/sdk/abi"
	"github.com/factline/factline/sdk/conformance"
)

// TestConformance builds the plugin module and runs the conformance kit on
// it, as `factline plugin test followup.wasm` does.
func TestConformance(t *testing.T) {
	t.Parallel()
	module, err := conformance.Build(t.Context(), ".")
	if err != nil {
		t.Fatal(err)
	}
	fact := func(subtype, data string) abi.Fact {
		return abi.Fact{ID: "fct_1", Type: "outcome", Subtype: subtype, TenantID: "t1", EntityID: "line-1", EntityType: "asset",
			Seq: 3, Position: 912, Timestamp: 1764000000000, Data: json.RawMessage(data)}
	}
	conformance.Run(t, module, conformance.Options{
		Facts: map[string][]abi.Fact{"no_answer_followup": {
			fact("no_answer", `{"contact_id":"c-9"}`), fact("no_answer", `{}`), fact("deal_won", `{}`),
		}},
		Host: conformance.HostOptions{CacheDir: filepath.Join(os.TempDir(), "factline-wazero-cache"), CallTimeout: time.Second},
	})
}
