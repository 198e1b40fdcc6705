package openapi

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/factline/factline/internal/host/problem"
)

// errorResponse is a component response for one error status.
type errorResponse struct {
	name        string
	status      int
	description string
	kinds       []problem.Kind
	detail      []string // example detail per kind
}

// errorResponses are the component responses, by status.
var errorResponses = []errorResponse{
	{"BadRequest", 400, "The request is malformed (bad-request) or breaks the rules of the action or the domain manifest (validation-failed, with errors listing every offending field).",
		[]problem.Kind{problem.BadRequest, problem.ValidationFailed}, []string{"Malformed JSON body: unexpected end of JSON input", "Request validation failed"}},
	{"Unauthorized", 401, "The X-API-Key header is missing, malformed, unknown or revoked.",
		[]problem.Kind{problem.Unauthorized}, []string{"Invalid or missing API key"}},
	{"Forbidden", 403, "The key is valid but its mode may not use this endpoint; admin endpoints need an admin key.",
		[]problem.Kind{problem.Forbidden}, []string{"This endpoint requires an admin API key"}},
	{"NotFound", 404, "Nothing with this id exists in the caller's tenant (ids of other tenants answer 404 too).",
		[]problem.Kind{problem.NotFound}, []string{"Entity ent_01HZX3KQ7M9V2B8N4C6D5E0F1G not found"}},
	{"Conflict", 409, "The change is based on a stale version, the id is taken, the config is archived, or a request with the same Idempotency-Key is still running.",
		[]problem.Kind{problem.Conflict}, []string{"Entity ent_01HZX3KQ7M9V2B8N4C6D5E0F1G is at version 3, not 2"}},
	{"PayloadTooLarge", 413, "The request body is larger than the server accepts.",
		[]problem.Kind{problem.PayloadTooLarge}, []string{"Request body exceeds the limit of 1048576 bytes"}},
	{"UnsupportedMediaType", 415, "The request body is not declared as JSON; send Content-Type: application/json.",
		[]problem.Kind{problem.UnsupportedMediaType}, []string{"Content-Type must be application/json (got text/plain)"}},
	{"Unprocessable", 422, "The entity's ledger refused the command under its business rules, or an Idempotency-Key was reused with a different body.",
		[]problem.Kind{problem.Unprocessable}, []string{"This Idempotency-Key was already used with a different request"}},
	{"InternalError", 500, "Something failed inside the server; quote the trace_id to the operator.",
		[]problem.Kind{problem.Internal}, []string{"An internal error occurred; quote the trace_id when reporting it"}},
	{"Unavailable", 503, "A dependency the server needs (the database, the cache) is not answering.",
		[]problem.Kind{problem.Unavailable}, []string{"Unhealthy: [store]"}},
}

// responseDefault is the component for every other error status.
const responseDefault = "Error"

// problemExample is an example problem body of a kind.
func (b *builder) problemExample(k problem.Kind, detail string) map[string]any {
	ex := map[string]any{
		"type":     b.docsURL + "/errors/" + k.Slug,
		"title":    k.Title,
		"status":   k.Status,
		"detail":   detail,
		"instance": "/errors/" + exampleRequestID,
		"trace_id": exampleRequestID,
	}
	if k == problem.ValidationFailed {
		ex["errors"] = []any{map[string]any{"field": "data.status", "code": problem.CodeRequired, "message": "data.status is required"}}
	}
	return ex
}

// problemContent is application/problem+json with the Problem schema and
// examples, one per kind.
func (b *builder) problemContent(kinds []problem.Kind, details []string) openapi3.Content {
	mt := &openapi3.MediaType{Schema: b.schema(schemaProblem)}
	switch len(kinds) {
	case 0:
	case 1:
		mt.Example = b.problemExample(kinds[0], details[0])
	default:
		mt.Examples = openapi3.Examples{}
		for i, k := range kinds {
			mt.Examples[k.Slug] = &openapi3.ExampleRef{Value: &openapi3.Example{
				Summary: k.Title,
				Value:   b.problemExample(k, details[i]),
			}}
		}
	}
	return openapi3.Content{problem.ContentType: mt}
}

