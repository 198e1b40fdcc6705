package gateway

import (
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gofiber/fiber/v2"

	"github.com/factline/factline/internal/host/openapi"
)

// Route is one endpoint: its documentation and its handler, which runs
// after the access check the documentation names.
type Route struct {
	Doc     openapi.Endpoint
	Handler fiber.Handler
}

// Docs are the routes' documentation, for a description of the API made
// without a server: a package lists its routes with a nil receiver, whose
// handlers are never called.
func Docs(rs []Route) []openapi.Endpoint {
	docs := make([]openapi.Endpoint, len(rs))
	for i, r := range rs {
		docs[i] = r.Doc
	}
	return docs
}

// Statuses the platform's endpoints answer.
const (
	ok       = http.StatusOK
	created  = http.StatusCreated
	bad      = http.StatusBadRequest
	notFound = http.StatusNotFound
	conflict = http.StatusConflict
	unproc   = http.StatusUnprocessableEntity
)

// versionParam is a config version in a path.
var versionParam = openapi.ParamFunc(func(openapi.Doc) *openapi3.ParameterRef {
	return &openapi3.ParameterRef{Value: openapi3.NewPathParameter("version").
		WithDescription("Version number, from 1.").WithSchema(openapi3.NewIntegerSchema().WithMin(1))}
})

// PlatformEndpoints documents the endpoints every server registers (with
// /metrics when it is served on the API port), for a description of the
// API made without a server.
func PlatformEndpoints(metrics bool) []openapi.Endpoint {
	return Docs((*Server)(nil).platformRoutes(metrics))
}

