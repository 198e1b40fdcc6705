package openapi

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
)

// Version is the OpenAPI version of generated documents.
const Version = "3.0.3"

// DefaultDocsURL is the base of problem type URIs when Options.DocsURL is
// empty (the server's --docs-url default).
const DefaultDocsURL = "https://docs.factline.dev"

// Options tune a generated document.
type Options struct {
	// Title and Version of the API; the gateway manifest's name and version
	// when empty.
	Title, Version string
	// ServerURL, when set, is the document's only server.
	ServerURL string
	// DocsURL is the base of problem type URIs ({DocsURL}/errors/<slug>);
	// DefaultDocsURL when empty.
	DocsURL string
	// Endpoints are the endpoints the server registers besides the
	// manifest's routes (the platform API, mounted endpoints, the server's
	// pages); each is described.
	Endpoints []Endpoint
	// Commands are the commands of each entity type's ledger: the routed
	// ones are described under /v1/entities/{id}/..., and manifest routes
	// of action command take their input and result schemas.
	Commands map[string][]ledger.CommandSpec
}

// builder accumulates one document.
type builder struct {
	doc     *openapi3.T
	domain  *manifest.Domain
	docsURL string
	// opIDs counts the operation ids handed out.
	opIDs map[string]bool
	// paths maps a path's shape (parameters blanked) to the path key that
	// describes it, so routes differing only in parameter names share one.
	paths map[string]string
	tags  []*openapi3.Tag
	tagOK map[string]bool
	// commands are the ledger commands of each entity type, for the
	// manifest routes of action command.
	commands map[string][]ledger.CommandSpec
}

