package openapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Tags of the platform endpoints. Entity type names are lowercase, so
// these never coincide with a route's tag.
const (
	tagEntities    = "Entities"
	tagFacts       = "Facts"
	tagConfigs     = "Configs"
	tagAdmin       = "Admin"
	tagProjections = "Projections"
	tagHealth      = "Health"
)

// platformTags are the platform's tags, new for every document.
func platformTags() []*openapi3.Tag {
	return []*openapi3.Tag{
		{Name: tagEntities, Description: "Platform API: entities of every type the domain manifest declares."},
		{Name: tagFacts, Description: "Platform API: facts, the immutable records appended to entity ledgers."},
		{Name: tagConfigs, Description: "Platform API: versioned configs; every update writes a new immutable version."},
		{Name: tagProjections, Description: "Platform API: projections (configs of type projection) and their results."},
		{Name: tagAdmin, Description: "Platform API: API keys and the fact stream. Admin keys only."},
		{Name: tagHealth, Description: "Server health."},
	}
}

// platformOp is one platform endpoint.
type platformOp struct {
	method, path, id, tag, summary, description string
	params                                      []*openapi3.ParameterRef
	body                                        *openapi3.SchemaRef
	status                                      int
	okDesc                                      string
	data                                        *openapi3.SchemaRef
	errs                                        []int
	idempotent, public, admin                   bool
	// manifestBody: the body is a domain manifest, YAML or JSON.
	manifestBody bool
}

// positive is an integer from 1.
func positive(desc string) *openapi3.SchemaRef {
	r := integer(desc)
	r.Value.Min = ptr(1.0)
	return r
}

func nameParam(what string) *openapi3.ParameterRef {
	return &openapi3.ParameterRef{Value: openapi3.NewPathParameter("name").
		WithDescription("Name of the " + what + ": 1 to 64 lowercase letters, digits, '_' or '-'.").
		WithSchema(openapi3.NewStringSchema().WithPattern("^[a-z0-9][a-z0-9_-]{0,63}$"))}
}

func idParam(what string) *openapi3.ParameterRef {
	return &openapi3.ParameterRef{Value: openapi3.NewPathParameter("id").
		WithDescription("Id of the " + what + ".").
		WithSchema(openapi3.NewStringSchema())}
}