// fixedResponses defines the error responses, headers and parameters every
// operation shares.
func (b *builder) fixedResponses() {
	c := b.doc.Components
	for _, e := range errorResponses {
		c.Responses[e.name] = &openapi3.ResponseRef{Value: &openapi3.Response{
			Description: ptr(e.description),
			Content:     b.problemContent(e.kinds, e.detail),
		}}
	}
	c.Responses[responseDefault] = &openapi3.ResponseRef{Value: &openapi3.Response{
		Description: ptr("Any other error, as a problem: 405 method-not-allowed (with an Allow header), 503 unavailable when a dependency is down, 504 timeout when the request overran its deadline."),
		Content:     b.problemContent(nil, nil),
	}}

	intHeader := func(desc string) *openapi3.HeaderRef {
		s := typed(openapi3.TypeInteger, "")
		s.Min = ptr(0.0)
		return &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{Description: desc, Schema: inline(s)}}}
	}
	c.Headers[headerRetryAfter] = intHeader("Seconds to wait before the next request.")
	c.Headers[headerRateLimit] = intHeader("Requests the route allows per minute (for this tenant, or for everyone on a global limit).")
	c.Headers[headerRateRemaining] = intHeader("Requests left in the current window.")
	c.Headers[headerRateReset] = intHeader("Seconds until the window resets.")
	c.Headers[headerReplayed] = &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
		Description: "true when this is the stored response of an earlier request with the same Idempotency-Key; nothing was written again.",
		Schema:      enum("", "true"),
	}}}

	cursor := openapi3.NewQueryParameter("cursor").
		WithDescription("Opaque cursor from the previous page's cursor; omit for the first page.").
		WithSchema(openapi3.NewStringSchema())
	limit := typed(openapi3.TypeInteger, "")
	limit.Min, limit.Max, limit.Default = ptr(1.0), ptr(float64(maxPageSize)), defaultPageSize
	c.Parameters[paramCursor] = &openapi3.ParameterRef{Value: cursor}
	c.Parameters[paramLimit] = &openapi3.ParameterRef{Value: openapi3.NewQueryParameter("limit").
		WithDescription(fmt.Sprintf("Page size, %d to %d.", 1, maxPageSize)).
		WithSchema(limit)}
	key := openapi3.NewStringSchema().WithMinLength(1).WithMaxLength(255)
	key.Pattern = `^[\x21-\x7E]+$`
	c.Parameters[paramIdempotencyKey] = &openapi3.ParameterRef{Value: openapi3.NewHeaderParameter("Idempotency-Key").
		WithDescription("Makes the request safe to retry: the same key with the same body returns the first response (with Idempotent-Replayed: true) and writes nothing; with a different body it is a 422. Keys are remembered for 24 hours, per tenant.").
		WithSchema(key)}
	c.Parameters[paramCacheControl] = &openapi3.ParameterRef{Value: openapi3.NewHeaderParameter("Cache-Control").
		WithDescription("no-cache (or max-age=0) reads the entity as the database holds it. Without it the entity may come from this process's entity cache, which hears of a change made through another process sharing the database a few milliseconds after it commits: send no-cache to read at once a write made through another process. This process's own writes are always read at once.").
		WithSchema(openapi3.NewStringSchema())}
}

func (b *builder) responseRef(name string) *openapi3.ResponseRef {
	r := b.doc.Components.Responses[name]
	return &openapi3.ResponseRef{Ref: "#/components/responses/" + name, Value: r.Value}
}

func (b *builder) headerRef(name string) *openapi3.HeaderRef {
	h := b.doc.Components.Headers[name]
	return &openapi3.HeaderRef{Ref: "#/components/headers/" + name, Value: h.Value}
}

func (b *builder) paramRef(name string) *openapi3.ParameterRef {
	p := b.doc.Components.Parameters[name]
	return &openapi3.ParameterRef{Ref: "#/components/parameters/" + name, Value: p.Value}
}

// errorsByStatus maps a status to its component response.
var errorsByStatus = func() map[int]string {
	m := map[int]string{}
	for _, e := range errorResponses {
		m[e.status] = e.name
	}
	return m
}()

// opResponses assembles an operation's responses: the success response,
// the listed error statuses, and the default problem.
func (b *builder) opResponses(success int, desc string, body *openapi3.Schema, successHeaders openapi3.Headers, errs []int) *openapi3.Responses {
	rs := openapi3.NewResponses()
	ok := &openapi3.Response{Description: ptr(desc), Headers: successHeaders}
	if body != nil {
		ok.Content = openapi3.NewContentWithJSONSchema(body)
	}
	rs.Set(strconv.Itoa(success), &openapi3.ResponseRef{Value: ok})
	sort.Ints(errs)
	for _, st := range errs {
		name, found := errorsByStatus[st]
		if !found {
			panic(fmt.Sprintf("openapi: no component response for status %d", st))
		}
		rs.Set(strconv.Itoa(st), b.responseRef(name))
	}
	rs.Set("default", b.responseRef(responseDefault))
	return rs
}

// tooManyRequests is a route's 429, describing its limit.
func (b *builder) tooManyRequests(rpm int, scope string) *openapi3.ResponseRef {
	per := "per tenant"
	if scope == "global" {
		per = "across all callers"
	}
	desc := fmt.Sprintf("The route's rate limit (%d requests per minute %s) is used up; wait Retry-After seconds.", rpm, per)
	return &openapi3.ResponseRef{Value: &openapi3.Response{
		Description: ptr(desc),
		Headers:     b.rateHeaders(true),
		Content:     b.problemContent([]problem.Kind{problem.RateLimitExceeded}, []string{fmt.Sprintf("Rate limit exceeded: %d requests per minute", rpm)}),
	}}
}

// rateHeaders are the RateLimit-* headers, with Retry-After on a 429.
func (b *builder) rateHeaders(retry bool) openapi3.Headers {
	h := openapi3.Headers{
		headerRateLimit:     b.headerRef(headerRateLimit),
		headerRateRemaining: b.headerRef(headerRateRemaining),
		headerRateReset:     b.headerRef(headerRateReset),
	}
	if retry {
		h[headerRetryAfter] = b.headerRef(headerRetryAfter)
	}
	return h
}
