package wasm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/factline/factline/internal/host/wasm"
	"github.com/factline/factline/internal/host/wasm/wasmtest"
	"github.com/factline/factline/sdk/abi"
)

// The registry serves the current version of each plugin; the wiring
// installs modules (from an admin request or a plugins directory), calls
// the current version, and remounts routes when a version changes.
func ExampleRegistry() {
	ctx := context.Background()
	paths, err := wasmtest.Build(ctx, wasmtest.Guest{Name: "ledger"}) // a .wasm built from testdata
	if err != nil {
		panic(err)
	}
	module, _ := os.ReadFile(paths[0])

	h, err := wasm.NewHost(wasm.Options{CacheDir: filepath.Join(os.TempDir(), "factline-wasm-test-cache"), PoolSize: 1})
	if err != nil {
		panic(err)
	}
	defer h.Close(ctx)
	reg := wasm.NewRegistry(h)
	reg.OnChange(func(name string, p *wasm.Plugin) {
		fmt.Printf("now serving %s %s\n", name, p.Description().Version)
	})
	if _, err := reg.Install(ctx, module, nil); err != nil {
		panic(err)
	}

	p, _ := reg.Get("ledger")
	res, err := p.Decide(ctx, abi.DecideInput{
		Command: "deposit",
		Entity:  abi.EntityRef{ID: "acct-1", Type: "account", TenantID: "t1", Version: 1},
		Input:   json.RawMessage(`{"amount":"0.10"}`),
		Now:     1764000000000,
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s %s\n", res.Facts[0].Type, res.Facts[0].Data)

	_, err = p.Decide(ctx, abi.DecideInput{Command: "charge", Input: json.RawMessage(`{"amount":"5"}`)})
	var ce *wasm.CallError
	if errors.As(err, &ce) {
		fmt.Println(wasm.StatusName(ce.Status), ce.Code)
	}
	// Output:
	// now serving ledger 1.0.0
	// deposit {"amount":"0.10","currency":"USD"}
	// business_error insufficient_funds
}