// platform describes the /v1 endpoints and /health.
func (b *builder) platform() {
	types := b.domain.EntityTypeNames()
	typeSchema := func(desc string) *openapi3.Schema {
		s := openapi3.NewStringSchema()
		s.Description = desc
		for _, t := range types {
			s.Enum = append(s.Enum, t)
		}
		return s
	}
	entityTypeQuery := func(desc string) *openapi3.ParameterRef {
		return &openapi3.ParameterRef{Value: openapi3.NewQueryParameter("entity_type").
			WithDescription(desc).WithRequired(true).WithSchema(typeSchema(""))}
	}
	entityPatchBody := func() *openapi3.Schema {
		s := object("A JSON merge patch of the entity's fields: a field set to null is removed, others replace the stored value. Fields may sit at the top level or in data (top level wins). The patched entity must still satisfy its type's field declarations.",
			[]string{"version"}, false,
			prop{"version", positive("The version the change is based on; anything but the current version is a 409.")},
			prop{"entity_type", inline(typeSchema("When sent, the entity must be of this type (else 404)."))},
			prop{"metadata", freeObject("Replaces the entity's metadata.")},
			prop{"data", freeObject("Fields to patch.")},
		)
		s.AdditionalProperties = openapi3.AdditionalProperties{Has: ptr(true)}
		return s
	}()
	createEntity := object("A new entity: its type, optional id and metadata, and its fields at the top level or in data (top level wins). The fields are those the domain manifest declares for the type (see the <type>.Fields schemas); required ones must be present.",
		[]string{"type"}, false,
		prop{"type", inline(typeSchema("Entity type; an unknown type is a 400 (Unknown entity type: <type>)."))},
		prop{"id", str("The entity's id (1-128 characters of letters, digits and _ . : -); generated (ent_<ulid>) when absent.")},
		prop{"metadata", freeObject("Free-form metadata.")},
		prop{"data", freeObject("The entity's fields, when not sent at the top level.")},
	)
	createEntity.AdditionalProperties = openapi3.AdditionalProperties{Has: ptr(true)}
	b.define(schemaCreateEntity, createEntity)
	b.define(schemaUpdateEntity, entityPatchBody)
	b.define(schemaAppendFact, object("A fact to append to an entity's ledger.", []string{"entity_id", "type"}, true,
		prop{"entity_id", str("The entity whose ledger takes the fact.")},
		prop{"type", str("Fact type; the entity's type must declare it (else validation-failed).")},
		prop{"subtype", str("Optional refinement (lowercase letters, digits and underscores).")},
		prop{"timestamp", millis("When it happened; defaults to now")},
		prop{"data", freeObject("The fact's payload. A fact type with a schema takes the members of its <entity type>.<fact type>.Data component (listed in x-event-catalog); data that breaks it is a validation-failed listing every field error (data.<member>).")},
		prop{"source_id", str("Caller's id of the fact's origin.")},
		prop{"trace_id", str("Trace id; defaults to the request id.")},
		prop{"expected_version", positive("When sent, the entity must be at this version (else 409).")},
	))
	configProps := func(creating bool) []prop {
		ps := []prop{
			{"settings", freeObject("The settings; every version holds all of them.")},
			{"name", str("Display name.")},
			{"scope_type", str("What the config applies to (lowercase letters, digits and _: global, tenant, account, ...).")},
			{"scope_id", str("Id of the scoped object.")},
			{"effective_at", millis("When the version takes effect; defaults to now")},
		}
		if creating {
			return append(ps,
				prop{"type", str("Config type (lowercase letters, digits, _ . and -); never changes.")},
				prop{"id", str("The config's id (1-128 characters of letters, digits and _ . : -); generated (cfg_<ulid>) when absent.")},
			)
		}
		return append(ps, prop{"version", positive("When sent, the config must be at this version (else 409).")})
	}
	b.define(schemaCreateConfig, object("A new config; it starts at version 1.", []string{"type", "settings"}, true, configProps(true)...))
	b.define(schemaUpdateConfig, object("The next version of a config.", []string{"settings"}, true, configProps(false)...))
	b.define(schemaCreateAPIKey, object("A key to issue for the caller's tenant.", []string{"mode"}, true,
		prop{"mode", enum("What the key may do.", "live", "test", "admin")},
		prop{"name", str("Optional label.")},
	))

	filters := openapi3.NewQueryParameter("filters")
	filters.Style, filters.Explode = "form", ptr(true)
	filterSchema := openapi3.NewObjectSchema()
	filterSchema.AdditionalProperties = openapi3.AdditionalProperties{Schema: inline(openapi3.NewStringSchema())}
	filters.Schema = inline(filterSchema)
	filters.Description = "Equality filters on indexed fields, one query parameter each (<field>=<value>); a field without an index is a validation-failed (unknown_field)." + b.indexedFieldsText()

	const (
		ok       = http.StatusOK
		created  = http.StatusCreated
		bad      = http.StatusBadRequest
		notFound = http.StatusNotFound
		conflict = http.StatusConflict
		unproc   = http.StatusUnprocessableEntity
	)
	ops := []platformOp{
		{method: http.MethodPost, path: "/v1/entities", id: "createEntity", tag: tagEntities,
			summary:     "Create an entity",
			description: "Creates an entity of a declared type at version 1 and returns {id, entity}.",
			body:        b.schema(schemaCreateEntity), status: created, okDesc: "The entity was created.", data: b.schema(schemaEntityCreated),
			errs: []int{bad, conflict, unproc}, idempotent: true},
		{method: http.MethodGet, path: "/v1/entities", id: "listEntities", tag: tagEntities,
			summary:     "List entities of a type",
			description: "Lists the tenant's entities of one type in id order, a page at a time, optionally filtered on indexed fields.",
			params:      []*openapi3.ParameterRef{entityTypeQuery("Type of the entities to list."), b.paramRef(paramLimit), b.paramRef(paramCursor), {Value: filters}},
			status:      ok, okDesc: "A page of entities.", data: b.schema(schemaEntityPage), errs: []int{bad}},
		{method: http.MethodGet, path: "/v1/entities/{id}", id: "getEntity", tag: tagEntities,
			summary:     "Get an entity",
			description: "Returns an entity. entity_type is required (400 entity_type required); an entity of another type answers 404.",
			params:      []*openapi3.ParameterRef{idParam("entity"), entityTypeQuery("The entity's type.")},
			status:      ok, okDesc: "The entity.", data: b.schema(schemaEntity), errs: []int{bad, notFound}},
		{method: http.MethodPatch, path: "/v1/entities/{id}", id: "updateEntity", tag: tagEntities,
			summary:     "Update an entity's fields",
			description: "Applies a JSON merge patch to the entity's fields when the entity is still at the given version, and adds one to the version.",
			params: []*openapi3.ParameterRef{idParam("entity"), {Value: openapi3.NewQueryParameter("entity_type").
				WithDescription("When sent (and not in the body), the entity must be of this type.").WithSchema(typeSchema(""))}},
			body: b.schema(schemaUpdateEntity), status: ok, okDesc: "The updated entity.", data: b.schema(schemaEntity),
			errs: []int{bad, notFound, conflict}},
		{method: http.MethodGet, path: "/v1/entities/{id}/facts", id: "listEntityFacts", tag: tagEntities,
			summary:     "List an entity's facts",
			description: "Lists the facts of an entity's ledger in seq order, a page at a time.",
			params:      []*openapi3.ParameterRef{idParam("entity"), b.paramRef(paramLimit), b.paramRef(paramCursor)},
			status:      ok, okDesc: "A page of facts.", data: b.schema(schemaFactPage), errs: []int{bad, notFound}},
		{method: http.MethodPost, path: "/v1/facts", id: "appendFact", tag: tagFacts,
			summary:     "Append a fact",
			description: "Appends a fact to an entity's ledger. The entity's version grows by one.",
			body:        b.schema(schemaAppendFact), status: created, okDesc: "The appended fact.", data: b.schema(schemaFact),
			errs: []int{bad, notFound, conflict, unproc}, idempotent: true},
		{method: http.MethodGet, path: "/v1/facts", id: "listFacts", tag: tagFacts,
			summary: "List the tenant's facts",
			description: "Lists the tenant's facts in commit (global position) order, a page at a time, entity-less ones such as webhook.triggered and webhook.sent included. " +
				"Every filter given must match; an unknown query parameter is a validation-failed (unknown_field). The cursor is stable: facts appended later come after it.",
			params: []*openapi3.ParameterRef{
				{Value: openapi3.NewQueryParameter("type").WithDescription("Only facts of this type.").WithSchema(openapi3.NewStringSchema())},
				{Value: openapi3.NewQueryParameter("subtype").WithDescription("Only facts of this subtype; needs type.").WithSchema(openapi3.NewStringSchema())},
				{Value: openapi3.NewQueryParameter("source_id").WithDescription("Only facts with this source_id (the webhook.sent facts of a delivery name its webhook.triggered fact).").WithSchema(openapi3.NewStringSchema())},
				{Value: openapi3.NewQueryParameter("entity_id").WithDescription("Only facts of this entity.").WithSchema(openapi3.NewStringSchema())},
				{Value: openapi3.NewQueryParameter("from").WithDescription("Only facts with timestamp at or after this time: milliseconds since the epoch or RFC 3339.").WithSchema(openapi3.NewStringSchema())},
				{Value: openapi3.NewQueryParameter("to").WithDescription("Only facts with timestamp at or before this time: milliseconds since the epoch or RFC 3339.").WithSchema(openapi3.NewStringSchema())},
				b.paramRef(paramLimit), b.paramRef(paramCursor),
			},
			status: ok, okDesc: "A page of facts.", data: b.schema(schemaFactPage), errs: []int{bad}},
		{method: http.MethodGet, path: "/v1/facts/{id}", id: "getFact", tag: tagFacts,
			summary: "Get a fact", params: []*openapi3.ParameterRef{idParam("fact")},
			status: ok, okDesc: "The fact.", data: b.schema(schemaFact), errs: []int{notFound}},
		{method: http.MethodPost, path: "/v1/configs", id: "createConfig", tag: tagConfigs,
			summary: "Create a config",
			body:    b.schema(schemaCreateConfig), status: created, okDesc: "The config at version 1.", data: b.schema(schemaConfig),
			errs: []int{bad, conflict, unproc}, idempotent: true},
		{method: http.MethodGet, path: "/v1/configs", id: "listConfigs", tag: tagConfigs,
			summary:     "List configs",
			description: "Lists the current versions of the tenant's configs, a page at a time.",
			params: []*openapi3.ParameterRef{
				{Value: openapi3.NewQueryParameter("type").WithDescription("Only configs of this type.").WithSchema(openapi3.NewStringSchema())},
				{Value: openapi3.NewQueryParameter("status").WithDescription("Only configs with this status.").WithSchema(enum("", "active", "archived").Value)},
				b.paramRef(paramLimit), b.paramRef(paramCursor),
			},
			status: ok, okDesc: "A page of configs.", data: b.schema(schemaConfigPage), errs: []int{bad}},
		{method: http.MethodGet, path: "/v1/configs/{id}", id: "getConfig", tag: tagConfigs,
			summary: "Get a config's current version", params: []*openapi3.ParameterRef{idParam("config")},
			status: ok, okDesc: "The current version.", data: b.schema(schemaConfig), errs: []int{notFound}},
		{method: http.MethodPut, path: "/v1/configs/{id}", id: "updateConfig", tag: tagConfigs,
			summary:     "Write a config's next version",
			description: "Writes version n+1 with the given settings; version n gets superseded_at. An archived config takes no new version (409).",
			params:      []*openapi3.ParameterRef{idParam("config")},
			body:        b.schema(schemaUpdateConfig), status: ok, okDesc: "The new version.", data: b.schema(schemaConfig),
			errs: []int{bad, notFound, conflict}},
		{method: http.MethodDelete, path: "/v1/configs/{id}", id: "archiveConfig", tag: tagConfigs,
			summary:     "Archive a config",
			description: "Soft-deletes the config: its current version becomes archived; every version stays readable.",
			params:      []*openapi3.ParameterRef{idParam("config")},
			status:      ok, okDesc: "The archived config.", data: b.schema(schemaConfig), errs: []int{notFound}},
		{method: http.MethodGet, path: "/v1/configs/{id}/versions", id: "listConfigVersions", tag: tagConfigs,
			summary: "List a config's versions", params: []*openapi3.ParameterRef{idParam("config")},
			status: ok, okDesc: "Every version, oldest first.", data: b.schema(schemaConfigVersions), errs: []int{notFound}},
		{method: http.MethodGet, path: "/v1/configs/{id}/versions/{version}", id: "getConfigVersion", tag: tagConfigs,
			summary: "Get one version of a config",
			params: []*openapi3.ParameterRef{idParam("config"), {Value: openapi3.NewPathParameter("version").
				WithDescription("Version number, from 1.").WithSchema(openapi3.NewIntegerSchema().WithMin(1))}},
			status: ok, okDesc: "The version.", data: b.schema(schemaConfig), errs: []int{bad, notFound}},
		{method: http.MethodGet, path: "/v1/projections", id: "listProjections", tag: tagProjections,
			summary:     "List the tenant's projections",
			description: "Each projection config that runs, its current version, the version queries read and whether it has caught up with the fact stream (false while it backfills).",
			status:      ok, okDesc: "The projections.", data: b.schema(schemaProjectionList)},
		{method: http.MethodPost, path: "/v1/projections/{id}/query", id: "queryProjection", tag: tagProjections,
			summary:     "Query a projection",
			description: "The results of a projection, as the query action of a manifest route answers them. The path names the projection config by id or name.",
			params:      []*openapi3.ParameterRef{idParam("projection config (or its name)")},
			body:        b.schema(schemaProjectionQuery), status: ok, okDesc: "The projection's results.", data: b.schema(schemaQueryResult),
			errs: []int{bad, notFound, http.StatusServiceUnavailable}},
		{method: http.MethodGet, path: "/v1/admin/keys", id: "listApiKeys", tag: tagAdmin,
			summary: "List the tenant's API keys", admin: true,
			status: ok, okDesc: "The keys, without their secrets.", data: b.schema(schemaAPIKeyList)},
		{method: http.MethodPost, path: "/v1/admin/keys", id: "createApiKey", tag: tagAdmin,
			summary: "Issue an API key", admin: true,
			description: "Issues a key for the caller's tenant. The response holds the key once; only its hash is stored.",
			body:        b.schema(schemaCreateAPIKey), status: created, okDesc: "The new key.", data: b.schema(schemaAPIKeyCreated),
			errs: []int{bad}},
		{method: http.MethodDelete, path: "/v1/admin/keys/{id}", id: "revokeApiKey", tag: tagAdmin,
			summary: "Revoke an API key", admin: true,
			description: "Revokes a key of the caller's tenant; it stops working at once in this process and within seconds in others.",
			params:      []*openapi3.ParameterRef{idParam("API key")},
			status:      ok, okDesc: "The revoked key.", data: b.schema(schemaAPIKey), errs: []int{notFound}},
		{method: http.MethodGet, path: "/v1/admin/stream", id: "getStreamStatus", tag: tagAdmin,
			summary: "Fact stream status", admin: true,
			description: "The global fact stream's head and each durable consumer's position and lag.",
			status:      ok, okDesc: "The stream's status.", data: b.schema(schemaStreamStatus)},
		{method: http.MethodGet, path: "/v1/admin/domain", id: "listDomainManifests", tag: tagAdmin,
			summary: "List the stored domain manifests", admin: true,
			description: "Domain manifests installed through the admin API, which every process layers over its own (the built-in one, then --domain files, then these by name).",
			status:      ok, okDesc: "The manifests and the served entity types.", data: b.schema(schemaDomainManifests)},
		{method: http.MethodPut, path: "/v1/admin/domain/{name}", id: "putDomainManifest", tag: tagAdmin,
			summary: "Install or replace a domain manifest", admin: true, manifestBody: true,
			description: "Adds entity types, or fact types to existing ones, for every tenant. The model it gives is checked against the served one and the stored data (fields with data, required fields, slots, fact types in use, ledger names); with problems it is refused whole (422, each problem in errors as domain/<name>:line:col) and the current model keeps serving. Otherwise this process serves it at once and the others within seconds. Needs an admin key of the operator tenant.",
			params:      []*openapi3.ParameterRef{nameParam("domain manifest")},
			status:      created, okDesc: "Installed (200 when it replaced one of that name).", data: b.schema(schemaDomainManifest),
			errs: []int{bad, http.StatusUnprocessableEntity}},
		{method: http.MethodDelete, path: "/v1/admin/domain/{name}", id: "deleteDomainManifest", tag: tagAdmin,
			summary: "Remove a domain manifest", admin: true,
			description: "Removes a stored domain manifest; refused (422) when an entity type only it declares has stored entities. Needs an admin key of the operator tenant.",
			params:      []*openapi3.ParameterRef{nameParam("domain manifest")},
			status:      ok, okDesc: "The removed manifest.", data: b.schema(schemaDomainManifest),
			errs: []int{bad, notFound, http.StatusUnprocessableEntity}},
		{method: http.MethodGet, path: "/health", id: "getHealth", tag: tagHealth,
			summary:     "Health",
			description: "Checks the store and the other dependencies. 200 while the critical checks pass (degraded when only a non-critical one fails), a 503 problem otherwise.",
			public:      true, status: ok, okDesc: "The server is healthy.", data: b.schema(schemaHealth),
			errs: []int{http.StatusServiceUnavailable}},
	}
	for _, p := range ops {
		b.platformOperation(p)
	}
}

