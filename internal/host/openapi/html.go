package openapi

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// DocsHTML renders a document as one self-contained HTML page: every
// operation with its method, path, summary, authentication, parameters,
// request body and responses, then every component schema. The page has
// inline CSS and nothing else: no scripts, fonts or style sheets are
// loaded, so it works offline.
func DocsHTML(doc *openapi3.T) ([]byte, error) {
	if doc == nil || doc.Info == nil {
		return nil, errors.New("openapi: no document")
	}
	p := pageView{
		Title:       doc.Info.Title,
		Version:     doc.Info.Version,
		OpenAPI:     doc.OpenAPI,
		Description: paragraphs(doc.Info.Description),
	}
	for _, s := range doc.Servers {
		if s != nil {
			p.Servers = append(p.Servers, s.URL)
		}
	}
	if doc.Components != nil {
		for _, name := range sortedKeys(doc.Components.SecuritySchemes) {
			if ref := doc.Components.SecuritySchemes[name]; ref != nil && ref.Value != nil {
				p.Schemes = append(p.Schemes, schemeView{Name: name, Text: schemeText(ref.Value), Description: ref.Value.Description})
			}
		}
	}
	p.Groups = groups(doc)
	p.Events = eventViews(doc)
	if doc.Components != nil {
		for _, name := range sortedKeys(doc.Components.Schemas) {
			p.Schemas = append(p.Schemas, namedSchema{Name: name, Anchor: schemaAnchor(name), Schema: view(doc.Components.Schemas[name], 0, 1)})
		}
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, p); err != nil {
		return nil, fmt.Errorf("openapi: render docs: %w", err)
	}
	return buf.Bytes(), nil
}

type pageView struct {
	Title, Version, OpenAPI string
	Description             []string
	Servers                 []string
	Schemes                 []schemeView
	Groups                  []groupView
	Schemas                 []namedSchema
	Events                  []eventView
}

type schemeView struct{ Name, Text, Description string }

type groupView struct {
	Name, Anchor string
	Description  []string
	Ops          []opView
}

type opView struct {
	Anchor, Method, Path, ID, Summary string
	Description                       []string
	Deprecated                        bool
	Public                            bool
	Auth                              []string
	Params                            []paramView
	Body                              *bodyView
	Responses                         []responseView
}

type paramView struct {
	Name, In, Description string
	Required              bool
	Schema                *schemaView
}

type bodyView struct {
	Description string
	Required    bool
	Contents    []contentView
}

type contentView struct {
	MediaType string
	Schema    *schemaView
}

type responseView struct {
	Status, Class, Description string
	Headers                    []paramView
	Contents                   []contentView
}

type namedSchema struct {
	Name, Anchor string
	Schema       *schemaView
}

// schemaView is a schema as the page shows it: a link to a component, or
// a type with notes, properties and items.
type schemaView struct {
	Ref, RefAnchor string
	Type           string
	Description    string
	Notes          []string
	Props          []propView
	Items          *schemaView
	Values         *schemaView // additionalProperties schema
	Variants       []variantView
}

type propView struct {
	Name     string
	Required bool
	Schema   *schemaView
}

type variantView struct {
	Kind    string
	Schemas []*schemaView
}

// maxDepth bounds how deep inline schemas are shown.
const maxDepth = 12

// view renders a schema reference at a nesting depth. Component
// references nested expandBelow levels deep or deeper are links; above
// that, the component's content is shown in place.
func view(ref *openapi3.SchemaRef, depth, expandBelow int) *schemaView {
	if ref == nil {
		return nil
	}
	if ref.Ref != "" && (depth >= expandBelow || ref.Value == nil) {
		name := refName(ref.Ref)
		v := &schemaView{Ref: name, RefAnchor: schemaAnchor(name)}
		if ref.Value != nil {
			v.Description = ref.Value.Description
		}
		return v
	}
	s := ref.Value
	if s == nil {
		return &schemaView{Type: "any"}
	}
	v := &schemaView{Description: s.Description, Type: typeText(s)}
	if depth >= maxDepth {
		v.Notes = append(v.Notes, "(nested too deep to show)")
		return v
	}
	v.Notes = notes(s)
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	for _, n := range names {
		v.Props = append(v.Props, propView{Name: n, Required: required[n], Schema: view(s.Properties[n], depth+1, expandBelow)})
	}
	v.Items = view(s.Items, depth+1, expandBelow)
	if ap := s.AdditionalProperties.Schema; ap != nil {
		v.Values = view(ap, depth+1, expandBelow)
	}
	for _, x := range []struct {
		kind string
		refs openapi3.SchemaRefs
	}{{"all of", s.AllOf}, {"one of", s.OneOf}, {"any of", s.AnyOf}} {
		if len(x.refs) == 0 {
			continue
		}
		vv := variantView{Kind: x.kind}
		for _, r := range x.refs {
			vv.Schemas = append(vv.Schemas, view(r, depth+1, expandBelow))
		}
		v.Variants = append(v.Variants, vv)
	}
	return v
}

