package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/manifests"
)

const checkSynopsis = "check [--format text|json] [--domain FILE]... [--plugin FILE.wasm]... FILE..."

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", checkSynopsis)
	format := fs.String("format", "text", "output format: text or json")
	var domains listFlag
	fs.Var(&domains, "domain", "domain manifest file or directory gateway manifests are checked against, layered over the built-in one like serve does (repeatable; domain manifests among FILEs are layered too)")
	var pluginFiles listFlag
	fs.Var(&pluginFiles, "plugin", "plugin module (FILE.wasm) whose commands the command routes are checked against, besides the plugins built into the binary (repeatable)")
	pluginCache := fs.String("plugin-cache-dir", "", "where compiled plugins are cached, shared with serve (default: the user cache dir)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return usageErr("factline check: --format must be text or json")
	}
	if fs.NArg() == 0 {
		return usageErr("usage: factline %s", checkSynopsis)
	}
	all := []manifest.Diagnostic{}
	sources := map[string][]byte{}
	// gateways remembers which files are gateway manifests: telling them
	// apart parses the file, which is worth doing once for a large one.
	gateways := map[string]bool{}
	// Domain manifests are layered over the built-in one exactly as serve
	// does; gateway manifests are checked against the result.
	files, err := manifest.DomainFiles(domains)
	if err != nil {
		return &exitError{code: 1, msg: fmt.Sprintf("--domain: %v", err)}
	}
	var layers []*manifest.Domain
	var unsound []*manifest.Domain // layers with problems, their sound types' ledgers only
	seen := [][]byte{manifests.Domain}
	layer := func(file string, src []byte) {
		// A copy of the built-in manifest is the base itself, and a copy
		// of an earlier layer that layer.
		if manifest.RepeatsLayer(src, seen) {
			return
		}
		seen = append(seen, src)
		d, err := manifest.ParseDomain(file, src)
		if err != nil {
			all = append(all, manifest.Diagnostics(file, err)...)
			if partial := manifest.ParseDomainLedgers(file, src); partial != nil {
				unsound = append(unsound, partial)
			}
			return
		}
		layers = append(layers, d)
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("--domain: %v", err)}
		}
		layer(file, src)
	}
	for _, file := range fs.Args() {
		src, err := os.ReadFile(file)
		if err != nil {
			all = append(all, manifest.Diagnostic{File: file, Message: err.Error()})
			continue
		}
		sources[file] = src
		if manifest.IsGateway(src) {
			gateways[file] = true
			continue
		}
		layer(file, src)
	}
	domain, err := manifest.ParseDomain(app.BuiltinDomainFile, manifests.Domain)
	if err != nil {
		return err
	}
	if merged, err := manifest.Layer(domain, layers...); err != nil {
		all = append(all, manifest.Diagnostics("", err)...)
	} else {
		domain = merged
	}
	// The routes domain manifests carry follow each gateway manifest's
	// (or stand alone), and command routes are checked against the
	// ledgers' commands, as serve does.
	var commandRoutes []commandRoute
	withLayerRoutes := func(file string, g *manifest.Gateway) {
		lg, err := manifest.LayerRoutes(domain, g)
		if err != nil {
			all = append(all, manifest.Diagnostics(file, err)...)
			return
		}
		if lg != nil {
			commandRoutes = append(commandRoutes, commandRoute{gw: lg, domain: manifest.MergeDomain(domain, lg)})
		}
	}
	// Command routes are checked in every gateway manifest that parses,
	// whatever the problems elsewhere (the parse has checked its entity
	// types against the same model), so one run lists every problem.
	anyGateway := false
	for _, file := range fs.Args() {
		if !gateways[file] {
			continue
		}
		anyGateway = true
		src := sources[file]
		g, err := manifest.ParseGatewayPartial(file, src, domain)
		if err != nil {
			all = append(all, manifest.Diagnostics(file, err)...)
			// The command routes that are sound in themselves are still
			// held against their ledgers, so one run lists every problem.
			if sound := soundCommandRoutes(g, domain); sound != nil {
				commandRoutes = append(commandRoutes, commandRoute{gw: sound, domain: manifest.MergeDomain(domain, sound)})
			}
			continue
		}
		withLayerRoutes(file, g)
	}
	if !anyGateway {
		withLayerRoutes("", nil)
	}
	if *pluginCache == "" {
		*pluginCache = app.DefaultPluginCacheDir("./data")
	}
	// The types the layers declare or redeclare are held against their
	// built-in ledger plugins; the built-in model's own always fit.
	var layerTypes []string
	for _, l := range layers {
		layerTypes = append(layerTypes, l.EntityTypeNames()...)
	}
	problems, warnings, err := checkPlugins(ctx, domain, layerTypes, unsound, commandRoutes, pluginFiles, *pluginCache, stderr)
	if err != nil {
		return err
	}
	all = append(all, problems...)
	// A layer's route is checked with each gateway manifest: said once.
	all, warnings = dedupeDiagnostics(all), dedupeDiagnostics(warnings)
	// The problems come from several checks (the parse, the layering, the
	// command routes against their ledgers): each file's are listed from
	// its top to its bottom, as one check lists them.
	manifest.SortDiagnostics(all)
	manifest.SortDiagnostics(warnings)
	if *format == "json" {
		if warnings == nil {
			warnings = []manifest.Diagnostic{}
		}
		if err := json.NewEncoder(stdout).Encode(map[string]any{"valid": len(all) == 0, "problems": all, "warnings": warnings}); err != nil {
			return err
		}
	} else {
		for _, d := range append(all, warnings...) {
			fmt.Fprintln(stdout, d.String())
		}
		if len(all) == 0 {
			fmt.Fprintf(stdout, "ok: %d file(s) valid\n", fs.NArg())
		}
	}
	if len(all) > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d problem(s) found", len(all))}
	}
	return nil
}

func quietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func dedupeDiagnostics(in []manifest.Diagnostic) []manifest.Diagnostic {
	seen := map[manifest.Diagnostic]bool{}
	out := in[:0]
	for _, d := range in {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// soundCommandRoutes is a gateway of the command routes of g (a manifest
// with problems) that name a method, a command and an entity type the
// model or g declares, or nil when there are none.
func soundCommandRoutes(g *manifest.Gateway, domain *manifest.Domain) *manifest.Gateway {
	if g == nil {
		return nil
	}
	declared := map[string]bool{}
	for _, e := range g.Entities {
		declared[e.Name] = true
	}
	out := &manifest.Gateway{Name: g.Name, Version: g.Version, Entities: g.Entities}
	for _, r := range g.Routes {
		known := domain.Entities[r.Entity] != nil || declared[r.Entity]
		if r.Action == manifest.ActionCommand && r.Command != "" && known && slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, r.Method) {
			out.Routes = append(out.Routes, r)
		}
	}
	if len(out.Routes) == 0 {
		return nil
	}
	return out
}
