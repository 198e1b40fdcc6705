package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/sdk/conformance"
)

// runPlugin: factline plugin test FILE.wasm runs the conformance kit.
func runPlugin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "test" {
		return usageErr(pluginTestUsage)
	}
	fs := flag.NewFlagSet("plugin test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 100*time.Millisecond, "deadline of one plugin call, as the gateway runs it")
	memory := fs.Int("memory-mib", 64, "memory cap of one instance, as the gateway runs it")
	calls := fs.Int("calls", 10000, "calls of the memory check")
	inputs := inputFlag{}
	fs.Var(inputs, "input", "sample input COMMAND=JSON for the determinism, replay and memory checks (repeatable)")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr(pluginTestUsage)
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

const pluginTestUsage = "usage: factline plugin test [--timeout D] [--memory-mib N] [--input COMMAND=JSON]... FILE.wasm"

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

// runLedger: factline ledger rebuild re-derives entity snapshots by
// replaying facts through the entity type's ledger.
func runLedger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "rebuild" {
		return usageErr("usage: factline ledger rebuild --tenant T --entity-type TYPE [store flags]")
	}
	fs := flag.NewFlagSet("ledger rebuild", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf storeFlags
	sf.register(fs)
	tenant := fs.String("tenant", "", "tenant whose entities to rebuild (required)")
	typ := fs.String("entity-type", "", "entity type to rebuild (required)")
	var domains listFlag
	fs.Var(&domains, "domain", "domain manifest file or directory layered over the built-in one (repeatable)")
	pluginsDir := fs.String("plugins-dir", "", "directory of plugin modules (*.wasm)")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if *tenant == "" || *typ == "" {
		return usageErr("factline ledger rebuild: --tenant and --entity-type are required")
	}
	a, err := app.New(ctx, app.Config{DatabaseURL: sf.databaseURL, DataDir: sf.dataDir, Domains: domains, PluginsDir: *pluginsDir, Logger: quietLogger(stderr)})
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
