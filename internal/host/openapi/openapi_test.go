package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/factline/factline/internal/host/app"
	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/openapi"
	"github.com/factline/factline/internal/host/problem"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const golden = "testdata/gateway.openapi.json"

// goldenOptions are the options the golden file is generated with.
var goldenOptions = openapi.Options{
	Title:     "Factline gateway",
	ServerURL: "http://localhost:8080",
	DocsURL:   "https://docs.factline.dev",
	Endpoints: app.Endpoints(true),
}

// repoManifests loads the manifests the product ships.
func repoManifests(t *testing.T) (*manifest.Gateway, *manifest.Domain) {
	t.Helper()
	domain, err := manifest.LoadDomainFile("../../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := manifest.LoadGatewayFile("../../../manifests/gateway.yaml", domain)
	if err != nil {
		t.Fatal(err)
	}
	return gw, domain
}

// generate describes gw with the endpoints a server registers unless opts
// names others.
func generate(t *testing.T, gw *manifest.Gateway, domain *manifest.Domain, opts openapi.Options) *openapi3.T {
	t.Helper()
	if opts.Endpoints == nil {
		opts.Endpoints = app.Endpoints(true)
	}
	doc, err := openapi.Generate(gw, domain, opts)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return doc
}

// roundTrip renders doc, loads it back with kin-openapi's loader and
// validates the result; it returns the loaded document.
func roundTrip(t *testing.T, doc *openapi3.T) *openapi3.T {
	t.Helper()
	ctx := context.Background()
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("generated document is invalid: %v", err)
	}
	b, err := openapi.JSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatalf("load rendered document: %v", err)
	}
	if err := loaded.Validate(ctx); err != nil {
		t.Fatalf("rendered document is invalid: %v", err)
	}
	return loaded
}

// openAPIPath turns a fiber path into its OpenAPI form.
func openAPIPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") {
			segs[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(segs, "/")
}

func op(t *testing.T, doc *openapi3.T, method, path string) *openapi3.Operation {
	t.Helper()
	item := doc.Paths.Value(path)
	if item == nil {
		t.Fatalf("no path %s; paths: %v", path, doc.Paths.Keys())
	}
	o := item.GetOperation(method)
	if o == nil {
		t.Fatalf("no operation %s %s", method, path)
	}
	return o
}

func TestRepoManifestsValidate(t *testing.T) {
	t.Parallel()
	gw, domain := repoManifests(t)
	doc := roundTrip(t, generate(t, gw, domain, goldenOptions))
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %q, want 3.0.3", doc.OpenAPI)
	}
	// One path per route, each operation with an id, a summary and its
	// entity as tag.
	for _, r := range gw.Routes {
		o := op(t, doc, r.Method, openAPIPath(r.Path))
		if o.OperationID == "" || o.Summary == "" {
			t.Errorf("%s: operationId %q, summary %q", r.ID(), o.OperationID, o.Summary)
		}
		if !slices.Equal(o.Tags, []string{r.Entity}) {
			t.Errorf("%s: tags %v, want [%s]", r.ID(), o.Tags, r.Entity)
		}
	}
	// The ticket type declared by the gateway manifest is merged in.
	fields := doc.Components.Schemas["ticket.Fields"]
	if fields == nil || fields.Value.Properties["priority"] == nil || !fields.Value.Properties["priority"].Value.Type.Is("number") {
		t.Errorf("ticket.Fields lacks the number field priority: %+v", fields)
	}
}

func TestGolden(t *testing.T) {
	t.Parallel()
	gw, domain := repoManifests(t)
	got, err := openapi.JSON(generate(t, gw, domain, goldenOptions))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/host/openapi -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("generated document differs from %s at %s; if the change is intended, run go test ./internal/host/openapi -update", golden, firstDiff(got, want))
	}
}

// firstDiff locates the first differing line.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got: %s\nwant: %s", i+1, gl, wl)
		}
	}
	return "the end"
}

func TestJSONIsDeterministic(t *testing.T) {
	t.Parallel()
	gw, domain := repoManifests(t)
	first, err := openapi.JSON(generate(t, gw, domain, goldenOptions))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, err := openapi.JSON(generate(t, gw, domain, goldenOptions))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatal("two renderings of the same manifests differ")
		}
	}
	if !bytes.HasSuffix(first, []byte("}\n")) || !bytes.Contains(first, []byte("\n  \"components\": {")) {
		t.Error("JSON is not indented with two spaces and newline-terminated")
	}
	if bytes.Contains(first, []byte(`\u003c`)) {
		t.Error("JSON escapes < as \\u003c")
	}
}

