package gateway

import (
	"context"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/auth"
	"github.com/factline/factline/internal/host/openapi"
)

// Mount registers an extra endpoint (for example the webhook or plugin
// administration API) behind the access check doc names and the same
// problem errors, request ids, logs and metrics as the platform routes,
// and describes it in /openapi.json with doc. Mount before serving. The
// manifest's routes are matched first; a request none of them serves
// falls through to mounted endpoints.
//
// Every endpoint refuses a query parameter its documentation does not
// name, and any given twice, before h runs (see checkQuery): a read that
// ignored a misspelt filter (?stauts=dead) would answer as if unfiltered,
// a write that ignored one would go ahead.
func (s *Server) Mount(doc openapi.Endpoint, h fiber.Handler) {
	if doc.Method == fiber.MethodGet {
		h = checkingQuery(doc, h)
	}
	s.handle(doc, h) // which checks a write's query
}

// checkingQuery runs h after checking the request's query parameters
// against the ones doc documents; with a form-exploded object parameter
// (any name is a filter) only repeats are refused.
func checkingQuery(doc openapi.Endpoint, h fiber.Handler) fiber.Handler {
	known, anyName := documentedQuery(doc)
	return func(c *fiber.Ctx) error {
		names := known
		if anyName {
			names = queryNames(c)
		}
		if err := checkQuery(c, names...); err != nil {
			return err
		}
		return h(c)
	}
}

// documentedQuery are the names of the query parameters doc describes,
// read from the description the API document is built from, so that what
// is documented and what is accepted cannot drift apart. anyName reports a
// form-exploded object parameter, whose members are parameters of any
// name.
func documentedQuery(doc openapi.Endpoint) (names []string, anyName bool) {
	d, err := openapi.Generate(nil, nil, openapi.Options{Endpoints: []openapi.Endpoint{doc}})
	if err != nil {
		// Not reached: an endpoint alone always describes. Refuse
		// nothing rather than everything.
		return nil, true
	}
	for _, item := range d.Paths.Map() {
		op := item.GetOperation(doc.Method)
		if op == nil {
			continue
		}
		for _, p := range op.Parameters {
			if p == nil || p.Value == nil || p.Value.In != openapi3.ParameterInQuery {
				continue
			}
			v := p.Value
			if v.Explode != nil && *v.Explode && v.Schema != nil && v.Schema.Value != nil && v.Schema.Value.Type.Is(openapi3.TypeObject) {
				anyName = true
				continue
			}
			names = append(names, v.Name)
		}
	}
	return names, anyName
}

// Endpoints are the endpoints registered so far, in order: the platform's
// and the mounted ones (not the manifest's routes).
func (s *Server) Endpoints() []openapi.Endpoint { return slices.Clone(s.endpoints) }

// Principal returns the authenticated caller of a request (nil on public
// routes).
func Principal(c *fiber.Ctx) *auth.Principal { return principal(c) }

// Tenant returns the authenticated caller's tenant.
func Tenant(c *fiber.Ctx) string { return tenant(c) }

// Context returns the request's context, with its deadline.
func Context(c *fiber.Ctx) context.Context { return ctx(c) }

// Param returns a path parameter decoded: fiber's Params are the raw,
// still percent-encoded path bytes, so /v1/configs/cfg%5Fa would not
// find cfg_a and an error detail would quote the escapes. The value is a
// copy, safe to keep after the request. A parameter that does not decode
// is returned as sent, for the handler to refuse.
func Param(c *fiber.Ctx, name string) string {
	return strings.Clone(unescapeSegment(c.Params(name)))
}

// RequestID returns the request's id.
func RequestID(c *fiber.Ctx) string { return requestID(c) }

// Respond writes data inside the {data, meta} envelope.
func Respond(c *fiber.Ctx, status int, data any) error { return respond(c, status, data) }

// ReadJSON checks the content type and decodes the body as a JSON object
// with exact numbers, returning it and a copy of the raw body.
func ReadJSON(c *fiber.Ctx) (map[string]any, []byte, error) { return readJSON(c) }

// RefuseEmpty refuses the named query parameters when given with an
// empty value (?config_id=), which a listing would read as no filter.
func RefuseEmpty(c *fiber.Ctx, names ...string) error { return refuseEmpty(c, names...) }

// CheckQuery refuses query parameters other than known, and any given
// more than once, as a validation problem naming each.
func CheckQuery(c *fiber.Ctx, known ...string) error { return checkQuery(c, known...) }
