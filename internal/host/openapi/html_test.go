package openapi_test

import (
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/factline/factline/internal/host/openapi"
)

var (
	// resourceAttr finds every attribute that makes a browser fetch
	// something (or navigate) and its value.
	resourceAttr = regexp.MustCompile(`(?i)\b(src|href|action|srcset|poster|data)\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)`)
	tagRe        = regexp.MustCompile(`(?i)<(script|link|iframe|img|object|embed|base)\b`)
)

func TestDocsHTML(t *testing.T) {
	t.Parallel()
	gw, domain := repoManifests(t)
	doc := generate(t, gw, domain, goldenOptions)
	page, err := openapi.DocsHTML(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	if !strings.HasPrefix(s, "<!DOCTYPE html>") || !strings.Contains(s, "</html>") {
		t.Fatal("not an HTML page")
	}

	// Every path with every method, summary and operation anchor.
	for _, path := range doc.Paths.Keys() {
		for method, o := range doc.Paths.Value(path).Operations() {
			for _, want := range []string{
				`<code>` + html.EscapeString(path) + `</code>`,
				`id="op-` + o.OperationID + `"`,
				`>` + method + `</span> <code>` + html.EscapeString(path) + `</code>`,
				html.EscapeString(o.Summary),
			} {
				if !strings.Contains(s, want) {
					t.Errorf("%s %s: page lacks %q", method, path, want)
				}
			}
		}
	}
	text := html.UnescapeString(s)
	for _, want := range []string{
		"Public: no authentication",                             // /health, /v1/status
		"Requires API key in the header X-API-Key (ApiKeyAuth)", // api_key routes
		"Idempotency-Key",                                       // a header parameter
		`id="schema-Problem"`,                                   // the component schemas
		`href="#schema-account.Entity"`,                         // links to them
		"application/problem+json",                              // error content
		"Retry-After",                                           // the 429 header
		`<span class="status error">429</span>`,                 // a rate-limited route
		"Emit a deposit fact on an account",                     // a route's summary
		"one of: active, unsubscribed, bounced, archived",       // an enum
	} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	// Self-contained: nothing is fetched from anywhere.
	if m := tagRe.FindAllString(s, -1); len(m) > 0 {
		t.Errorf("page has external-resource elements: %v", m)
	}
	for _, m := range resourceAttr.FindAllStringSubmatch(s, -1) {
		v := strings.Trim(m[2], `"'`)
		if !strings.HasPrefix(v, "#") {
			t.Errorf("attribute %s=%q is not an in-page anchor", m[1], v)
		}
	}
	for _, bad := range []string{"@import", "url(", "@font-face"} {
		if strings.Contains(s, bad) {
			t.Errorf("style fetches something: %q", bad)
		}
	}
}

// A document read back by kin-openapi's loader renders the same page.
func TestDocsHTMLOfLoadedDocument(t *testing.T) {
	t.Parallel()
	gw, domain := repoManifests(t)
	doc := generate(t, gw, domain, goldenOptions)
	direct, err := openapi.DocsHTML(doc)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := openapi.DocsHTML(roundTrip(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	if string(direct) != string(loaded) {
		t.Errorf("the page of the loaded document differs (%d bytes, %d bytes)", len(direct), len(loaded))
	}
}

func TestDocsHTMLEscapes(t *testing.T) {
	t.Parallel()
	gw, domain := parse(t, `
name: "<script>alert(1)</script>"
version: "1"
entities:
  note:
    description: "<img src=x onerror=alert(1)> & more"
    fields: {body: {type: string}}
    facts: [written]
routes:
  - {path: /notes/:id, method: GET, entity: note, action: get}
`)
	page, err := openapi.DocsHTML(generate(t, gw, domain, openapi.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, bad := range []string{"<script>alert", "<img src=x"} {
		if strings.Contains(s, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	if !strings.Contains(s, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("title is not shown escaped")
	}
	if !strings.Contains(s, "/notes/{id}") {
		t.Error("page lacks the route's path")
	}
}

func TestDocsHTMLNil(t *testing.T) {
	t.Parallel()
	if _, err := openapi.DocsHTML(nil); err == nil {
		t.Error("DocsHTML(nil) succeeded")
	}
	if _, err := openapi.JSON(nil); err == nil {
		t.Error("JSON(nil) succeeded")
	}
}
