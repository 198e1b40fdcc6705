package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/factline/factline/host/app"
	"github.com/factline/factline/host/manifest"
	"github.com/factline/factline/manifests"
)

func runCheck(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "text", "output format: text or json")
	var domains listFlag
	fs.Var(&domains, "domain", "domain manifest file or directory gateway manifests are checked against, layered over the built-in one like serve does (repeatable; domain manifests among FILEs are layered too)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return usageErr("factline check: --format must be text or json")
	}
	if fs.NArg() == 0 {
		return usageErr("usage: factline check [--format text|json] FILE...")
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
	layer := func(file string, src []byte) {
		// A copy of the built-in manifest is the base itself.
		if bytes.Equal(src, manifests.Domain) {
			return
		}
		d, err := manifest.ParseDomain(file, src)
		if err != nil {
			all = append(all, manifest.Diagnostics(file, err)...)
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
	for _, file := range fs.Args() {
		if !gateways[file] {
			continue
		}
		src := sources[file]
		if _, err := manifest.ParseGateway(file, src, domain); err != nil {
			all = append(all, manifest.Diagnostics(file, err)...)
		}
	}
	if *format == "json" {
		if err := json.NewEncoder(stdout).Encode(map[string]any{"valid": len(all) == 0, "problems": all}); err != nil {
			return err
		}
	} else {
		for _, d := range all {
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