// Generate describes the gateway manifest's routes and the platform /v1
// endpoints as an OpenAPI 3.0.3 document. domain is the domain manifest;
// the entity types gw declares are merged into it. gw may be nil (the
// platform alone) and so may domain (no domain entity types).
func Generate(gw *manifest.Gateway, domain *manifest.Domain, opts Options) (*openapi3.T, error) {
	if domain == nil {
		domain = &manifest.Domain{Entities: map[string]*manifest.EntityType{}}
	}
	merged := domain
	if gw != nil {
		merged = manifest.MergeDomain(domain, gw)
	}
	b := &builder{
		domain:  merged,
		docsURL: strings.TrimRight(opts.DocsURL, "/"),
		opIDs:   map[string]bool{},
		paths:   map[string]string{},
		tagOK:   map[string]bool{},

		commands: opts.Commands,
	}
	if b.docsURL == "" {
		b.docsURL = DefaultDocsURL
	}
	title, version := opts.Title, opts.Version
	if gw != nil {
		title = cmpOr(title, gw.Name)
		version = cmpOr(version, gw.Version)
	}
	b.doc = &openapi3.T{
		OpenAPI: Version,
		Info: &openapi3.Info{
			Title:       cmpOr(title, "Factline gateway"),
			Version:     cmpOr(version, "0.0.0"),
			Description: b.infoDescription(),
		},
		Paths: openapi3.NewPaths(),
		Components: &openapi3.Components{
			Schemas:    openapi3.Schemas{},
			Parameters: openapi3.ParametersMap{},
			Headers:    openapi3.Headers{},
			Responses:  openapi3.ResponseBodies{},
			SecuritySchemes: openapi3.SecuritySchemes{
				securitySchemeName: {Value: &openapi3.SecurityScheme{
					Type:        "apiKey",
					In:          "header",
					Name:        "X-API-Key",
					Description: "An API key (fl_<mode>_<random>). It gives the tenant every read and write is scoped to, and a mode: live, test or admin.",
				}},
			},
		},
		Security: openapi3.SecurityRequirements{apiKeyRequired()},
	}
	if opts.ServerURL != "" {
		b.doc.Servers = openapi3.Servers{{URL: opts.ServerURL}}
	}
	b.fixedSchemas()
	b.entityTypeSchemas()
	b.factTypeSchemas()
	b.fixedResponses()
	// Platform operation ids are fixed names and claimed first, so a
	// manifest route can never take one of them.
	b.platformSchemas()
	for _, e := range opts.Endpoints {
		b.endpoint(e)
	}
	b.ledgerCommands(opts.Commands)
	if gw != nil {
		for _, r := range gw.Routes {
			if err := b.route(r); err != nil {
				return nil, err
			}
		}
	}
	b.doc.Tags = append(b.doc.Tags, b.tags...)
	b.doc.Tags = append(b.doc.Tags, platformTags()...)
	return b.doc, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (b *builder) infoDescription() string {
	return strings.Join([]string{
		"Routes declared in the gateway manifest, and the platform API for entities, facts and configs.",
		"Successful responses wrap the action's output in an envelope: {\"data\": ..., \"meta\": {\"request_id\", \"timestamp\"}}. " +
			"Errors are RFC 7807 problem details with Content-Type application/problem+json; their type is " + b.docsURL + "/errors/<slug>, and a human page explains each slug.",
		"Requests carry an API key in the X-API-Key header unless the route is public; every read and write is scoped to the key's tenant, and another tenant's id answers 404.",
		"Every response carries an X-Request-Id header with the server's id of the request, new for each request; it is meta.request_id and the problem trace_id. A client's own X-Request-Id (up to 128 characters from [A-Za-z0-9_.:-]) is logged beside it as client_request_id.",
		"Timestamps are milliseconds since the epoch (UTC). Numbers in request bodies are kept exactly as sent.",
	}, "\n\n")
}

func apiKeyRequired() openapi3.SecurityRequirement {
	return openapi3.SecurityRequirement{securitySchemeName: []string{}}
}

// security is an operation's requirement: the API key, or explicitly none.
func security(public bool) *openapi3.SecurityRequirements {
	if public {
		return &openapi3.SecurityRequirements{}
	}
	return &openapi3.SecurityRequirements{apiKeyRequired()}
}

// addOperation places op under path (in {param} form) and method.
func (b *builder) addOperation(path, method string, op *openapi3.Operation) {
	item := b.doc.Paths.Value(path)
	if item == nil {
		item = &openapi3.PathItem{}
		b.doc.Paths.Set(path, item)
	}
	item.SetOperation(method, op)
}

// operationID reserves id, or id with the smallest numeric suffix from 2
// that is free.
func (b *builder) operationID(id string) string {
	out := id
	for n := 2; b.opIDs[out]; n++ {
		out = id + strconv.Itoa(n)
	}
	b.opIDs[out] = true
	return out
}

// derivedOperationID names a route after its method and path:
// POST /v1/accounts/:id/deposits is postV1AccountsByIdDeposits.
func derivedOperationID(method, path string) string {
	var sb strings.Builder
	sb.WriteString(strings.ToLower(method))
	segs := splitPath(path)
	if len(segs) == 0 {
		sb.WriteString("Root")
	}
	for _, s := range segs {
		if name, ok := paramName(s); ok {
			sb.WriteString("By")
			s = name
		}
		sb.WriteString(pascal(s))
	}
	return sb.String()
}

// pascal joins the alphanumeric runs of s, each starting upper case.
func pascal(s string) string {
	var sb strings.Builder
	start := true
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			start = true
			continue
		}
		if start {
			r = unicode.ToUpper(r)
			start = false
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// paramName reports whether a path segment is a parameter (":id" or
// "{id}") and returns its name.
func paramName(seg string) (string, bool) {
	if strings.HasPrefix(seg, ":") {
		return seg[1:], true
	}
	if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
		return seg[1 : len(seg)-1], true
	}
	return "", false
}

// templatePath turns a fiber path into an OpenAPI path and lists its
// parameter names. When an earlier route has the same shape with other
// parameter names, its path is reused and the names are its names.
func (b *builder) templatePath(path string) (string, []string) {
	segs := splitPath(path)
	shape := make([]string, len(segs))
	tmpl := make([]string, len(segs))
	for i, s := range segs {
		shape[i], tmpl[i] = s, s
		if name, ok := paramName(s); ok {
			shape[i], tmpl[i] = "{}", "{"+name+"}"
		}
	}
	key := "/" + strings.Join(shape, "/")
	out, seen := b.paths[key]
	if !seen {
		out = "/" + strings.Join(tmpl, "/")
		b.paths[key] = out
	}
	var names []string
	for _, s := range splitPath(out) {
		if name, ok := paramName(s); ok {
			names = append(names, name)
		}
	}
	return out, names
}

// addTag records a tag the first time it is used.
func (b *builder) addTag(name, desc string) {
	if b.tagOK[name] {
		return
	}
	b.tagOK[name] = true
	b.tags = append(b.tags, &openapi3.Tag{Name: name, Description: desc})
}

func article(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

func errf(r *manifest.Route, format string, args ...any) error {
	return fmt.Errorf("openapi: route %s: %s", r.ID(), fmt.Sprintf(format, args...))
}
