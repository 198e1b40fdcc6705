package main

import (
	"context"
	"fmt"
	"io"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/openapi"
)

// runOpenAPI prints the OpenAPI 3.0 description of a gateway manifest (or
// of the platform API alone) as JSON.
func runOpenAPI(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("openapi", "openapi [--manifest FILE] [--domain FILE]... [flags]")
	man := fs.String("manifest", "", "gateway manifest to describe (empty: the platform API alone)")
	var domains listFlag
	fs.Var(&domains, "domain", "domain manifest file or directory layered over the built-in one (repeatable)")
	server := fs.String("server-url", "", "server URL to put in the document")
	docsURL := fs.String("docs-url", openapi.DefaultDocsURL, "base URL of the problem type pages")
	html := fs.Bool("html", false, "print the human API reference page instead of JSON")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	docs, err := checkDocsURL("openapi", *docsURL)
	if err != nil {
		return err
	}
	domain, err := app.LoadDomain(domains...)
	if err != nil {
		return err
	}
	var gw *manifest.Gateway
	if *man != "" {
		if gw, err = manifest.LoadGatewayFile(*man, domain); err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
	}
	doc, err := openapi.Generate(gw, domain, openapi.Options{ServerURL: *server, DocsURL: docs, Version: versionOf(gw), Endpoints: app.Endpoints(true)})
	if err != nil {
		return err
	}
	var out []byte
	if *html {
		out, err = openapi.DocsHTML(doc)
	} else {
		out, err = openapi.JSON(doc)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

func versionOf(gw *manifest.Gateway) string {
	if gw != nil {
		return gw.Version
	}
	return app.Version
}