// testDomain is a small domain manifest for the table tests.
const testDomain = `
name: test-domain
version: "1"
entities:
  account:
    ledger: generic
    description: Holds money.
    fields:
      status: {type: string, required: true, storage: ix_s_1, enum: [active, closed]}
      name: {type: string, required: true, storage: ix_s_2}
      balance: {type: number, storage: ix_n_1}
      opened_on: {type: integer, storage: ix_n_2}
      notes: {type: string}
      vip: {type: boolean}
    facts: [deposit, charge]
`

func parse(t *testing.T, gateway string) (*manifest.Gateway, *manifest.Domain) {
	t.Helper()
	domain, err := manifest.ParseDomain("domain.yaml", []byte(testDomain))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := manifest.ParseGateway("gateway.yaml", []byte(gateway), domain)
	if err != nil {
		t.Fatal(err)
	}
	return gw, domain
}

// inline generates and round-trips the document of a gateway manifest
// over testDomain.
func inline(t *testing.T, gateway string) *openapi3.T {
	t.Helper()
	gw, domain := parse(t, gateway)
	return roundTrip(t, generate(t, gw, domain, openapi.Options{}))
}

const securityManifest = `
name: t
version: "1"
routes:
  - {path: /status, method: GET, entity: system, action: get, auth: public}
  - {path: /accounts/:id, method: GET, entity: account, action: get, auth: api_key}
  - {path: /accounts, method: GET, entity: account, action: list}
`

func TestSecurity(t *testing.T) {
	t.Parallel()
	doc := inline(t, securityManifest)
	if s := doc.Components.SecuritySchemes["ApiKeyAuth"]; s == nil || s.Value.Type != "apiKey" || s.Value.In != "header" || s.Value.Name != "X-API-Key" {
		t.Fatalf("ApiKeyAuth scheme = %+v", s)
	}
	tests := []struct {
		name, method, path string
		public             bool
	}{
		{"public route", "GET", "/status", true},
		{"api_key route", "GET", "/accounts/{id}", false},
		{"auth omitted means api_key", "GET", "/accounts", false},
		{"platform", "POST", "/v1/entities", false},
		{"health", "GET", "/health", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := op(t, doc, tt.method, tt.path)
			if o.Security == nil {
				t.Fatal("security is not set on the operation")
			}
			_, has401 := o.Responses.Map()["401"]
			if tt.public {
				if len(*o.Security) != 0 {
					t.Errorf("security = %v, want []", *o.Security)
				}
				if has401 {
					t.Error("public operation documents a 401")
				}
				return
			}
			want := openapi3.SecurityRequirements{{"ApiKeyAuth": []string{}}}
			if len(*o.Security) != 1 || len((*o.Security)[0]) != 1 || (*o.Security)[0]["ApiKeyAuth"] == nil {
				t.Errorf("security = %v, want %v", *o.Security, want)
			}
			if !has401 {
				t.Error("api_key operation lacks a 401")
			}
		})
	}
	// The empty requirement survives rendering: "security": [] overrides
	// the document's default.
	b, err := openapi.JSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"security": []`)) {
		t.Error(`rendered document has no "security": []`)
	}
}

const rateManifest = `
name: t
version: "1"
routes:
  - {path: /accounts, method: POST, entity: account, action: create, rateLimit: {rpm: 60}}
  - {path: /accounts/:id/deposits, method: POST, entity: account, action: emit, factType: deposit, rateLimit: {rpm: 10, scope: global}}
  - {path: /accounts/:id, method: GET, entity: account, action: get}
  - {path: /ping, method: GET, entity: system, action: get, auth: public, rateLimit: {rpm: 5}}
`

func TestRateLimit(t *testing.T) {
	t.Parallel()
	doc := inline(t, rateManifest)
	tests := []struct {
		method, path string
		rpm          int
	}{
		{"POST", "/accounts", 60},
		{"POST", "/accounts/{id}/deposits", 10},
		{"GET", "/accounts/{id}", 0},
		{"GET", "/ping", 5},
		{"POST", "/v1/facts", 0},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			o := op(t, doc, tt.method, tt.path)
			r := o.Responses.Value("429")
			if tt.rpm == 0 {
				if r != nil {
					t.Fatal("429 on a route without a rate limit")
				}
				return
			}
			if r == nil || r.Value == nil {
				t.Fatal("no 429 on a rate-limited route")
			}
			for _, h := range []string{"Retry-After", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
				hr := r.Value.Headers[h]
				if hr == nil || hr.Value == nil || hr.Value.Schema == nil || !hr.Value.Schema.Value.Type.Is("integer") {
					t.Errorf("429 header %s = %+v, want an integer", h, hr)
				}
			}
			if !strings.Contains(*r.Value.Description, fmt.Sprintf("%d requests per minute", tt.rpm)) {
				t.Errorf("429 description %q does not state the limit", *r.Value.Description)
			}
			assertProblem(t, r.Value)
			ex, _ := r.Value.Content.Get(problem.ContentType).Example.(map[string]any)
			if ex["type"] != "https://docs.factline.dev/errors/rate-limit-exceeded" {
				t.Errorf("429 example type = %v", ex["type"])
			}
			// The success response carries the RateLimit headers too.
			for code, rr := range o.Responses.Map() {
				if strings.HasPrefix(code, "2") && rr.Value.Headers["RateLimit-Remaining"] == nil {
					t.Errorf("%s response lacks RateLimit-Remaining", code)
				}
			}
		})
	}
}

const paramManifest = `
name: t
version: "1"
routes:
  - {path: /orgs/:orgId/accounts/:accountId/charges, method: POST, entity: account, action: emit, factType: charge}
  - {path: /accounts/:id, method: GET, entity: account, action: get}
  - {path: /accounts/:key, method: POST, entity: account, action: emit, factType: deposit}
