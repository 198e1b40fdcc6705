package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/factline/factline/host/manifest"
	"github.com/factline/factline/manifests"
)

func runCheck(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "text", "output format: text or json")
	domainPath := fs.String("domain", "", "domain manifest gateway manifests are checked against (default: a domain manifest among FILEs, else the built-in one)")
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
	var domain *manifest.Domain
	// Domain manifests first: gateway manifests are checked against them.
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
		d, err := manifest.ParseDomain(file, src)
		if err != nil {
			all = append(all, manifest.Diagnostics(file, err)...)
		} else if domain == nil {
			domain = d
		}
	}
	if *domainPath != "" {
		d, err := manifest.LoadDomainFile(*domainPath)
		if err != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("--domain: %v", err)}
		}
		domain = d
	}
	if domain == nil {
		d, err := manifest.ParseDomain("built-in domain.yaml", manifests.Domain)
		if err != nil {
			return err
		}
		domain = d
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
