package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/pluginhost"
	"github.com/factline/factline/internal/host/wasm"
	"github.com/factline/factline/plugins"
	"github.com/factline/factline/sdk/abi"
)

// commandRoute is a command route to check, with the domain its entity
// type resolves in.
type commandRoute struct {
	gw     *manifest.Gateway
	domain *manifest.Domain
}

// checkPlugins checks the command routes of each gateway against the
// ledgers described by the plugins given with --plugin and those built
// into the binary, as serve does, and that each plugin given, and each
// built-in one a layered type (layerTypes) names, is a ledger that
// declares the entity types domain gives it. Routes of a ledger neither
// built in nor given are returned as warnings: they are checked at serve
// time. Plugins are described (compiled) only when one is given, a
// layered type names one, or there is a command route.
//
// unsound are the files' domain manifests that have problems of their
// own, each with the entity types whose name and ledger are sound
// (manifest.ParseDomainLedgers): those are held against their ledger
// plugins too, so one run lists every problem.
func checkPlugins(ctx context.Context, domain *manifest.Domain, layerTypes []string, unsound []*manifest.Domain, routes []commandRoute, pluginFiles []string, cacheDir string, logOut io.Writer) (problems, warnings []manifest.Diagnostic, err error) {
	var givenNames []string // the plugins --plugin gives, by name
	builtin := plugins.Builtin()
	ledgers := map[string]bool{}
	// A layered type whose ledger no built-in ledger or plugin here is
	// named, unless a --plugin gives it: serve's admin API refuses such a
	// name, and serve answers 503 for the type's facts and commands until
	// a plugin of that name is loaded.
	var unnamed []*manifest.EntityType
	var layered []*manifest.EntityType
	for _, name := range layerTypes {
		layered = append(layered, domain.Entities[name])
	}
	for _, d := range unsound {
		for _, name := range d.EntityTypeNames() {
			layered = append(layered, d.Entities[name])
		}
	}
	for _, t := range layered {
		switch {
		case t == nil:
		case t.At("").File == app.BuiltinDomainFile:
			// The built-in model's types name the built-in plugins; a
			// binary without them built in is warned by its routes.
		case builtin[t.Ledger] != nil:
			ledgers[t.Ledger] = true
		default:
			if _, ok := ledger.Builtin().Ledger(t.Ledger); !ok {
				unnamed = append(unnamed, t)
			}
		}
	}
	defer func() {
		if err != nil {
			return
		}
		for _, t := range unnamed {
			if !slices.Contains(givenNames, t.Ledger) {
				warnings = append(warnings, t.At(fmt.Sprintf("warning: entities.%s.ledger: no built-in ledger or plugin here is named %q (not built in, no --plugin gives it): "+
					"install the plugin before this manifest; until one of that name is loaded, serve answers 503 for the type's facts and commands", t.Name, t.Ledger)))
			}
		}
	}()
	for _, cr := range routes {
		for _, r := range cr.gw.Routes {
			if r.Action == manifest.ActionCommand {
				if t := cr.domain.Entities[r.Entity]; t != nil {
					ledgers[t.Ledger] = true
				}
			}
		}
	}
	if len(ledgers) == 0 && len(pluginFiles) == 0 {
		return nil, nil, nil
	}
	// The options serve runs plugins with (its flags' defaults), so the
	// compiled code is cached for serve and the next check; one instance
	// is enough to describe a plugin.
	host, err := wasm.NewHost(wasm.Options{
		CacheDir: cacheDir, MemoryLimitMiB: 64, CallTimeout: 100 * time.Millisecond,
		PoolSize: 1, Logger: quietLogger(logOut),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("plugin runtime: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		host.Close(cctx)
	}()
	reg := wasm.NewRegistry(host)
	given := map[string]*wasm.Plugin{}
	for _, file := range pluginFiles {
		module, err := os.ReadFile(file)
		if err != nil {
			return nil, nil, &exitError{code: 1, msg: fmt.Sprintf("--plugin: %v", err)}
		}
		p, err := reg.Install(ctx, module, nil)
		if err != nil {
			return nil, nil, &exitError{code: 1, msg: fmt.Sprintf("--plugin %s: %v", file, err)}
		}
		given[p.Description().Name] = p
		givenNames = append(givenNames, p.Description().Name)
	}
	// A plugin given with --plugin replaces the built-in one of its name,
	// as the plugins directory does in serve.
	names := make([]string, 0, len(ledgers))
	for name := range ledgers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		module, ok := builtin[name]
		if _, loaded := reg.Get(name); !ok || loaded {
			continue
		}
		if _, err := reg.Install(ctx, module, nil); err != nil {
			return nil, nil, fmt.Errorf("built-in plugin %s: %w", name, err)
		}
	}
	// The plugins loaded here are held against the entity types the domain
	// gives them, as serve holds each version it loads.
	kind := func(name string) string {
		if p, ok := reg.Get(name); ok {
			return p.Description().Kind
		}
		return ""
	}
	types := func(name string) ([]string, bool) {
		if p, ok := reg.Get(name); ok && p.Description().Kind == abi.KindLedger {
			return p.Description().EntityTypes, len(p.Description().EntityTypes) > 0
		}
		return nil, false
	}
	for _, d := range append([]*manifest.Domain{domain}, unsound...) {
		if err := manifest.CheckLedgerPlugins(d, kind, types); err != nil {
			problems = append(problems, manifest.Diagnostics("", err)...)
		}
	}
	known := pluginhost.Ledgers{Builtin: ledger.Builtin(), Registry: reg}
	describe := func(name string) ([]manifest.LedgerCommand, bool) {
		specs, ok := known.Described(name)
		if !ok {
			return nil, false
		}
		out := make([]manifest.LedgerCommand, len(specs))
		for i, c := range specs {
			out[i] = manifest.LedgerCommand{Name: c.Name, Method: c.Method, ReadOnly: c.ReadOnly}
		}
		return out, true
	}
	for _, cr := range routes {
		if err := manifest.CheckCommands(cr.gw, cr.domain, describe); err != nil {
			problems = append(problems, manifest.Diagnostics("", err)...)
		}
		for _, r := range cr.gw.Routes {
			t := cr.domain.Entities[r.Entity]
			if r.Action != manifest.ActionCommand || t == nil {
				continue
			}
			if _, ok := describe(t.Ledger); !ok {
				warnings = append(warnings, manifest.Diagnostic{File: r.File, Line: r.Line, Column: r.Column,
					Message: fmt.Sprintf("warning: route %s: ledger %s of entity type %s is not known here (not built in, no --plugin gives it); its command %s is checked at serve time", r.ID(), t.Ledger, r.Entity, r.Command)})
			}
		}
	}
	return problems, warnings, nil
}