`

func TestPathParams(t *testing.T) {
	t.Parallel()
	doc := inline(t, paramManifest)
	tests := []struct {
		method, path string
		params       []string
	}{
		{"POST", "/orgs/{orgId}/accounts/{accountId}/charges", []string{"orgId", "accountId"}},
		{"GET", "/accounts/{id}", []string{"id"}},
		// Same shape as GET /accounts/:id: one path item, the first
		// route's parameter names.
		{"POST", "/accounts/{id}", []string{"id"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			o := op(t, doc, tt.method, tt.path)
			var got []string
			for _, p := range o.Parameters {
				if p.Value.In != openapi3.ParameterInPath {
					continue
				}
				got = append(got, p.Value.Name)
				if !p.Value.Required || !p.Value.Schema.Value.Type.Is("string") {
					t.Errorf("path parameter %s: required %v, schema %v", p.Value.Name, p.Value.Required, p.Value.Schema.Value.Type)
				}
			}
			if !slices.Equal(got, tt.params) {
				t.Errorf("path parameters %v, want %v", got, tt.params)
			}
		})
	}
	if doc.Paths.Value("/accounts/{key}") != nil {
		t.Error("/accounts/{key} duplicates /accounts/{id}")
	}
	for _, p := range doc.Paths.Keys() {
		if strings.Contains(p, ":") {
			t.Errorf("path %s still has a fiber parameter", p)
		}
	}
	ids := map[string]bool{}
	for _, p := range doc.Paths.Keys() {
		for _, o := range doc.Paths.Value(p).Operations() {
			if ids[o.OperationID] {
				t.Errorf("operationId %s is used twice", o.OperationID)
			}
			ids[o.OperationID] = true
		}
	}
	if o := op(t, doc, "POST", "/orgs/{orgId}/accounts/{accountId}/charges"); o.OperationID != "postOrgsByOrgIdAccountsByAccountIdCharges" {
		t.Errorf("operationId = %s", o.OperationID)
	}
}

const listManifest = `
name: t
version: "1"
entities:
  ticket:
    fields:
      subject: {type: string, indexed: true}
      priority: {type: number, indexed: true}
      body: {type: string}
    facts: [opened]
routes:
  - {path: /accounts, method: GET, entity: account, action: list}
  - {path: /tickets, method: GET, entity: ticket, action: list}
