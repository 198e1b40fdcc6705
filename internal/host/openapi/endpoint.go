package openapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Endpoint documents one endpoint the server registers itself, as opposed
// to a route of the gateway manifest: the platform API, the endpoints
// other packages mount (webhooks, plugins, projections, the domain model)
// and the server's own pages. The gateway registers routes only through an
// Endpoint, and [Generate] describes the endpoints it is given, so an
// endpoint cannot be served undocumented.
type Endpoint struct {
	// Method and Path as registered: fiber's form, :param segments.
	Method, Path string
	// ID is the operation id (fixed, claimed before manifest routes').
	ID string
	// Tag groups the operation; Summary and Description describe it.
	Tag, Summary, Description string
	// Access says who may call it.
	Access Access
	// Params are its path, query and header parameters.
	Params []Param
	// Body is the schema of a JSON request body; nil: no JSON body.
	Body Schema
	// Content, when set, replaces Body: the request body's media types,
	// described by ContentDesc.
	Content     []Media
	ContentDesc string
	// OptionalBody: the request body may be left out.
	OptionalBody bool
	// Status is the success status and OK its description.
	Status int
	OK     string
	// Data is the schema of the success envelope's data; nil: no body.
	Data Schema
	// Raw, when set, is the media type of a success body sent bare, not
	// in the envelope (a page, the metrics, this document); Data is its
	// schema.
	Raw string
	// Problems are the problem statuses it answers besides 500, the
	// access check's and a request body's (400, 413, 415).
	Problems []int
	// Idempotent endpoints take an Idempotency-Key.
	Idempotent bool
	// CachedRead endpoints read an entity through the process's entity
	// cache and take Cache-Control: no-cache to bypass it.
	CachedRead bool
}

// Access says who may call an endpoint.
type Access int

// Access levels.
const (
	// AnyKey needs a valid API key of any mode.
	AnyKey Access = iota
	// AdminKey needs an admin key (403 for other modes).
	AdminKey
	// Public needs no key.
	Public
)

// Doc is the document an endpoint's schemas and parameters are built in:
// they may refer to its components and depend on its domain.
type Doc struct{ b *builder }

// Schema builds a schema in a document.
type Schema func(Doc) *openapi3.SchemaRef

// Param builds a parameter in a document.
type Param func(Doc) *openapi3.ParameterRef

// Media is one media type of a request body.
type Media struct {
	Type   string
	Schema Schema
}

// EntityTypes are the entity type names of the document's domain.
func (d Doc) EntityTypes() []string { return d.b.domain.EntityTypeNames() }

// Ref refers to a component schema by name.
func Ref(name string) Schema { return func(d Doc) *openapi3.SchemaRef { return d.b.schema(name) } }

// Inline is a schema built afresh for every document.
func Inline(f func() *openapi3.Schema) Schema {
	return func(Doc) *openapi3.SchemaRef { return inline(f()) }
}

// Prop is one property of an [Object].
type Prop struct {
	Name   string
	Schema Schema
}

// Object is an object schema; closed refuses members not listed.
func Object(desc string, required []string, closed bool, props ...Prop) Schema {
	return func(d Doc) *openapi3.SchemaRef {
		ps := make([]prop, len(props))
		for i, p := range props {
			ps[i] = prop{p.Name, p.Schema(d)}
		}
		return inline(object(desc, required, closed, ps...))
	}
}

// List is an object with the array items of item schemas.
func List(desc, itemsDesc string, item Schema) Schema {
	return Object(desc, []string{"items"}, false, Prop{"items", Array(itemsDesc, item)})
}

// Array is an array of item schemas.
func Array(desc string, item Schema) Schema {
	return func(d Doc) *openapi3.SchemaRef { return arrayOf(desc, item(d)) }
}

// String, Integer, Boolean, Millis, FreeObject and Enum are the simple
// schemas.
func String(desc string) Schema { return func(Doc) *openapi3.SchemaRef { return str(desc) } }

// Integer is a 64-bit integer.
func Integer(desc string) Schema { return func(Doc) *openapi3.SchemaRef { return integer(desc) } }

// Boolean is true or false.
func Boolean(desc string) Schema { return func(Doc) *openapi3.SchemaRef { return boolean(desc) } }

// Millis is a time in milliseconds since the epoch.
func Millis(desc string) Schema { return func(Doc) *openapi3.SchemaRef { return millis(desc) } }

// FreeObject is an object with any members.
func FreeObject(desc string) Schema { return func(Doc) *openapi3.SchemaRef { return freeObject(desc) } }

// Enum is a string among values.
func Enum(desc string, values ...string) Schema {
	return func(Doc) *openapi3.SchemaRef { return enum(desc, values...) }
}

// Binary is a body of bytes.
func Binary(desc string) Schema {
	return func(Doc) *openapi3.SchemaRef {
		s := typed(openapi3.TypeString, desc)
		s.Format = "binary"
		return inline(s)
	}
}

// Nullable makes a schema nullable.
func Nullable(s Schema) Schema { return func(d Doc) *openapi3.SchemaRef { return nullable(s(d)) } }

// PathParam is a string path parameter.
func PathParam(name, desc string) Param {
	return func(Doc) *openapi3.ParameterRef {
		return &openapi3.ParameterRef{Value: openapi3.NewPathParameter(name).WithDescription(desc).WithSchema(openapi3.NewStringSchema())}
	}
}

