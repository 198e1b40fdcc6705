package wasmtest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/factline/factline/sdk/abi"
)

// BuildAll builds every guest, plus the ledger as versions 2.0.0 and
// 3.0.0 ("ledger2", "ledger3"), fills the compilation cache cacheDir with
// a build made without the race detector (which makes wazero's compiler
// about fifteen times slower), and returns the modules by name.
func BuildAll(ctx context.Context, cacheDir string) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	specs := []Guest{
		{Name: "ledger", LDFlags: "-X=main.version=2.0.0"},
		{Name: "ledger", LDFlags: "-X=main.version=3.0.0"},
	}
	names := []string{"ledger2", "ledger3"}
	for _, g := range Guests {
		specs = append(specs, Guest{Name: g})
		names = append(names, g)
	}
	paths, err := Build(ctx, specs...)
	if err != nil {
		return nil, err
	}
	bins, err := Read(paths)
	if err != nil {
		return nil, err
	}
	if err := Precompile(ctx, cacheDir, true, paths...); err != nil {
		return nil, err
	}
	guests := make(map[string][]byte, len(names))
	for i, n := range names {
		guests[n] = bins[i]
	}
	return guests, nil
}

// DecideInput is a decide call of the test ledger.
func DecideInput(command, input string) abi.DecideInput {
	return abi.DecideInput{
		Command: command,
		Entity:  abi.EntityRef{ID: "acct-1", Type: "account", TenantID: "t1", Version: 3},
		State:   json.RawMessage(`{"balance":"10.00","facts":2}`),
		Input:   json.RawMessage(input),
		Now:     1764000000000,
	}
}

// HandleInput is a handle call of the test subscription.
func HandleInput() abi.HandleInput {
	return abi.HandleInput{Handler: "followup", Fact: abi.Fact{ID: "fct_1", Type: "outcome", Timestamp: 1}}
}