`

func TestListQueryParams(t *testing.T) {
	t.Parallel()
	doc := inline(t, listManifest)
	tests := []struct {
		path   string
		params map[string]string // name -> schema type
	}{
		{"/accounts", map[string]string{"cursor": "string", "limit": "integer", "status": "string", "name": "string", "balance": "number", "opened_on": "integer"}},
		{"/tickets", map[string]string{"cursor": "string", "limit": "integer", "subject": "string", "priority": "number"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			o := op(t, doc, "GET", tt.path)
			got := map[string]string{}
			for _, p := range o.Parameters {
				if p.Value.In != openapi3.ParameterInQuery {
					continue
				}
				if p.Value.Required {
					t.Errorf("query parameter %s is required", p.Value.Name)
				}
				got[p.Value.Name] = p.Value.Schema.Value.Type.Slice()[0]
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.params) {
				t.Errorf("query parameters %v, want %v", got, tt.params)
			}
			if o.Responses.Value("400") == nil {
				t.Error("list lacks a 400")
			}
			page := dataSchema(t, o, "200")
			if page.Properties["items"] == nil || page.Properties["hasMore"] == nil || page.Properties["cursor"] == nil || !slices.Contains(page.Required, "hasMore") {
				t.Errorf("list data is not {items, cursor?, hasMore}: %v", page.Properties)
			}
		})
	}
	o := op(t, doc, "GET", "/accounts")
	for _, p := range o.Parameters {
		v := p.Value
		switch v.Name {
		case "limit":
			s := v.Schema.Value
			if s.Min == nil || *s.Min != 1 || s.Max == nil || *s.Max != 200 || fmt.Sprint(s.Default) != "50" {
				t.Errorf("limit schema: min %v max %v default %v", s.Min, s.Max, s.Default)
			}
		case "status":
			if fmt.Sprint(v.Schema.Value.Enum) != "[active closed]" {
				t.Errorf("status enum = %v", v.Schema.Value.Enum)
			}
		}
	}
}

// dataSchema returns the schema of data in an operation's enveloped
// response.
func dataSchema(t *testing.T, o *openapi3.Operation, status string) *openapi3.Schema {
	t.Helper()
	r := o.Responses.Value(status)
	if r == nil {
		t.Fatalf("no %s response", status)
	}
	env := r.Value.Content.Get("application/json").Schema.Value
	if !slices.Equal(env.Required, []string{"data", "meta"}) {
		t.Fatalf("%s response is not an envelope: required %v", status, env.Required)
	}
	meta := env.Properties["meta"].Value
	if meta.Properties["request_id"] == nil || meta.Properties["timestamp"] == nil {
		t.Fatalf("meta lacks request_id or timestamp")
	}
	return env.Properties["data"].Value
}

func requestSchema(t *testing.T, o *openapi3.Operation) *openapi3.Schema {
	t.Helper()
	if o.RequestBody == nil {
		t.Fatal("no request body")
	}
	return o.RequestBody.Value.Content.Get("application/json").Schema.Value
}

const actionManifest = `
name: t
version: "1"
routes:
  - {path: /deposits, method: POST, entity: account, action: emit, factType: deposit}
  - {path: /accounts/:id/deposits, method: POST, entity: account, action: emit, factType: deposit}
  - {path: /orgs/:org/accounts/:acct/charges, method: POST, entity: account, action: emit, factType: charge}
  - {path: /accounts, method: POST, entity: account, action: create}
  - {path: /accounts/:id, method: GET, entity: account, action: get}
  - {path: /reports, method: POST, entity: account, action: query}
  - {path: /reports, method: GET, entity: account, action: query}
  - {path: /status, method: GET, entity: system, action: get, auth: public}