// IDParam is the path parameter id of a thing.
func IDParam(what string) Param { return func(Doc) *openapi3.ParameterRef { return idParam(what) } }

// NameParam is the path parameter name of a thing named like a plugin.
func NameParam(what string) Param { return func(Doc) *openapi3.ParameterRef { return nameParam(what) } }

// QueryParam is an optional query parameter.
func QueryParam(name, desc string, schema Schema) Param {
	return func(d Doc) *openapi3.ParameterRef {
		return &openapi3.ParameterRef{Value: openapi3.NewQueryParameter(name).WithDescription(desc).WithSchema(schema(d).Value)}
	}
}

// ParamFunc is a parameter built by f.
func ParamFunc(f func(Doc) *openapi3.ParameterRef) Param { return f }

// Limit and Cursor are the paging parameters.
var (
	Limit  Param = func(d Doc) *openapi3.ParameterRef { return d.b.paramRef(paramLimit) }
	Cursor Param = func(d Doc) *openapi3.ParameterRef { return d.b.paramRef(paramCursor) }
)

// EntityTypeParam is the query parameter entity_type, naming one of the
// domain's entity types.
func EntityTypeParam(desc string, required bool) Param {
	return func(d Doc) *openapi3.ParameterRef {
		return &openapi3.ParameterRef{Value: openapi3.NewQueryParameter("entity_type").
			WithDescription(desc).WithRequired(required).WithSchema(d.b.typeSchema(""))}
	}
}

// EntityFilters is the form-exploded query parameter of equality filters
// on indexed fields.
var EntityFilters Param = func(d Doc) *openapi3.ParameterRef {
	filters := openapi3.NewQueryParameter("filters")
	filters.Style, filters.Explode = "form", ptr(true)
	filterSchema := openapi3.NewObjectSchema()
	filterSchema.AdditionalProperties = openapi3.AdditionalProperties{Schema: inline(openapi3.NewStringSchema())}
	filters.Schema = inline(filterSchema)
	filters.Description = "Equality filters on indexed fields, one query parameter each (<field>=<value>); a field without an index is a validation-failed (unknown_field)." + d.b.indexedFieldsText()
	return &openapi3.ParameterRef{Value: filters}
}

func (b *builder) typeSchema(desc string) *openapi3.Schema {
	s := openapi3.NewStringSchema()
	s.Description = desc
	for _, t := range b.domain.EntityTypeNames() {
		s.Enum = append(s.Enum, t)
	}
	return s
}

// endpoint describes one registered endpoint.
func (b *builder) endpoint(e Endpoint) {
	d := Doc{b}
	op := &openapi3.Operation{
		OperationID: b.operationID(e.ID),
		Tags:        []string{e.Tag},
		Summary:     e.Summary,
		Description: e.Description,
		Security:    security(e.Access == Public),
	}
	for _, p := range e.Params {
		op.Parameters = append(op.Parameters, p(d))
	}
	errs := append([]int{http.StatusInternalServerError}, e.Problems...)
	if e.Access != Public {
		errs = append(errs, http.StatusUnauthorized)
	}
	if e.Access == AdminKey {
		errs = append(errs, http.StatusForbidden)
		// A description that names a narrower key (the operator tenant's
		// admin keys) says so itself.
		if !strings.Contains(op.Description, "Needs an admin key") {
			op.Description = strings.TrimSpace(op.Description + " Needs an admin key.")
		}
	}
	body := http.StatusBadRequest
	switch {
	case len(e.Content) > 0:
		rb := &openapi3.RequestBody{Description: e.ContentDesc, Required: !e.OptionalBody, Content: openapi3.Content{}}
		for _, m := range e.Content {
			rb.Content[m.Type] = &openapi3.MediaType{Schema: m.Schema(d)}
		}
		op.RequestBody = &openapi3.RequestBodyRef{Value: rb}
		errs = append(errs, body, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
	case e.Body != nil:
		op.RequestBody = jsonBody("", e.Body(d))
		errs = append(errs, body, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
	}
	if e.CachedRead {
		op.Parameters = append(op.Parameters, b.paramRef(paramCacheControl))
	}
	var headers openapi3.Headers
	if e.Idempotent {
		op.Parameters = append(op.Parameters, b.paramRef(paramIdempotencyKey))
		headers = openapi3.Headers{headerReplayed: b.headerRef(headerReplayed)}
	}
	path := openAPIPath(e.Path)
	if e.Raw != "" {
		op.Responses = b.opResponses(e.Status, e.OK, nil, headers, dedupe(errs))
		ok := op.Responses.Value(strconv.Itoa(e.Status)).Value
		ok.Content = openapi3.Content{e.Raw: &openapi3.MediaType{Schema: e.Data(d)}}
		b.addOperation(path, e.Method, op)
		return
	}
	var data *openapi3.Schema
	if e.Data != nil {
		data = b.envelope(e.Data(d))
	}
	op.Responses = b.opResponses(e.Status, e.OK, data, headers, dedupe(errs))
	b.addOperation(path, e.Method, op)
}

// openAPIPath writes fiber's :param segments as {param}.
func openAPIPath(path string) string {
	segs := splitPath(path)
	for i, s := range segs {
		if name, ok := paramName(s); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return "/" + strings.Join(segs, "/")
}
