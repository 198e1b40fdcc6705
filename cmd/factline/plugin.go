package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/sdk/conformance"
)

var pluginCommands = []command{
	{name: "test", summary: "run the conformance kit on a plugin module (plugin test FILE.wasm)", run: runPluginTest},
}

var ledgerCommands = []command{
	{name: "rebuild", summary: "re-derive the snapshots of one entity type of a tenant", run: runLedgerRebuild},
}

// runPluginTest: factline plugin test FILE.wasm runs the conformance kit.
func runPluginTest(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("plugin test", pluginTestSynopsis)
	timeout := fs.Duration("timeout", 100*time.Millisecond, "deadline of one plugin call, as the gateway runs it; above 0")
	memory := fs.Int("memory-mib", 64, "memory cap of one instance, as the gateway runs it; 8 to 4096")
	calls := fs.Int("calls", 10000, "calls of the memory check, at least 1")
	inputs := inputFlag{}
	fs.Var(inputs, "input", "sample input COMMAND=JSON for the determinism, replay and memory checks (repeatable)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("factline plugin test: want one FILE.wasm, got %d arguments %v\nusage: factline %s", fs.NArg(), fs.Args(), pluginTestSynopsis)
	}
	if err := checkPluginLimits("plugin test", "--memory-mib", *memory, "--timeout", *timeout); err != nil {
		return err
	}
	if *calls < 1 {
		return usageErr("factline plugin test: --calls must be at least 1, got %d", *calls)
	}
	module, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	ok := conformance.Test(ctx, stdout, module, conformance.Options{
		Host:   conformance.HostOptions{CallTimeout: *timeout, MemoryLimitMiB: *memory},
		Calls:  *calls,
		Inputs: inputs,
	})
	if !ok {
		return &exitError{code: 1, msg: fmt.Sprintf("%s does not conform to the plugin ABI", fs.Arg(0))}
	}
	return nil
}

const pluginTestSynopsis = "plugin test [--timeout D] [--memory-mib N] [--calls N] [--input COMMAND=JSON]... FILE.wasm"

// inputFlag collects --input COMMAND=JSON, repeatable: the sample inputs
// per command the conformance kit calls the plugin with.
type inputFlag map[string][]string

func (f inputFlag) String() string { return "" }

func (f inputFlag) Set(v string) error {
	cmd, input, ok := strings.Cut(v, "=")
	switch {
	case !ok || cmd == "":
		return errors.New("want COMMAND=JSON, for example earn='{\"points\":5}'")
	case !json.Valid([]byte(input)):
		return fmt.Errorf("input of %s is not valid JSON: %s", cmd, input)
	}
	f[cmd] = append(f[cmd], input)
	return nil
}

// runLedgerRebuild: factline ledger rebuild re-derives entity snapshots by
// replaying facts through the entity type's ledger.
func runLedgerRebuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ledger rebuild", "ledger rebuild --tenant T --entity-type TYPE [flags]")
	var sf storeFlags
	sf.register(fs)
	tenant := fs.String("tenant", "", "tenant whose entities to rebuild (required)")
	typ := fs.String("entity-type", "", "entity type to rebuild (required)")
	var domains listFlag
	fs.Var(&domains, "domain", "domain manifest file or directory layered over the built-in one (repeatable)")
	gatewayManifest := fs.String("manifest", "", "gateway (route) manifest whose entity types to know, as serve --manifest")
	pluginsDir := fs.String("plugins-dir", "", "directory of plugin modules (*.wasm)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *tenant == "" || *typ == "" {
		return usageErr("factline ledger rebuild: --tenant and --entity-type are required")
	}
	if err := sf.requireStore("ledger rebuild"); err != nil {
		return err
	}
	a, err := app.New(ctx, app.Config{DatabaseURL: sf.databaseURL, DataDir: sf.dataDir, Domains: domains, Manifest: *gatewayManifest,
		PluginsDir: *pluginsDir, Logger: quietLogger(stderr), PlatformOnly: true})
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Plugins.WaitLoaded(ctx); err != nil {
		return err
	}
	res, err := a.Platform.RebuildSnapshots(ctx, *tenant, *typ)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rebuilt %d %s entities of tenant %s from %d facts; %d snapshots changed\n", res.Entities, *typ, *tenant, res.Facts, res.Changed)
	return nil
}