`

func TestEmitEntityID(t *testing.T) {
	t.Parallel()
	doc := inline(t, actionManifest)
	tests := []struct {
		path          string
		entityIDInput bool // entityId is in the body and required
	}{
		{"/deposits", true},
		{"/accounts/{id}/deposits", false},
		// Two parameters, neither named id: the path does not name the
		// entity.
		{"/orgs/{org}/accounts/{acct}/charges", true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			o := op(t, doc, "POST", tt.path)
			req := requestSchema(t, o)
			_, has := req.Properties["entityId"]
			if has != tt.entityIDInput || slices.Contains(req.Required, "entityId") != tt.entityIDInput {
				t.Errorf("entityId present %v, required %v; want both %v", has, req.Required, tt.entityIDInput)
			}
			if !slices.Contains(req.Required, "data") || !req.Properties["data"].Value.Type.Is("object") {
				t.Errorf("data is not a required object: %v", req.Required)
			}
			if req.Properties["factType"] == nil || slices.Contains(req.Required, "factType") {
				t.Error("factType is not an optional property")
			}
			data := dataSchema(t, o, "201")
			for name, typ := range map[string]string{"factId": "string", "seq": "integer", "timestamp": "integer"} {
				if p := data.Properties[name]; p == nil || !p.Value.Type.Is(typ) {
					t.Errorf("emit output %s is not %s", name, typ)
				}
			}
			for _, st := range []string{"400", "401", "404", "409", "413", "415", "422", "500"} {
				if o.Responses.Value(st) == nil {
					t.Errorf("emit lacks %s", st)
				}
			}
		})
	}
}

func TestActionSchemas(t *testing.T) {
	t.Parallel()
	doc := inline(t, actionManifest)

	create := op(t, doc, "POST", "/accounts")
	req := requestSchema(t, create)
	if fmt.Sprint(req.Properties["type"].Value.Enum) != "[account]" || slices.Contains(req.Required, "type") {
		t.Errorf("create type: enum %v, required %v", req.Properties["type"].Value.Enum, req.Required)
	}
	fields := req.Properties["data"].Value
	if !slices.Equal(fields.Required, []string{"status", "name"}) {
		t.Errorf("create data required %v, want [status name]", fields.Required)
	}
	wantTypes := map[string]string{"status": "string", "name": "string", "balance": "number", "opened_on": "integer", "notes": "string", "vip": "boolean"}
	for name, typ := range wantTypes {
		if p := fields.Properties[name]; p == nil || !p.Value.Type.Is(typ) {
			t.Errorf("create data.%s is not %s", name, typ)
		}
	}
	if fmt.Sprint(fields.Properties["status"].Value.Enum) != "[active closed]" {
		t.Errorf("status enum = %v", fields.Properties["status"].Value.Enum)
	}
	created := dataSchema(t, create, "201")
	if !slices.Equal(created.Required, []string{"id", "entity"}) {
		t.Errorf("create output required %v", created.Required)
	}
	assertEntity(t, created.Properties["entity"].Value)
	for _, st := range []string{"409", "413", "415"} {
		if create.Responses.Value(st) == nil {
			t.Errorf("create lacks %s", st)
		}
	}

	get := op(t, doc, "GET", "/accounts/{id}")
	assertEntity(t, dataSchema(t, get, "200"))
	if get.Responses.Value("404") == nil || get.RequestBody != nil {
		t.Error("get: no 404, or a request body")
	}
	if get.Responses.Value("413") != nil {
		t.Error("get documents 413 without a body")
	}

	query := op(t, doc, "POST", "/reports")
	qr := requestSchema(t, query)
	if qr.Properties["projection"] == nil || qr.Properties["filters"] == nil || !slices.Equal(qr.Required, []string{"projection"}) {
		t.Errorf("query input %v required %v", qr.Properties, qr.Required)
	}
	res := dataSchema(t, query, "200")
	if !res.Properties["results"].Value.Type.Is("array") || !res.Properties["count"].Value.Type.Is("integer") {
		t.Error("query output is not {results: array, count: integer}")
	}
	getQuery := op(t, doc, "GET", "/reports")
	if getQuery.RequestBody != nil || getQuery.Parameters.GetByInAndName("query", "projection") == nil {
		t.Error("GET query has a body or no projection parameter")
	}

	status := op(t, doc, "GET", "/status")
	sys := dataSchema(t, status, "200")
	if !slices.Equal(sys.Required, []string{"name", "version", "status"}) {
		t.Errorf("system output required %v", sys.Required)
	}
	if status.Responses.Value("404") != nil || status.Responses.Value("400") != nil {
		t.Error("system route documents 400 or 404")
	}
}

func assertEntity(t *testing.T, e *openapi3.Schema) {
	t.Helper()
	want := map[string]string{"id": "string", "type": "string", "tenant_id": "string", "version": "integer", "data": "object", "metadata": "object", "created_at": "integer", "updated_at": "integer"}
	for name, typ := range want {
		if p := e.Properties[name]; p == nil || !p.Value.Type.Is(typ) {
			t.Errorf("entity %s is not %s", name, typ)
		}
	}
	if d := e.Properties["data"]; d != nil && d.Value.Properties["status"] == nil {
		t.Error("entity data does not declare the type's fields")
	}
}

// assertProblem checks a response is a problem with the Problem schema.
func assertProblem(t *testing.T, r *openapi3.Response) {
	t.Helper()
	mt := r.Content.Get(problem.ContentType)
	if mt == nil || len(r.Content) != 1 {
		t.Errorf("response %q is not only %s", *r.Description, problem.ContentType)
		return
	}
	s := mt.Schema.Value
	for _, f := range []string{"type", "title", "status", "detail", "instance"} {
		if !slices.Contains(s.Required, f) {
			t.Errorf("Problem does not require %s", f)
		}
	}
	for _, f := range []string{"errors", "trace_id"} {
		if s.Properties[f] == nil || slices.Contains(s.Required, f) {
			t.Errorf("Problem %s is missing or required", f)
		}
	}
	fe := s.Properties["errors"].Value.Items.Value
	if !slices.Equal(fe.Required, []string{"field", "code", "message"}) {
		t.Errorf("FieldError required %v", fe.Required)
	}
}

func TestEveryErrorIsAProblem(t *testing.T) {
	t.Parallel()
	gw, domain := repoManifests(t)
	docs := map[string]*openapi3.T{
		"repo":    roundTrip(t, generate(t, gw, domain, goldenOptions)),
		"actions": inline(t, actionManifest),
		"rate":    inline(t, rateManifest),
	}
	for name, doc := range docs {
		for _, path := range doc.Paths.Keys() {
			for method, o := range doc.Paths.Value(path).Operations() {
				if o.Responses.Value("500") == nil || o.Responses.Default() == nil {
					t.Errorf("%s: %s %s lacks 500 or default", name, method, path)
				}
				for code, r := range o.Responses.Map() {
					if code == "default" || code >= "400" {
						assertProblem(t, r.Value)
					}
				}
			}
		}
	}
}

func TestPlatformEndpoints(t *testing.T) {
	t.Parallel()
	gw, domain := repoManifests(t)
	doc := roundTrip(t, generate(t, gw, domain, goldenOptions))
	tests := []struct {
		method, path string
		success      string
		idempotent   bool
		admin        bool
	}{
		{"POST", "/v1/entities", "201", true, false},
		{"GET", "/v1/entities", "200", false, false},
		{"GET", "/v1/entities/{id}", "200", false, false},
		{"PATCH", "/v1/entities/{id}", "200", true, false},
		{"GET", "/v1/entities/{id}/facts", "200", false, false},
		{"POST", "/v1/facts", "201", true, false},
		{"GET", "/v1/facts", "200", false, false},
		{"GET", "/v1/facts/{id}", "200", false, false},
		{"POST", "/v1/configs", "201", true, false},
		{"GET", "/v1/configs", "200", false, false},
		{"GET", "/v1/configs/{id}", "200", false, false},
		{"PUT", "/v1/configs/{id}", "200", false, false},
		{"DELETE", "/v1/configs/{id}", "200", false, false},
		{"GET", "/v1/configs/{id}/versions", "200", false, false},
		{"GET", "/v1/configs/{id}/versions/{version}", "200", false, false},
		{"GET", "/v1/admin/keys", "200", false, true},
		{"POST", "/v1/admin/keys", "201", false, true},
		{"DELETE", "/v1/admin/keys/{id}", "200", false, true},
		{"GET", "/v1/admin/stream", "200", false, true},
		{"GET", "/v1/admin/domain", "200", false, true},
		{"PUT", "/v1/admin/domain/{name}", "201", false, true},
		{"DELETE", "/v1/admin/domain/{name}", "200", false, true},
		{"GET", "/v1/admin/stream/history", "200", false, true},
		{"GET", "/v1/admin/projections", "200", false, true},
		{"GET", "/v1/admin/plugins", "200", false, true},
		{"PUT", "/v1/admin/plugins/{name}", "201", false, true},
		{"POST", "/v1/admin/plugins/{name}/rollback", "200", false, true},
		{"POST", "/v1/admin/ledgers/{type}/rebuild", "200", false, true},
		{"POST", "/v1/admin/webhooks/secrets", "201", false, true},
		{"POST", "/v1/admin/webhooks/configs/{id}/rotate-secret", "201", false, true},
		{"POST", "/v1/admin/webhooks/configs/{id}/pause", "200", false, true},
		{"POST", "/v1/admin/webhooks/configs/{id}/resume", "200", false, true},
		{"GET", "/v1/admin/webhooks/paused", "200", false, true},
		{"GET", "/v1/admin/webhooks/dead-letters", "200", false, true},
		{"POST", "/v1/admin/webhooks/dead-letters/{delivery_id}/replay", "200", false, true},
		{"POST", "/v1/admin/webhooks/dead-letters/replay", "200", false, true},
		{"GET", "/v1/admin/webhooks/deliveries", "200", false, true},
		{"GET", "/v1/admin/webhooks/deliveries/{delivery_id}", "200", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			o := op(t, doc, tt.method, tt.path)
			if o.Security == nil || len(*o.Security) != 1 || (*o.Security)[0]["ApiKeyAuth"] == nil {
				t.Errorf("security = %v, want ApiKeyAuth", o.Security)
			}
			dataSchema(t, o, tt.success)
			hasKey := o.Parameters.GetByInAndName("header", "Idempotency-Key") != nil
			if hasKey != tt.idempotent {
				t.Errorf("Idempotency-Key parameter: %v, want %v", hasKey, tt.idempotent)
			}
			if (o.Responses.Value("403") != nil) != tt.admin {
				t.Errorf("403 documented: %v, want %v", !tt.admin, tt.admin)
			}
		})
	}
	get := op(t, doc, "GET", "/v1/entities/{id}")
	if p := get.Parameters.GetByInAndName("query", "entity_type"); p == nil || !p.Required || !slices.Contains(p.Schema.Value.Enum, any("ticket")) {
		t.Errorf("GET /v1/entities/{id}: entity_type = %+v, want required with the merged types", p)
	}
	health := op(t, doc, "GET", "/health")
	if health.Security == nil || len(*health.Security) != 0 || health.Responses.Value("503") == nil {
		t.Error("/health is not public with a 503")
	}
	var platformPaths int
	for _, p := range doc.Paths.Keys() {
		if strings.HasPrefix(p, "/v1/entities") || strings.HasPrefix(p, "/v1/facts") || strings.HasPrefix(p, "/v1/configs") || strings.HasPrefix(p, "/v1/admin") {
			platformPaths += len(doc.Paths.Value(p).Operations())
		}
	}
	if platformPaths != len(tests) {
		t.Errorf("%d platform operations, the test lists %d", platformPaths, len(tests))
	}
}

func TestGenerateErrors(t *testing.T) {
	t.Parallel()
	// A gateway checked without the domain may name a type the domain
	// given to Generate does not have.
	gw, err := manifest.ParseGateway("g.yaml", []byte(`