func (b *builder) platformOperation(p platformOp) {
	op := &openapi3.Operation{
		OperationID: b.operationID(p.id),
		Tags:        []string{p.tag},
		Summary:     p.summary,
		Description: p.description,
		Parameters:  p.params,
		Security:    security(p.public),
	}
	errs := append([]int{http.StatusInternalServerError}, p.errs...)
	if !p.public {
		errs = append(errs, http.StatusUnauthorized)
	}
	if p.admin {
		errs = append(errs, http.StatusForbidden)
		op.Description = strings.TrimSpace(op.Description + " Needs an admin key.")
	}
	if p.manifestBody {
		yamlSchema := str("The domain manifest as YAML (a JSON document is YAML too).")
		op.RequestBody = &openapi3.RequestBodyRef{Value: &openapi3.RequestBody{
			Description: "A domain manifest (see factline check).",
			Required:    true,
			Content: openapi3.Content{
				"application/yaml": &openapi3.MediaType{Schema: yamlSchema},
				"application/json": &openapi3.MediaType{Schema: freeObject("The domain manifest as JSON.")},
			},
		}}
		errs = append(errs, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
	}
	if p.body != nil {
		op.RequestBody = jsonBody("", p.body)
		errs = append(errs, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType)
	}
	var headers openapi3.Headers
	if p.idempotent {
		op.Parameters = append(op.Parameters, b.paramRef(paramIdempotencyKey))
		headers = openapi3.Headers{headerReplayed: b.headerRef(headerReplayed)}
	}
	op.Responses = b.opResponses(p.status, p.okDesc, b.envelope(p.data), headers, dedupe(errs))
	b.addOperation(p.path, p.method, op)
}

// indexedFieldsText lists each entity type's indexed fields.
func (b *builder) indexedFieldsText() string {
	var sb strings.Builder
	for _, name := range b.domain.EntityTypeNames() {
		var fs []string
		for _, f := range b.domain.Entities[name].Fields {
			if f.Storage != "" {
				fs = append(fs, f.Name)
			}
		}
		if len(fs) > 0 {
			fmt.Fprintf(&sb, " %s: %s.", name, strings.Join(fs, ", "))
		}
	}
	if sb.Len() == 0 {
		return ""
	}
	return " Indexed fields by type:" + sb.String()
}