func typeText(s *openapi3.Schema) string {
	t := "any"
	if s.Type != nil && len(s.Type.Slice()) > 0 {
		t = strings.Join(s.Type.Slice(), " or ")
	}
	if s.Format != "" {
		t += " (" + s.Format + ")"
	}
	if s.Items != nil {
		t = "array of"
	}
	if s.Nullable {
		t += ", nullable"
	}
	return t
}

// notes lists a schema's constraints in words.
func notes(s *openapi3.Schema) []string {
	var ns []string
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = fmt.Sprint(e)
		}
		ns = append(ns, "one of: "+strings.Join(vals, ", "))
	}
	if s.Default != nil {
		ns = append(ns, fmt.Sprintf("default %v", s.Default))
	}
	if s.Min != nil {
		ns = append(ns, "minimum "+num(*s.Min))
	}
	if s.Max != nil {
		ns = append(ns, "maximum "+num(*s.Max))
	}
	if s.MinLength > 0 {
		ns = append(ns, fmt.Sprintf("at least %d characters", s.MinLength))
	}
	if s.MaxLength != nil {
		ns = append(ns, fmt.Sprintf("at most %d characters", *s.MaxLength))
	}
	if s.Pattern != "" {
		ns = append(ns, "pattern "+s.Pattern)
	}
	if has := s.AdditionalProperties.Has; has != nil && len(s.Properties) > 0 {
		if *has {
			ns = append(ns, "other members allowed")
		} else {
			ns = append(ns, "no other members")
		}
	}
	if s.AdditionalProperties.Schema != nil {
		ns = append(ns, "any member names")
	}
	return ns
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func refName(ref string) string {
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

func schemaAnchor(name string) string { return "schema-" + name }

func schemeText(s *openapi3.SecurityScheme) string {
	switch s.Type {
	case "apiKey":
		return fmt.Sprintf("API key in the %s %s", s.In, s.Name)
	case "http":
		return "HTTP " + s.Scheme + " authentication"
	}
	return s.Type
}

// groups lists the operations by their first tag, in the document's tag
// order; untagged operations come last.
func groups(doc *openapi3.T) []groupView {
	type entry struct {
		path, method string
		op           *openapi3.Operation
	}
	byTag := map[string][]entry{}
	if doc.Paths != nil {
		for _, path := range doc.Paths.Keys() {
			item := doc.Paths.Value(path)
			if item == nil {
				continue
			}
			for method, op := range item.Operations() {
				tag := ""
				if len(op.Tags) > 0 {
					tag = op.Tags[0]
				}
				byTag[tag] = append(byTag[tag], entry{path, method, op})
			}
		}
	}
	var order []string
	seen := map[string]bool{}
	for _, t := range doc.Tags {
		if t != nil && !seen[t.Name] {
			seen[t.Name] = true
			order = append(order, t.Name)
		}
	}
	var rest []string
	for t := range byTag {
		if !seen[t] && t != "" {
			rest = append(rest, t)
		}
	}
	sort.Strings(rest)
	order = append(order, rest...)
	order = append(order, "")
	var out []groupView
	for _, name := range order {
		es := byTag[name]
		if len(es) == 0 {
			continue
		}
		sort.Slice(es, func(i, j int) bool {
			if es[i].path != es[j].path {
				return es[i].path < es[j].path
			}
			return methodRank(es[i].method) < methodRank(es[j].method)
		})
		g := groupView{Name: name, Anchor: "tag-" + name}
		if name == "" {
			g.Name, g.Anchor = "Other", "tag--other"
		}
		if t := doc.Tags.Get(name); t != nil {
			g.Description = paragraphs(t.Description)
		}
		for _, e := range es {
			g.Ops = append(g.Ops, operation(doc, e.path, e.method, e.op))
		}
		out = append(out, g)
	}
	return out
}

func operation(doc *openapi3.T, path, method string, op *openapi3.Operation) opView {
	v := opView{
		Method:      strings.ToUpper(method),
		Path:        path,
		ID:          op.OperationID,
		Summary:     op.Summary,
		Description: paragraphs(op.Description),
		Deprecated:  op.Deprecated,
	}
	v.Anchor = "op-" + op.OperationID
	if op.OperationID == "" {
		v.Anchor = "op-" + strings.ToLower(method) + "-" + path
	}
	sec := doc.Security
	if op.Security != nil {
		sec = *op.Security
	}
	if len(sec) == 0 {
		v.Public = true
	}
	for _, req := range sec {
		var names []string
		for _, name := range sortedKeys(req) {
			text := name
			if doc.Components != nil {
				if s := doc.Components.SecuritySchemes[name]; s != nil && s.Value != nil {
					text = schemeText(s.Value) + " (" + name + ")"
				}
			}
			names = append(names, text)
		}
		if len(names) == 0 {
			v.Public = true
			continue
		}
		v.Auth = append(v.Auth, strings.Join(names, " and "))
	}
	item := doc.Paths.Value(path)
	params := append(openapi3.Parameters{}, item.Parameters...)
	params = append(params, op.Parameters...)
	for _, pr := range params {
		if pr == nil || pr.Value == nil {
			continue
		}
		p := pr.Value
		pv := paramView{Name: p.Name, In: p.In, Description: p.Description, Required: p.Required, Schema: view(p.Schema, 0, 0)}
		v.Params = append(v.Params, pv)
	}
	if op.RequestBody != nil && op.RequestBody.Value != nil {
		rb := op.RequestBody.Value
		v.Body = &bodyView{Description: rb.Description, Required: rb.Required, Contents: contents(rb.Content, true)}
	}
	if op.Responses != nil {
		codes := sortedKeys(op.Responses.Map())
		sort.SliceStable(codes, func(i, j int) bool { return statusRank(codes[i]) < statusRank(codes[j]) })
		for _, code := range codes {
			rr := op.Responses.Value(code)
			if rr == nil || rr.Value == nil {
				continue
			}
			r := rr.Value
			// Success bodies are shown in full; error bodies are the
			// same few schemas, linked.
			rv := responseView{Status: code, Class: statusClass(code), Contents: contents(r.Content, statusClass(code) == "ok")}
			if r.Description != nil {
				rv.Description = *r.Description
			}
			for _, name := range sortedKeys(r.Headers) {
				h := r.Headers[name]
				if h == nil || h.Value == nil {
					continue
				}
				rv.Headers = append(rv.Headers, paramView{Name: name, Description: h.Value.Description, Schema: view(h.Value.Schema, 0, 0)})
			}
			v.Responses = append(v.Responses, rv)
		}
	}
	return v
}

// contents lists a body's media types. In full, component schemas are
// shown two levels deep (the envelope and its data); otherwise the body
// is a bare link to its schema.
func contents(c openapi3.Content, full bool) []contentView {
	var out []contentView
	for _, mt := range sortedKeys(c) {
		m := c[mt]
		if m == nil {
			continue
		}
		var v *schemaView
		if full {
			v = view(m.Schema, 0, 2)
		} else {
			v = view(m.Schema, 0, 0)
			if v != nil && v.Ref != "" {
				v.Description = ""
			}
		}
		out = append(out, contentView{MediaType: mt, Schema: v})
	}
	return out
}

// statusRank orders response codes: numbers, then ranges (4XX), then
// default.
func statusRank(code string) int {
	if n, err := strconv.Atoi(code); err == nil {
		return n
	}
	if len(code) == 3 && strings.HasSuffix(strings.ToUpper(code), "XX") {
		return int(code[0]-'0')*100 + 99
	}
	return 1000
}

func statusClass(code string) string {
	switch {
	case strings.HasPrefix(code, "2"):
		return "ok"
	case strings.HasPrefix(code, "3"):
		return "redirect"
	}
	return "error"
}

// paragraphs splits text at blank lines.
func paragraphs(s string) []string {
	var out []string
	for _, p := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"lower": strings.ToLower,
}).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} {{.Version}}: API reference</title>
<style>
:root { --fg: #1d2330; --muted: #5b6475; --line: #dfe3ea; --bg: #ffffff; --panel: #f6f8fa; --accent: #2457c5;
  --get: #1f7a4d; --post: #2457c5; --put: #9a5b00; --patch: #7a3fb0; --delete: #b42318; --ok: #1f7a4d; --err: #b42318; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg); font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 0.92em; }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
.layout { display: flex; align-items: flex-start; }
nav { position: sticky; top: 0; flex: 0 0 300px; height: 100vh; overflow-y: auto; padding: 16px; border-right: 1px solid var(--line); background: var(--panel); font-size: 13px; }
nav h2 { font-size: 12px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); margin: 16px 0 4px; }
nav ul { list-style: none; margin: 0; padding: 0; }
nav li { margin: 2px 0; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
main { flex: 1; min-width: 0; padding: 24px 40px 80px; max-width: 1100px; }
h1 { margin: 0 0 4px; font-size: 28px; }
h2.group { margin-top: 48px; padding-bottom: 6px; border-bottom: 2px solid var(--line); }
.sub { color: var(--muted); }
article.op { border: 1px solid var(--line); border-radius: 8px; margin: 20px 0; padding: 14px 18px; }
article.op h3 { margin: 0; font-size: 17px; display: flex; gap: 10px; align-items: center; flex-wrap: wrap; }
.method { display: inline-block; min-width: 64px; text-align: center; padding: 2px 8px; border-radius: 4px; color: #fff; font-size: 12px; font-weight: 700; letter-spacing: .03em; }
.m-get { background: var(--get); } .m-post { background: var(--post); } .m-put { background: var(--put); } .m-patch { background: var(--patch); } .m-delete { background: var(--delete); }
.opid { color: var(--muted); font-size: 12px; }
.summary { font-weight: 600; margin: 8px 0 4px; }
.auth { display: inline-block; font-size: 13px; padding: 2px 8px; border-radius: 4px; background: #fff4e5; border: 1px solid #f3d19e; }
.auth.public { background: #e9f7ef; border-color: #a6dcbc; }
h4 { margin: 16px 0 6px; font-size: 14px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
table { border-collapse: collapse; width: 100%; font-size: 14px; }
th, td { text-align: left; vertical-align: top; border-top: 1px solid var(--line); padding: 6px 8px; }
th { font-weight: 600; color: var(--muted); font-size: 12px; text-transform: uppercase; }
.req { color: var(--err); font-size: 12px; font-weight: 600; }
.status { font-weight: 700; font-family: ui-monospace, Menlo, Consolas, monospace; }
.status.ok { color: var(--ok); } .status.error { color: var(--err); }
.schema { border-left: 2px solid var(--line); padding-left: 10px; margin: 4px 0; }
.schema .type { color: #8a4b08; }
.schema .notes { color: var(--muted); font-size: 13px; }
.schema ul { list-style: none; margin: 4px 0; padding: 0; }
.schema li { margin: 3px 0; }
.pname { font-weight: 600; }
.desc { color: var(--fg); }
.ct { font-size: 12px; color: var(--muted); }
section.schemas > div { border-top: 1px solid var(--line); padding: 8px 0; }
@media (max-width: 900px) { nav { display: none; } main { padding: 16px; } }
</style>
</head>
<body>
<div class="layout">
<nav aria-label="Operations">
<strong>{{.Title}}</strong>
<ul><li><a href="#authentication">Authentication</a></li>{{if .Events}}<li><a href="#events">Event catalog</a></li>{{end}}<li><a href="#schemas">Schemas</a></li></ul>
{{range .Groups}}<h2><a href="#{{.Anchor}}">{{.Name}}</a></h2>
<ul>{{range .Ops}}<li><a href="#{{.Anchor}}"><span class="mono">{{.Method}}</span> {{.Path}}</a></li>{{end}}</ul>
{{end}}
</nav>
<main>
<header>
<h1>{{.Title}}</h1>
<p class="sub">Version {{.Version}} · OpenAPI {{.OpenAPI}}{{range .Servers}} · server <code>{{.}}</code>{{end}}</p>
{{range .Description}}<p>{{.}}</p>
{{end}}
</header>
<section id="authentication">
<h2 class="group">Authentication</h2>
{{range .Schemes}}<p><strong>{{.Name}}</strong>: {{.Text}}.{{if .Description}} {{.Description}}{{end}}</p>
{{end}}<p>Each operation below says whether it needs a key.</p>
</section>
{{range .Groups}}<section id="{{.Anchor}}">
<h2 class="group">{{.Name}}</h2>
{{range .Description}}<p>{{.}}</p>{{end}}
{{range .Ops}}<article class="op" id="{{.Anchor}}">
<h3><span class="method m-{{lower .Method}}">{{.Method}}</span> <code>{{.Path}}</code>{{if .ID}} <span class="opid">{{.ID}}</span>{{end}}</h3>
{{if .Summary}}<p class="summary">{{.Summary}}</p>{{end}}
{{range .Description}}<p>{{.}}</p>{{end}}
{{if .Deprecated}}<p><strong>Deprecated.</strong></p>{{end}}
<p>{{if .Auth}}{{range .Auth}}<span class="auth">Requires {{.}}</span> {{end}}{{if .Public}}<span class="auth public">or no authentication</span>{{end}}{{else}}<span class="auth public">Public: no authentication</span>{{end}}</p>
{{if .Params}}<h4>Parameters</h4>
<table><thead><tr><th>Name</th><th>In</th><th>Schema</th><th>Description</th></tr></thead><tbody>
{{range .Params}}<tr><td><code>{{.Name}}</code>{{if .Required}} <span class="req">required</span>{{end}}</td><td>{{.In}}</td><td>{{template "schema" .Schema}}</td><td>{{.Description}}</td></tr>
{{end}}</tbody></table>{{end}}
{{with .Body}}<h4>Request body{{if .Required}} <span class="req">required</span>{{end}}</h4>
{{if .Description}}<p>{{.Description}}</p>{{end}}
{{range .Contents}}<div class="ct">{{.MediaType}}</div>{{template "schema" .Schema}}{{end}}{{end}}
<h4>Responses</h4>
<table><thead><tr><th>Status</th><th>Description</th></tr></thead><tbody>
{{range .Responses}}<tr><td><span class="status {{.Class}}">{{.Status}}</span></td><td><div class="desc">{{.Description}}</div>
{{if .Headers}}<div class="ct">Headers</div><ul>{{range .Headers}}<li><code>{{.Name}}</code> {{template "schema" .Schema}} {{.Description}}</li>{{end}}</ul>{{end}}
{{range .Contents}}<div class="ct">{{.MediaType}}</div>{{template "schema" .Schema}}{{end}}</td></tr>
{{end}}</tbody></table>
</article>
{{end}}</section>
{{end}}
{{if .Events}}<section id="events">
<h2 class="group">Event catalog</h2>
<p>The fact types of every entity type and the fields of their data. A fact whose data breaks its type's fields is refused (validation-failed); a fact type without fields takes any object.</p>
{{range .Events}}<article class="op" id="{{.Anchor}}">
<h3><code>{{.Name}}</code></h3>
{{if .Description}}<p>{{.Description}}</p>{{end}}
<table><thead><tr><th>Fact type</th><th>Data</th></tr></thead><tbody>
{{range .Facts}}<tr><td><code>{{.Name}}</code></td><td>{{if .Description}}<div class="desc">{{.Description}}</div>{{end}}{{if .Schema}}{{template "schema" .Schema}}{{else}}<span class="notes">any object</span>{{end}}</td></tr>
{{end}}</tbody></table>
</article>
{{end}}</section>
{{end}}<section id="schemas" class="schemas">
<h2 class="group">Schemas</h2>
{{range .Schemas}}<div id="{{.Anchor}}"><h3><code>{{.Name}}</code></h3>{{template "schema" .Schema}}</div>
{{end}}</section>
</main>
</div>
</body>
</html>
{{define "schema"}}{{if .}}{{if .Ref}}<a href="#{{.RefAnchor}}"><code>{{.Ref}}</code></a>{{if .Description}} <span class="notes">{{.Description}}</span>{{end}}{{else}}<div class="schema"><span class="type">{{.Type}}</span>{{if .Description}} <span class="desc">{{.Description}}</span>{{end}}{{if .Notes}} <span class="notes">({{range $i, $n := .Notes}}{{if $i}}; {{end}}{{$n}}{{end}})</span>{{end}}
{{- if .Props}}<ul>{{range .Props}}<li><code class="pname">{{.Name}}</code>{{if .Required}} <span class="req">required</span>{{end}} {{template "schema" .Schema}}</li>{{end}}</ul>{{end}}
{{- with .Items}}{{template "schema" .}}{{end}}
{{- with .Values}}<div class="notes">member values:</div>{{template "schema" .}}{{end}}
{{- range .Variants}}<div class="notes">{{.Kind}}:</div><ul>{{range .Schemas}}<li>{{template "schema" .}}</li>{{end}}</ul>{{end -}}
</div>{{end}}{{end}}{{end}}`
