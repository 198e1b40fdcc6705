package openapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/factline/factline/internal/host/manifest"
)

// entityParamNames are the path parameters that name a route's entity, in
// order of preference; failing those, a route's only parameter does.
var entityParamNames = []string{"id", "entityId", "entity_id"}

// entityParam returns the index in params of the parameter naming the
// route's entity, or -1 when the path does not name it.
func entityParam(params []string) int {
	for _, want := range entityParamNames {
		for i, p := range params {
			if p == want {
				return i
			}
		}
	}
	if len(params) == 1 {
		return 0
	}
	return -1
}

// route describes one manifest route.
func (b *builder) route(r *manifest.Route) error {
	path, names := b.templatePath(r.Path)
	if len(names) != len(r.Params) {
		return errf(r, "path has %d parameters, the route lists %d", len(names), len(r.Params))
	}
	public := r.Auth == manifest.AuthPublic
	op := &openapi3.Operation{
		OperationID: b.operationID(derivedOperationID(r.Method, r.Path)),
		Security:    security(public),
	}
	entityIdx := entityParam(r.Params)
	for i, name := range names {
		desc := fmt.Sprintf("Path parameter %s.", name)
		if i == entityIdx && r.Entity != manifest.SystemEntity {
			desc = fmt.Sprintf("Id of the %s.", r.Entity)
		}
		op.AddParameter(openapi3.NewPathParameter(name).WithDescription(desc).WithSchema(openapi3.NewStringSchema()))
	}

	var t *manifest.EntityType
	if r.Entity == manifest.SystemEntity {
		if r.Action != manifest.ActionGet {
			return errf(r, "the system entity serves only the get action, not %s", r.Action)
		}
		b.addTag(r.Entity, "The gateway itself.")
	} else {
		t = b.domain.Entities[r.Entity]
		if t == nil {
			return errf(r, "entity type %q is declared neither in the domain manifest nor in the gateway manifest", r.Entity)
		}
		b.addTag(r.Entity, t.Description)
	}
	op.Tags = []string{r.Entity}

	var (
		status  int
		okDesc  string
		data    *openapi3.SchemaRef
		errs    = []int{http.StatusInternalServerError}
		hasBody = r.Method != http.MethodGet
	)
	idempotent := false
	switch {
	case t == nil: // system
		op.Summary = "Gateway status"
		op.Description = "Name of the gateway manifest served, server version and status."
		status, okDesc, data = http.StatusOK, "The gateway's status.", b.schema(schemaSystemStatus)
		hasBody = false
	case r.Action == manifest.ActionEmit:
		op.Summary = fmt.Sprintf("Emit %s fact on %s", article(r.FactType), article(r.Entity))
		op.Description = fmt.Sprintf("Appends a fact of type %s to the %s's ledger and returns its id, ledger position (seq) and timestamp.", r.FactType, r.Entity)
		if entityIdx >= 0 {
			op.Description += fmt.Sprintf(" The path parameter %s names the %s.", names[entityIdx], r.Entity)
		} else {
			op.Description += fmt.Sprintf(" The body's entityId names the %s.", r.Entity)
		}
		op.RequestBody = jsonBody("The fact to append.", b.emitRequest(r, entityIdx >= 0))
		status, okDesc, data = http.StatusCreated, "The fact was appended.", b.schema(schemaEmitResult)
		errs = append(errs, http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity)
		idempotent = true
	case r.Action == manifest.ActionGet:
		op.Summary = "Get " + article(r.Entity)
		op.Description = fmt.Sprintf("Returns the %s named by the path.", r.Entity)
		status, okDesc, data = http.StatusOK, "The "+r.Entity+".", b.schema(r.Entity+entityObjectSuffix)
		errs = append(errs, http.StatusNotFound)
		op.Parameters = append(op.Parameters, b.paramRef(paramCacheControl))
	case r.Action == manifest.ActionCreate:
		op.Summary = "Create " + article(r.Entity)
		op.Description = fmt.Sprintf("Creates a %s from its fields in data; the required fields must be present and every declared field must have its declared type.", r.Entity)
		op.RequestBody = jsonBody("The "+r.Entity+" to create.", b.createRequest(r))
		status, okDesc = http.StatusCreated, "The "+r.Entity+" was created."
		data = inline(object("The created entity.", []string{"id", "entity"}, false,
			prop{"id", str("The new entity's id.")},
			prop{"entity", b.schema(r.Entity + entityObjectSuffix)},
		))
		errs = append(errs, http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity)
		idempotent = true
	case r.Action == manifest.ActionList:
		op.Summary = fmt.Sprintf("List %s entities", r.Entity)
		op.Description = fmt.Sprintf("Lists the tenant's %s entities in id order, a page at a time. Each filter parameter keeps the entities whose field equals the value.", r.Entity)
		op.Parameters = append(op.Parameters, b.paramRef(paramCursor), b.paramRef(paramLimit))
		for _, f := range t.Fields {
			if f.Storage == "" || f.Name == "cursor" || f.Name == "limit" {
				continue
			}
			s := fieldSchema(f)
			s.Description = ""
			op.AddParameter(openapi3.NewQueryParameter(f.Name).
				WithDescription(fmt.Sprintf("Only %s entities whose %s equals this value.", r.Entity, f.Name)).
				WithSchema(s))
		}
		status, okDesc = http.StatusOK, "A page of "+r.Entity+" entities."
		data = inline(page("A page of "+r.Entity+" entities in id order.", b.schema(r.Entity+entityObjectSuffix)))
		errs = append(errs, http.StatusBadRequest)
	case r.Action == manifest.ActionQuery:
		op.Summary = "Query a projection (" + r.Entity + ")"
		op.Description = "Runs a named projection's query and returns its results."
		inPath := slices.Contains(names, "projection")
		switch {
		case r.Method == http.MethodGet:
			if inPath {
				op.Description += " The path parameter projection names the projection (config id or name)."
			} else {
				op.Description += " The projection query parameter names the projection (config id or name)."
				op.AddParameter(openapi3.NewQueryParameter("projection").
					WithDescription("The projection config's id or name.").
					WithRequired(true).
					WithSchema(openapi3.NewStringSchema()))
			}
			op.Description += " Every other query parameter is a filter: from, to, aggregate, mode, or a groupBy field."
			for _, q := range []struct{ name, desc string }{
				{"from", "Inclusive start: ms epoch, RFC 3339 or a bucket key such as 2024-01-15T10:30."},
				{"to", "Inclusive end, as from."},
				{"aggregate", "true merges the selected buckets into one row."},
				{"mode", "materialized (default), compute or verify."},
			} {
				op.AddParameter(openapi3.NewQueryParameter(q.name).WithDescription(q.desc).WithSchema(openapi3.NewStringSchema()))
			}
		case inPath:
			op.Description += " The path parameter projection names the projection (config id or name)."
			op.RequestBody = jsonBody("The query.", b.schema(schemaProjectionQuery))
		default:
			op.RequestBody = jsonBody("The query.", b.schema(schemaQueryRequest))
		}
		status, okDesc, data = http.StatusOK, "The projection's results.", b.schema(schemaQueryResult)
		errs = append(errs, http.StatusBadRequest, http.StatusNotFound)
	case r.Action == manifest.ActionCommand:
		cmd, known := b.command(r.Entity, r.Command)
		op.Summary = cmpOr(cmd.Description, fmt.Sprintf("Run the %s command on %s", r.Command, article(r.Entity)))
		op.Description = fmt.Sprintf("Runs the %s command of the %s's ledger (%s) on the %s the path parameter id names.", r.Command, r.Entity, t.Ledger, r.Entity)
		if len(names) > 1 {
			op.Description += " The other path parameters join the command's input and win over body members of the same name."
		}
		read := cmd.ReadOnly || !known && r.Method == http.MethodGet
		if read {
			op.Description += " Read-only: answers the command's result and records nothing."
			status, okDesc, data = http.StatusOK, "The command's result.", described(cmd.ResultSchema, "The command's result, as the ledger computes it from the entity's state.")
		} else {
			op.Description += " Records the facts the ledger decides and answers the recorded fact (or {facts} when several)."
			status, okDesc, data = http.StatusCreated, "The recorded fact.", b.schema(schemaFact)
			idempotent = true
			errs = append(errs, http.StatusConflict)
		}
		if r.Method == http.MethodGet || r.Method == http.MethodDelete {
			op.Description += " The query string is the command's input."
			hasBody = false
		} else {
			op.RequestBody = jsonBody("The command's input.", described(cmd.InputSchema, "The command's input, as the ledger defines it."))
		}
		if !known {
			op.Description += " The ledger's plugin is not loaded here, so its input and result are not described."
		}
		// 503 while the ledger's plugin (or this command) is not loaded.
		errs = append(errs, http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusServiceUnavailable)
	default:
		return errf(r, "unknown action %q", r.Action)
	}
	if hasBody && op.RequestBody != nil {
		errs = append(errs, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
	}
	if len(names) > 0 {
		errs = append(errs, http.StatusNotFound)
	}
	if !public {
		errs = append(errs, http.StatusUnauthorized)
	}
	var headers openapi3.Headers
	if idempotent {
		op.Parameters = append(op.Parameters, b.paramRef(paramIdempotencyKey))
		headers = openapi3.Headers{headerReplayed: b.headerRef(headerReplayed)}
	}
	if r.RateLimit != nil {
		if headers == nil {
			headers = openapi3.Headers{}
		}
		for k, v := range b.rateHeaders(false) {
			headers[k] = v
		}
	}
	op.Responses = b.opResponses(status, okDesc, b.envelope(data), headers, dedupe(errs))
	if r.RateLimit != nil {
		op.Responses.Set("429", b.tooManyRequests(r.RateLimit.RPM, r.RateLimit.Scope))
		op.Description += fmt.Sprintf(" Rate limit: %d requests per minute %s.", r.RateLimit.RPM, scopeText(r.RateLimit.Scope, public))
	}
	if public {
		op.Description += " Public: no API key needed."
	}
	op.Extensions = map[string]any{"x-factline-route": routeExtension(r)}
	b.addOperation(path, r.Method, op)
	return nil
}

func scopeText(scope string, public bool) string {
	switch {
	case scope == manifest.ScopeGlobal:
		return "across all callers"
	case public:
		return "per client address"
	}
	return "per tenant"
}

// routeExtension records the manifest route behind an operation, for
// tools.
func routeExtension(r *manifest.Route) map[string]any {
	x := map[string]any{
		"path":   r.Path,
		"entity": r.Entity,
		"action": r.Action,
		"auth":   r.Auth,
	}
	if r.FactType != "" {
		x["factType"] = r.FactType
	}
	if r.Command != "" {
		x["command"] = r.Command
	}
	if r.RateLimit != nil {
		x["rateLimit"] = map[string]any{"rpm": r.RateLimit.RPM, "scope": r.RateLimit.Scope}
	}
	return x
}

// emitRequest is the emit action's input. entityId is required unless the
// path names the entity; factType, when sent, must be the route's.
func (b *builder) emitRequest(r *manifest.Route, fromPath bool) *openapi3.SchemaRef {
	props := []prop{
		{"factType", enum("The route's fact type; may be omitted.", r.FactType)},
		{"data", b.factData(r.Entity, r.FactType)},
		{"subtype", str("Optional refinement of the fact type (lowercase letters, digits and underscores).")},
		{"timestamp", millis("When it happened; defaults to now")},
		{"source_id", str("Caller's id of the fact's origin.")},
	}
	required := []string{"data"}
	if !fromPath {
		props = append(props, prop{"entityId", str(fmt.Sprintf("Id of the %s whose ledger takes the fact.", r.Entity))})
		required = []string{"entityId", "data"}
	}
	return inline(object(fmt.Sprintf("A %s fact for %s.", r.FactType, article(r.Entity)), required, true, props...))
}

// createRequest is the create action's input.
func (b *builder) createRequest(r *manifest.Route) *openapi3.SchemaRef {
	return inline(object("A new "+r.Entity+".", []string{"data"}, true,
		prop{"type", enum("The entity type; may be omitted, and must be "+r.Entity+" when sent.", r.Entity)},
		prop{"id", str("The entity's id (1-128 characters of letters, digits and _ . : -); generated (ent_<ulid>) when absent.")},
		prop{"data", b.schema(r.Entity + entityFieldsSuffix)},
		prop{"metadata", freeObject("Free-form metadata.")},
	))
}

func jsonBody(desc string, s *openapi3.SchemaRef) *openapi3.RequestBodyRef {
	return &openapi3.RequestBodyRef{Value: &openapi3.RequestBody{
		Description: desc,
		Required:    true,
		Content:     openapi3.NewContentWithJSONSchemaRef(s),
	}}
}

func dedupe(xs []int) []int {
	seen := map[int]bool{}
	out := xs[:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// methodOrder is the order operations are listed in within a path.
var methodOrder = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions, http.MethodTrace}

func methodRank(m string) int {
	for i, x := range methodOrder {
		if strings.EqualFold(x, m) {
			return i
		}
	}
	return len(methodOrder)
}