name: t
version: "1"
entities:
  ticket: {fields: {subject: {type: string}}, facts: [opened]}
routes:
  - {path: /tickets/:id, method: GET, entity: ticket, action: get}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	gw.Routes = append(gw.Routes, &manifest.Route{Path: "/widgets/:id", Method: "GET", Entity: "widget", Action: "get", Auth: "api_key", Params: []string{"id"}})
	if _, err := openapi.Generate(gw, nil, openapi.Options{}); err == nil || !strings.Contains(err.Error(), "widget") {
		t.Errorf("Generate with an unknown entity type: %v", err)
	}
}

func TestPlatformOnly(t *testing.T) {
	t.Parallel()
	doc := roundTrip(t, generate(t, nil, nil, openapi.Options{Title: "Factline", Version: "9", Endpoints: app.Endpoints(true)}))
	if doc.Info.Title != "Factline" || doc.Info.Version != "9" {
		t.Errorf("info = %+v", doc.Info)
	}
	op(t, doc, "POST", "/v1/entities")
	op(t, doc, "GET", "/health")
	if len(doc.Servers) != 0 {
		t.Errorf("servers = %v without a ServerURL", doc.Servers)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	gw, domain := parse(t, securityManifest)
	doc := roundTrip(t, generate(t, gw, domain, openapi.Options{ServerURL: "https://api.example.test", DocsURL: "https://errors.example.test/"}))
	if doc.Info.Title != "t" || doc.Info.Version != "1" {
		t.Errorf("info defaults to %q %q, want the manifest's name and version", doc.Info.Title, doc.Info.Version)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "https://api.example.test" {
		t.Errorf("servers = %v", doc.Servers)
	}
	ex := doc.Components.Responses["Unauthorized"].Value.Content.Get(problem.ContentType).Example.(map[string]any)
	if ex["type"] != "https://errors.example.test/errors/unauthorized" || ex["detail"] != "Invalid or missing API key" {
		t.Errorf("401 example = %v", ex)
	}
}

func TestOperationIDs(t *testing.T) {
	t.Parallel()
	doc := inline(t, `
name: t
version: "1"
routes:
  - {path: /a-b, method: GET, entity: account, action: list}
  - {path: /a_b, method: GET, entity: account, action: list}
  - {path: /entity/:id, method: GET, entity: account, action: get}
  - {path: /, method: POST, entity: account, action: create}
`)
	tests := []struct{ method, path, id string }{
		{"GET", "/a-b", "getAB"},
		{"GET", "/a_b", "getAB2"},
		{"GET", "/entity/{id}", "getEntityById"},
		{"POST", "/", "postRoot"},
		{"GET", "/v1/entities/{id}", "getEntity"},
	}
	for _, tt := range tests {
		if got := op(t, doc, tt.method, tt.path).OperationID; got != tt.id {
			t.Errorf("%s %s: operationId %s, want %s", tt.method, tt.path, got, tt.id)
		}
	}
}

func TestLedgerCommandRoutes(t *testing.T) {
	domain, err := manifest.LoadDomainFile("../../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi.Generate(nil, domain, openapi.Options{Commands: map[string][]ledger.CommandSpec{
		"account": {{Name: "deposit", Method: "POST", Path: "/deposit", Emits: []string{"deposit"}, InputSchema: []byte(`{"type":"object","properties":{"amount":{"type":"number","format":"decimal"}},"required":["amount"]}`)},
			{Name: "budget", Method: "GET", Path: "/budget", ReadOnly: true, ResultSchema: []byte(`{"type":"object","properties":{"balance":{"type":"number"}}}`)}, {Name: "append"}},
		"contact": {{Name: "summary", Method: "GET", Path: "/summary", ReadOnly: true}},
		"deal":    {{Name: "summary", Method: "GET", Path: "/summary", ReadOnly: true}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := openapi.JSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Validate(context.Background()); err != nil {
		t.Fatalf("document with ledger routes does not validate: %v", err)
	}
	dep := loaded.Paths.Find("/v1/entities/{id}/deposit")
	if dep == nil || dep.Post == nil || dep.Post.Responses.Value("201") == nil || dep.Post.RequestBody == nil {
		t.Fatalf("deposit route: %+v", dep)
	}
	if loaded.Paths.Find("/v1/entities/{id}/budget").Get.Responses.Value("200") == nil {
		t.Fatal("budget route lacks its 200")
	}
	// The schemas the plugin describes, not free objects.
	in := dep.Post.RequestBody.Value.Content.Get("application/json").Schema.Value
	if in.Properties["amount"] == nil || !slices.Contains(in.Required, "amount") {
		t.Fatalf("deposit input schema: %+v", in)
	}
	out, _ := json.Marshal(loaded.Paths.Find("/v1/entities/{id}/budget").Get.Responses.Value("200").Value.Content.Get("application/json").Schema.Value)
	if !strings.Contains(string(out), `"balance":{"type":"number"}`) {
		t.Fatalf("budget result schema: %s", out)
	}
	sum := loaded.Paths.Find("/v1/entities/{id}/summary")
	if sum == nil || !strings.Contains(sum.Get.Description, "contact, deal") {
		t.Fatalf("shared command route: %+v", sum)
	}
	if loaded.Paths.Find("/v1/entities/{id}/append") != nil {
		t.Fatal("an unrouted command got a path")
	}
}

// TestManifestCommandRoutes: a manifest route of action command is
// described with the :id parameter, the input schema its ledger's plugin
// describes as the request body, 201 with the recorded fact for a write
// and 200 with the result schema for a read, and the problem statuses of
// the ledger command routes (503 while the plugin is not loaded).
func TestManifestCommandRoutes(t *testing.T) {
	domain, err := manifest.LoadDomainFile("../../../manifests/domain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := manifest.ParseGateway("gateway.yaml", []byte(`name: api
version: "1"
routes:
  - {path: /api/accounts/:id/deposit, method: POST, entity: account, action: command, command: deposit}
  - {path: /api/accounts/:id/budget, method: GET, entity: account, action: command, command: budget}
  - {path: /api/contacts/:id/summary, method: GET, entity: contact, action: command, command: summary}
`), domain)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi.Generate(gw, domain, openapi.Options{Commands: map[string][]ledger.CommandSpec{
		"account": {{Name: "deposit", Method: "POST", Path: "/deposit", Emits: []string{"deposit"}, InputSchema: []byte(`{"type":"object","properties":{"amount":{"type":"number","format":"decimal"}},"required":["amount"]}`)},
			{Name: "budget", Method: "GET", Path: "/budget", ReadOnly: true, ResultSchema: []byte(`{"type":"object","properties":{"balance":{"type":"number"}}}`)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := openapi.JSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Validate(context.Background()); err != nil {
		t.Fatalf("document with command routes does not validate: %v", err)
	}
	statuses := func(op *openapi3.Operation) []string {
		var out []string
		for code := range op.Responses.Map() {
			out = append(out, code)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name, method, path, ok string
		body                   bool
		want                   []string // in the success response's schema
		codes                  []string
	}{
		{"write", "POST", "/api/accounts/{id}/deposit", "201", true, []string{`"$ref":"#/components/schemas/Fact"`},
			[]string{"201", "400", "401", "404", "409", "413", "415", "422", "500", "503", "default"}},
		{"read", "GET", "/api/accounts/{id}/budget", "200", false, []string{`"balance":{"type":"number"}`},
			[]string{"200", "400", "401", "404", "422", "500", "503", "default"}},
		{"ledger not loaded", "GET", "/api/contacts/{id}/summary", "200", false, []string{`"type":"object"`},
			[]string{"200", "400", "401", "404", "422", "500", "503", "default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := op(t, loaded, tc.method, tc.path)
			if p := op.Parameters.GetByInAndName("path", "id"); p == nil || !p.Required {
				t.Errorf("no required id path parameter: %+v", op.Parameters)
			}
			if got := statuses(op); !slices.Equal(got, tc.codes) {
				t.Errorf("statuses %v, want %v", got, tc.codes)
			}
			ok := op.Responses.Value(tc.ok)
			if ok == nil {
				t.Fatalf("no %s response", tc.ok)
			}
			out, _ := json.Marshal(ok.Value.Content.Get("application/json").Schema.Value)
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("%s response lacks %s: %s", tc.ok, w, out)
				}
			}
			if (op.RequestBody != nil) != tc.body {
				t.Fatalf("request body %v, want %v", op.RequestBody != nil, tc.body)
			}
			if tc.body {
				in := op.RequestBody.Value.Content.Get("application/json").Schema.Value
				if in.Properties["amount"] == nil || !slices.Contains(in.Required, "amount") {
					t.Errorf("input schema is not the plugin's: %+v", in)
				}
			}
		})
	}
}