// platformRoutes are the server's own pages and the platform API. Ledger
// command routes (/v1/entities/:id/...) are registered apart: the ledgers
// that serve them describe them.
func (s *Server) platformRoutes(metrics bool) []Route {
	rs := []Route{
		{Handler: s.health, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/health", ID: "getHealth", Tag: openapi.TagHealth,
			Summary:     "Health",
			Description: "Checks the store and the other dependencies. 200 while the critical checks pass (degraded when only a non-critical one fails), a 503 problem otherwise.",
			Access:      openapi.Public, Status: ok, OK: "The server is healthy.", Data: openapi.Ref("Health"),
			Problems: []int{http.StatusServiceUnavailable}}},
		{Handler: s.readiness, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/ready", ID: "getReady", Tag: openapi.TagHealth,
			Summary:     "Readiness",
			Description: "200 once the plugins and the domain model are loaded, a 503 problem saying what is still loading before; for load balancers and orchestrators.",
			Access:      openapi.Public, Status: ok, OK: "The server is ready.",
			Data:     openapi.Object("Readiness.", []string{"status"}, false, openapi.Prop{Name: "status", Schema: openapi.Enum("Always ready.", "ready")}),
			Problems: []int{http.StatusServiceUnavailable}}},
		{Handler: s.errorIndex, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/errors", ID: "getErrorIndex", Tag: openapi.TagReference,
			Summary:     "Problem types",
			Description: "Every problem type with its title and HTTP status, each linking to its page.",
			Access:      openapi.Public, Status: ok, OK: "The list.", Raw: fiber.MIMETextHTMLCharsetUTF8, Data: openapi.String("An HTML page.")}},
		{Handler: s.errorPage, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/errors/:slug", ID: "getErrorPage", Tag: openapi.TagReference,
			Summary:     "Problem type page",
			Description: "The human page of a problem type: a problem's type URI is the docs URL followed by /errors/<slug>.",
			Params:      []openapi.Param{openapi.PathParam("slug", "The problem type's slug (not-found, validation-failed, ...).")},
			Access:      openapi.Public, Status: ok, OK: "The page.", Raw: fiber.MIMETextHTMLCharsetUTF8, Data: openapi.String("An HTML page."),
			Problems: []int{notFound}}},
		{Handler: s.openAPI, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/openapi.json", ID: "getOpenApi", Tag: openapi.TagReference,
			Summary:     "This API's description",
			Description: "This document: the routes being served, the platform API and the commands the ledgers serve right now.",
			Access:      openapi.Public, Status: ok, OK: "The OpenAPI document.", Raw: fiber.MIMEApplicationJSONCharsetUTF8, Data: openapi.FreeObject("An OpenAPI 3.0.3 document.")}},
		{Handler: s.apiReference, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/docs", ID: "getApiReference", Tag: openapi.TagReference,
			Summary:     "API reference",
			Description: "This document as a self-contained HTML page.",
			Access:      openapi.Public, Status: ok, OK: "The reference page.", Raw: fiber.MIMETextHTMLCharsetUTF8, Data: openapi.String("An HTML page.")}},
	}
	if metrics {
		rs = append(rs, Route{Handler: s.serveMetrics, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/metrics", ID: "getMetrics", Tag: openapi.TagHealth,
			Summary:     "Prometheus metrics",
			Description: "The process's metrics in the Prometheus text format. Served here unless the process serves them on a listener of its own.",
			Access:      openapi.Public, Status: ok, OK: "The metrics.", Raw: "text/plain; version=0.0.4", Data: openapi.String("Metrics in the Prometheus text exposition format.")}})
	}
	return append(rs, []Route{
		{Handler: s.createEntity, Doc: openapi.Endpoint{Method: http.MethodPost, Path: "/v1/entities", ID: "createEntity", Tag: openapi.TagEntities,
			Summary:     "Create an entity",
			Description: "Creates an entity of a declared type at version 1 and returns {id, entity}.",
			Body:        openapi.Ref("CreateEntityRequest"), Status: created, OK: "The entity was created.", Data: openapi.Ref("EntityCreated"),
			Problems: []int{bad, conflict, unproc}, Idempotent: true}},
		{Handler: s.listEntities, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/entities", ID: "listEntities", Tag: openapi.TagEntities,
			Summary:     "List entities of a type",
			Description: "Lists the tenant's entities of one type in id order, a page at a time, optionally filtered on indexed fields.",
			Params:      []openapi.Param{openapi.EntityTypeParam("Type of the entities to list.", true), openapi.Limit, openapi.Cursor, openapi.EntityFilters},
			Status:      ok, OK: "A page of entities.", Data: openapi.Ref("EntityPage"), Problems: []int{bad}}},
		{Handler: s.getEntity, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/entities/:id", ID: "getEntity", Tag: openapi.TagEntities,
			Summary:     "Get an entity",
			Description: "Returns an entity. entity_type is required (400 entity_type required); an entity of another type answers 404.",
			Params:      []openapi.Param{openapi.IDParam("entity"), openapi.EntityTypeParam("The entity's type.", true)},
			Status:      ok, OK: "The entity.", Data: openapi.Ref("Entity"), Problems: []int{bad, notFound}, CachedRead: true}},
		{Handler: s.updateEntity, Doc: openapi.Endpoint{Method: http.MethodPatch, Path: "/v1/entities/:id", ID: "updateEntity", Tag: openapi.TagEntities,
			Summary:     "Update an entity's fields",
			Description: "Applies a JSON merge patch (RFC 7396) to the entity's fields and metadata when the entity is still at the given version, and adds one to the version.",
			Params:      []openapi.Param{openapi.IDParam("entity"), openapi.EntityTypeParam("When sent (and not in the body), the entity must be of this type.", false)},
			Body:        openapi.Ref("UpdateEntityRequest"), Status: ok, OK: "The updated entity.", Data: openapi.Ref("Entity"),
			Problems: []int{bad, notFound, conflict, unproc}, Idempotent: true}},
		{Handler: s.listEntityFacts, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/entities/:id/facts", ID: "listEntityFacts", Tag: openapi.TagEntities,
			Summary:     "List an entity's facts",
			Description: "Lists the facts of an entity's ledger in seq order, a page at a time.",
			Params:      []openapi.Param{openapi.IDParam("entity"), openapi.Limit, openapi.Cursor},
			Status:      ok, OK: "A page of facts.", Data: openapi.Ref("FactPage"), Problems: []int{bad, notFound}}},
		{Handler: s.appendFact, Doc: openapi.Endpoint{Method: http.MethodPost, Path: "/v1/facts", ID: "appendFact", Tag: openapi.TagFacts,
			Summary:     "Append a fact",
			Description: "Appends a fact to an entity's ledger. The entity's version grows by one.",
			Body:        openapi.Ref("AppendFactRequest"), Status: created, OK: "The appended fact.", Data: openapi.Ref("Fact"),
			Problems: []int{bad, notFound, conflict, unproc}, Idempotent: true}},
		{Handler: s.listFacts, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/facts", ID: "listFacts", Tag: openapi.TagFacts,
			Summary: "List the tenant's facts",
			Description: "Lists the tenant's facts in commit (global position) order, a page at a time, entity-less ones such as webhook.triggered and webhook.sent included. " +
				"Every filter given must match; an unknown query parameter is a validation-failed (unknown_field). The cursor is stable: facts appended later come after it.",
			Params: []openapi.Param{
				openapi.QueryParam("type", "Only facts of this type.", openapi.String("")),
				openapi.QueryParam("subtype", "Only facts of this subtype; needs type.", openapi.String("")),
				openapi.QueryParam("source_id", "Only facts with this source_id (the webhook.sent facts of a delivery name its webhook.triggered fact).", openapi.String("")),
				openapi.QueryParam("entity_id", "Only facts of this entity.", openapi.String("")),
				openapi.QueryParam("from", "Only facts with timestamp at or after this time: milliseconds since the epoch or RFC 3339.", openapi.String("")),
				openapi.QueryParam("to", "Only facts with timestamp at or before this time: milliseconds since the epoch or RFC 3339.", openapi.String("")),
				openapi.Limit, openapi.Cursor,
			},
			Status: ok, OK: "A page of facts.", Data: openapi.Ref("FactPage"), Problems: []int{bad}}},
		{Handler: s.getFact, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/facts/:id", ID: "getFact", Tag: openapi.TagFacts,
			Summary: "Get a fact", Params: []openapi.Param{openapi.IDParam("fact")},
			Status: ok, OK: "The fact.", Data: openapi.Ref("Fact"), Problems: []int{notFound}}},
		{Handler: s.createConfig, Doc: openapi.Endpoint{Method: http.MethodPost, Path: "/v1/configs", ID: "createConfig", Tag: openapi.TagConfigs,
			Summary: "Create a config",
			Body:    openapi.Ref("CreateConfigRequest"), Status: created, OK: "The config at version 1.", Data: openapi.Ref("Config"),
			Problems: []int{bad, conflict, unproc}, Idempotent: true}},
		{Handler: s.listConfigs, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/configs", ID: "listConfigs", Tag: openapi.TagConfigs,
			Summary:     "List configs",
			Description: "Lists the current versions of the tenant's configs, a page at a time.",
			Params: []openapi.Param{
				openapi.QueryParam("type", "Only configs of this type.", openapi.String("")),
				openapi.QueryParam("status", "Only configs with this status.", openapi.Enum("", "active", "archived")),
				openapi.Limit, openapi.Cursor,
			},
			Status: ok, OK: "A page of configs.", Data: openapi.Ref("ConfigPage"), Problems: []int{bad}}},
		{Handler: s.getConfig, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/configs/:id", ID: "getConfig", Tag: openapi.TagConfigs,
			Summary: "Get a config's current version", Params: []openapi.Param{openapi.IDParam("config")},
			Status: ok, OK: "The current version.", Data: openapi.Ref("Config"), Problems: []int{notFound}}},
		{Handler: s.updateConfig, Doc: openapi.Endpoint{Method: http.MethodPut, Path: "/v1/configs/:id", ID: "updateConfig", Tag: openapi.TagConfigs,
			Summary:     "Write a config's next version",
			Description: "Writes version n+1 with the given settings; version n gets superseded_at. An archived config takes no new version (409).",
			Params:      []openapi.Param{openapi.IDParam("config")},
			Body:        openapi.Ref("UpdateConfigRequest"), Status: ok, OK: "The new version.", Data: openapi.Ref("Config"),
			Problems: []int{bad, notFound, conflict}}},
		{Handler: s.archiveConfig, Doc: openapi.Endpoint{Method: http.MethodDelete, Path: "/v1/configs/:id", ID: "archiveConfig", Tag: openapi.TagConfigs,
			Summary:     "Archive a config",
			Description: "Soft-deletes the config: its current version becomes archived; every version stays readable.",
			Params:      []openapi.Param{openapi.IDParam("config")},
			Status:      ok, OK: "The archived config.", Data: openapi.Ref("Config"), Problems: []int{notFound}}},
		{Handler: s.configVersions, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/configs/:id/versions", ID: "listConfigVersions", Tag: openapi.TagConfigs,
			Summary: "List a config's versions", Params: []openapi.Param{openapi.IDParam("config")},
			Status: ok, OK: "Every version, oldest first.", Data: openapi.Ref("ConfigVersions"), Problems: []int{notFound}}},
		{Handler: s.configVersion, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/configs/:id/versions/:version", ID: "getConfigVersion", Tag: openapi.TagConfigs,
			Summary: "Get one version of a config",
			Params:  []openapi.Param{openapi.IDParam("config"), versionParam},
			Status:  ok, OK: "The version.", Data: openapi.Ref("Config"), Problems: []int{bad, notFound}}},
		{Handler: s.listKeys, Doc: openapi.Endpoint{Method: http.MethodGet, Path: "/v1/admin/keys", ID: "listApiKeys", Tag: openapi.TagAdmin,
			Summary: "List the tenant's API keys", Access: openapi.AdminKey,
			Status: ok, OK: "The keys, without their secrets.", Data: openapi.Ref("ApiKeyList")}},
		{Handler: s.createKey, Doc: openapi.Endpoint{Method: http.MethodPost, Path: "/v1/admin/keys", ID: "createApiKey", Tag: openapi.TagAdmin,
			Summary: "Issue an API key", Access: openapi.AdminKey,
			Description: "Issues a key for the caller's tenant. The response holds the key once; only its hash is stored.",
			Body:        openapi.Ref("CreateApiKeyRequest"), Status: created, OK: "The new key.", Data: openapi.Ref("ApiKeyCreated"),
			Problems: []int{bad}}},
		{Handler: s.revokeKey, Doc: openapi.Endpoint{Method: http.MethodDelete, Path: "/v1/admin/keys/:id", ID: "revokeApiKey", Tag: openapi.TagAdmin,
			Summary: "Revoke an API key", Access: openapi.AdminKey,
			Description: "Revokes a key of the caller's tenant; it stops working at once in this process and within seconds in others.",
			Params:      []openapi.Param{openapi.IDParam("API key")},
			Status:      ok, OK: "The revoked key.", Data: openapi.Ref("ApiKey"), Problems: []int{notFound}}},
	}...)
}
