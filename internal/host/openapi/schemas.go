package openapi

import (
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/factline/factline/internal/host/manifest"
	"github.com/factline/factline/internal/host/platform"
	"github.com/factline/factline/internal/host/problem"
)

// Names of the fixed component schemas.
const (
	schemaProblem         = "Problem"
	schemaFieldError      = "FieldError"
	schemaMeta            = "Meta"
	schemaEntity          = "Entity"
	schemaEntityPage      = "EntityPage"
	schemaEntityCreated   = "EntityCreated"
	schemaFact            = "Fact"
	schemaFactPage        = "FactPage"
	schemaConfig          = "Config"
	schemaConfigPage      = "ConfigPage"
	schemaConfigVersions  = "ConfigVersions"
	schemaAPIKey          = "ApiKey"
	schemaAPIKeyList      = "ApiKeyList"
	schemaAPIKeyCreated   = "ApiKeyCreated"
	schemaStreamStatus    = "StreamStatus"
	schemaDomainManifest  = "DomainManifestInfo"
	schemaDomainManifests = "DomainManifestList"
	schemaHealth          = "Health"
	schemaEmitResult      = "EmitResult"
	schemaQueryRequest    = "QueryRequest"
	schemaQueryResult     = "QueryResult"
	schemaProjectionQuery = "ProjectionQueryRequest"
	schemaProjectionList  = "ProjectionList"
	schemaSystemStatus    = "SystemStatus"
	schemaCreateEntity    = "CreateEntityRequest"
	schemaUpdateEntity    = "UpdateEntityRequest"
	schemaAppendFact      = "AppendFactRequest"
	schemaCreateConfig    = "CreateConfigRequest"
	schemaUpdateConfig    = "UpdateConfigRequest"
	schemaCreateAPIKey    = "CreateApiKeyRequest"
	securitySchemeName    = "ApiKeyAuth"
	headerRetryAfter      = "Retry-After"
	headerRateLimit       = "RateLimit-Limit"
	headerRateRemaining   = "RateLimit-Remaining"
	headerRateReset       = "RateLimit-Reset"
	headerReplayed        = "Idempotent-Replayed"
	paramCursor           = "Cursor"
	paramLimit            = "Limit"
	paramIdempotencyKey   = "IdempotencyKey"
	paramCacheControl     = "CacheControl"
	exampleRequestID      = "req_01HZX3KQ7M9V2B8N4C6D5E0F1G"
	entityFieldsSuffix    = ".Fields"
	entityObjectSuffix    = ".Entity"
)

// prop is one named property of an object schema.
type prop struct {
	name   string
	schema *openapi3.SchemaRef
}

func inline(s *openapi3.Schema) *openapi3.SchemaRef { return &openapi3.SchemaRef{Value: s} }

func typed(t, desc string) *openapi3.Schema {
	return &openapi3.Schema{Type: &openapi3.Types{t}, Description: desc}
}

func str(desc string) *openapi3.SchemaRef { return inline(typed(openapi3.TypeString, desc)) }

func boolean(desc string) *openapi3.SchemaRef { return inline(typed(openapi3.TypeBoolean, desc)) }

func number(desc string) *openapi3.SchemaRef { return inline(typed(openapi3.TypeNumber, desc)) }

// integer is a 64-bit integer: versions, sequence numbers, positions and
// millisecond timestamps all exceed 32 bits or may one day.
func integer(desc string) *openapi3.SchemaRef {
	s := typed(openapi3.TypeInteger, desc)
	s.Format = "int64"
	return inline(s)
}

func millis(desc string) *openapi3.SchemaRef {
	return integer(desc + " (milliseconds since the epoch, UTC)")
}

func enum(desc string, values ...string) *openapi3.SchemaRef {
	s := typed(openapi3.TypeString, desc)
	for _, v := range values {
		s.Enum = append(s.Enum, v)
	}
	return inline(s)
}

func nullable(r *openapi3.SchemaRef) *openapi3.SchemaRef {
	r.Value.Nullable = true
	return r
}

// freeObject is an object with any members.
func freeObject(desc string) *openapi3.SchemaRef {
	s := typed(openapi3.TypeObject, desc)
	s.AdditionalProperties = openapi3.AdditionalProperties{Has: ptr(true)}
	return inline(s)
}

func arrayOf(desc string, items *openapi3.SchemaRef) *openapi3.SchemaRef {
	s := typed(openapi3.TypeArray, desc)
	s.Items = items
	return inline(s)
}

// object builds an object schema. required lists the required properties;
// closed refuses members not listed (the handler answers unknown_field).
func object(desc string, required []string, closed bool, props ...prop) *openapi3.Schema {
	s := typed(openapi3.TypeObject, desc)
	s.Properties = openapi3.Schemas{}
	for _, p := range props {
		s.Properties[p.name] = p.schema
	}
	if len(required) > 0 {
		s.Required = required
	}
	if closed {
		s.AdditionalProperties = openapi3.AdditionalProperties{Has: ptr(false)}
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// schema returns a reference to a component schema, carrying its value so
// the document is complete without a loader.
func (b *builder) schema(name string) *openapi3.SchemaRef {
	c := b.doc.Components.Schemas[name]
	if c == nil {
		panic(fmt.Sprintf("openapi: schema %s used before it is defined", name))
	}
	return &openapi3.SchemaRef{Ref: "#/components/schemas/" + name, Value: c.Value}
}

func (b *builder) define(name string, s *openapi3.Schema) {
	b.doc.Components.Schemas[name] = inline(s)
}

// envelope wraps an action's output in the success envelope.
func (b *builder) envelope(data *openapi3.SchemaRef) *openapi3.Schema {
	return object("Success envelope.", []string{"data", "meta"}, false,
		prop{"data", data},
		prop{"meta", b.schema(schemaMeta)},
	)
}

// fixedSchemas defines the schemas that do not depend on the manifests.
func (b *builder) fixedSchemas() {
	b.define(schemaFieldError, object("One field-level validation error.", []string{"field", "code", "message"}, false,
		prop{"field", str("The offending field, dotted for nested members (data.status).")},
		prop{"code", str(fmt.Sprintf("What is wrong: %s, %s, %s, %s, %s or %s; a ledger refusal carries the ledger's own code.",
			problem.CodeRequired, problem.CodeType, problem.CodeEnum, problem.CodeUnknownField, problem.CodeFormat, problem.CodeRange))},
		prop{"message", str("Human explanation.")},
	))
	typ := str(fmt.Sprintf("URI of the problem type: %s/errors/<slug>; a human page explains each slug.", b.docsURL))
	typ.Value.Format = "uri"
	status := typed(openapi3.TypeInteger, "HTTP status of the response.")
	status.Min, status.Max = ptr(400.0), ptr(599.0)
	b.define(schemaProblem, object("RFC 7807 problem details: the body of every error response (Content-Type application/problem+json).",
		[]string{"type", "title", "status", "detail", "instance"}, false,
		prop{"type", typ},
		prop{"title", str("Short summary of the problem type.")},
		prop{"status", inline(status)},
		prop{"detail", str("Explanation of this occurrence.")},
		prop{"instance", str("/errors/<request_id>: identifies this occurrence.")},
		prop{"errors", arrayOf("Field-level validation errors (validation-failed).", b.schema(schemaFieldError))},
		prop{"trace_id", str("The request id, also in the X-Request-Id response header; quote it when reporting a problem.")},
	))
	b.define(schemaMeta, object("Envelope metadata.", []string{"request_id", "timestamp"}, false,
		prop{"request_id", str("Unique per request, echoed in the X-Request-Id header.")},
		prop{"timestamp", millis("When the response was generated")},
	))
	b.define(schemaEntity, b.entityObject("An entity of any type.", freeObject("The entity's fields, as the domain manifest declares them for its type.")))
	b.define(schemaEntityCreated, object("A created entity.", []string{"id", "entity"}, false,
		prop{"id", str("The entity's id.")},
		prop{"entity", b.schema(schemaEntity)},
	))
	b.define(schemaEntityPage, page("A page of entities in id order.", b.schema(schemaEntity)))
	b.define(schemaFact, object("An immutable record of something that happened to an entity.",
		[]string{"id", "type", "tenant_id", "timestamp", "data", "created_at"}, false,
		prop{"id", str("Fact id (fct_<ulid>).")},
		prop{"type", str("Fact type, one the entity's type declares.")},
		prop{"subtype", str("Optional refinement of the type.")},
		prop{"tenant_id", str("Owning tenant.")},
		prop{"entity_id", str("The entity whose ledger holds the fact.")},
		prop{"entity_type", str("Type of that entity.")},
		prop{"seq", integer("Gap-free position in the entity's ledger, from 1.")},
		prop{"position", integer("Gap-free position in the global fact stream.")},
		prop{"source_id", str("Caller-supplied id of the fact's origin.")},
		prop{"trace_id", str("Request id that appended the fact.")},
		prop{"timestamp", millis("When it happened")},
		prop{"data", freeObject("The fact's payload.")},
		prop{"created_at", millis("When it was recorded")},
		prop{"config_id", str("A webhook audit fact's config (also in its data).")},
		prop{"config_version", integer("A webhook audit fact's config version (also in its data).")},
		prop{"campaign_id", str("A webhook audit fact's campaign, when the triggering fact had one (also in its data).")},
	))
	b.define(schemaFactPage, page("A page of an entity's facts in seq order.", b.schema(schemaFact)))
	b.define(schemaConfig, object("One immutable version of a config.",
		[]string{"id", "tenant_id", "version", "type", "scope_type", "settings", "status", "superseded_at", "effective_at", "created_at"}, false,
		prop{"id", str("Config id (cfg_<ulid> unless chosen at creation).")},
		prop{"tenant_id", str("Owning tenant.")},
		prop{"version", integer("Version number, from 1; every update writes the next.")},
		prop{"type", str("Config type; never changes.")},
		prop{"name", str("Optional display name.")},
		prop{"scope_type", str("What the config applies to (global, tenant, account, ...).")},
		prop{"scope_id", str("Id of the scoped object, when the scope has one.")},
		prop{"settings", freeObject("The settings of this version.")},
		prop{"status", enum("active, or archived once deleted.", "active", "archived")},
		prop{"superseded_at", nullable(millis("When the next version replaced this one; null for the current version"))},
		prop{"effective_at", millis("When this version takes effect")},
		prop{"created_at", millis("When this version was written")},
		prop{"category", enum("A webhook config's category, as the webhook document gives it.", "logic")},
		prop{"scope", str("A webhook config's scope_type, under the webhook document's name.")},
		prop{"applies_to", str("A webhook config's scope_id, under the webhook document's name.")},
	))
	b.define(schemaConfigPage, page("A page of configs (current versions).", b.schema(schemaConfig)))
	b.define(schemaConfigVersions, object("Every version of a config, oldest first.", []string{"items"}, false,
		prop{"items", arrayOf("The versions.", b.schema(schemaConfig))},
	))
	b.define(schemaAPIKey, object("An API key record; never the key itself.", []string{"id", "tenant_id", "mode", "prefix", "created_at", "revoked_at"}, false,
		prop{"id", str("Key id.")},
		prop{"tenant_id", str("Tenant the key acts for.")},
		prop{"mode", enum("What the key may do.", "live", "test", "admin")},
		prop{"name", str("Optional label.")},
		prop{"prefix", str("The key's visible prefix, to recognise it.")},
		prop{"created_at", millis("When the key was issued")},
		prop{"revoked_at", nullable(millis("When the key was revoked; null while it is valid"))},
	))
	b.define(schemaAPIKeyList, object("The tenant's API keys.", []string{"items"}, false,
		prop{"items", arrayOf("The keys.", b.schema(schemaAPIKey))},
	))
	b.define(schemaAPIKeyCreated, object("A new API key. The key is shown here once and never again; only its hash is stored.", []string{"key", "api_key"}, false,
		prop{"key", str("The secret key, for the X-API-Key header.")},
		prop{"api_key", b.schema(schemaAPIKey)},
	))
	consumer := object("One durable stream consumer.", []string{"name", "metric_label", "position", "lag", "declared"}, false,
		prop{"name", str("Consumer name.")},
		prop{"metric_label", str("The consumer label of its series on /metrics: the name, or for a projection (whose name holds a tenant and a config id) \"projection:\" and a digest of it.")},
		prop{"position", integer("Last global position the consumer has processed.")},
		prop{"lag", integer("Facts appended after that position.")},
		prop{"declared", boolean("False for a subscription the domain model no longer declares: its checkpoint is kept, so declaring it again goes on from there, but nothing reads for it and its lag only grows.")},
	)
	b.define(schemaStreamStatus, object("The fact stream's head and each consumer's checkpoint.", []string{"head", "consumers"}, false,
		prop{"head", integer("Global position of the newest fact.")},
		prop{"consumers", arrayOf("The consumers.", inline(consumer))},
	))
	b.define(schemaDomainManifest, object("A domain manifest installed through the admin API.", []string{"name", "sha256", "updated_at", "file"}, false,
		prop{"name", str("Its name, from the path.")},
		prop{"sha256", str("SHA-256 of the manifest as uploaded, hex.")},
		prop{"updated_at", millis("When it was installed or last replaced")},
		prop{"file", str("How problems name it: domain/<name>.")},
	))
	b.define(schemaDomainManifests, object("The stored domain manifests and the entity types of the model served.", []string{"items", "entity_types"}, false,
		prop{"items", arrayOf("The stored manifests, by name.", b.schema(schemaDomainManifest))},
		prop{"entity_types", arrayOf("Entity types of the served model, sorted.", str("An entity type."))},
	))
	check := object("One health check.", []string{"status", "latency_ms"}, false,
		prop{"status", enum("Outcome of the check.", "ok", "failing")},
		prop{"detail", str("What was checked, or why it fails.")},
		prop{"latency_ms", number("How long the check took.")},
	)
	checks := typed(openapi3.TypeObject, "Each check by name (store, cache, ...).")
	checks.AdditionalProperties = openapi3.AdditionalProperties{Schema: inline(check)}
	b.define(schemaHealth, object("Health of the server and its dependencies.", []string{"status", "version", "uptime_seconds", "checks"}, false,
		prop{"status", enum("ok, or degraded when only a non-critical check fails.", "ok", "degraded")},
		prop{"version", str("Server version.")},
		prop{"uptime_seconds", integer("Seconds since the server started.")},
		prop{"checks", inline(checks)},
	))
	b.define(schemaEmitResult, object("The appended fact.", []string{"factId", "seq", "timestamp"}, false,
		prop{"factId", str("Id of the new fact (fct_<ulid>).")},
		prop{"seq", integer("Its position in the entity's ledger.")},
		prop{"timestamp", millis("When it happened")},
	))
	b.define(schemaQueryRequest, object("A projection query.", []string{"projection"}, true,
		prop{"projection", str("The projection config's id or name.")},
		prop{"filters", freeObject("from and to (inclusive bucket starts: ms epoch, RFC 3339 or a bucket key such as 2024-01-15T10:30), aggregate (boolean), mode (materialized, compute or verify), groups (groupBy field to value; a groupBy field may also be a filter of its own).")},
	))
	b.define(schemaQueryResult, object("A projection's results.", []string{"results", "count"}, false,
		prop{"results", arrayOf("The result rows in bucket order: the result keys (count, <field>_sum ...) plus key (the bucket key; \"aggregated\" for an aggregated query), bucket and window (with a timeWindow) and group (with groupBy).", inline(&openapi3.Schema{Type: &openapi3.Types{openapi3.TypeObject}}))},
		prop{"count", integer("Number of results.")},
		prop{"_meta", freeObject("config_id and config_version of the version that answered, mode, ready (false while the projection backfills); in verify mode also consistent and drift; estimated lists the count_distinct keys whose values come from rollup buckets' HyperLogLog sketches.")},
	))
	b.define(schemaProjectionQuery, object("A projection query on the platform endpoint.", nil, true,
		prop{"filters", freeObject("As in QueryRequest.")},
	))
	projectionStatus := object("One running projection.", []string{"config_id", "config_version", "ready", "position", "serving_version"}, false,
		prop{"config_id", str("The projection config's id.")},
		prop{"name", str("The config's name.")},
		prop{"config_version", integer("The config's current version.")},
		prop{"ready", boolean("False while the current version backfills.")},
		prop{"position", integer("Global position of the last fact the current version processed.")},
		prop{"serving_version", integer("The version queries read: an older one while the current one backfills.")},
	)
	b.define(schemaProjectionList, object("The tenant's projections.", []string{"items"}, false,
		prop{"items", arrayOf("By config id.", inline(projectionStatus))},
	))
	b.define(schemaSystemStatus, object("The gateway's own status.", []string{"name", "version", "status"}, false,
		prop{"name", str("Name of the gateway manifest served.")},
		prop{"version", str("Server version.")},
		prop{"status", str("ok while the gateway serves requests.")},
	))
}

// entityObject is the Entity object with the given data schema.
func (b *builder) entityObject(desc string, data *openapi3.SchemaRef) *openapi3.Schema {
	return object(desc, []string{"id", "type", "tenant_id", "version", "data", "metadata", "created_at", "updated_at"}, false,
		prop{"id", str("Entity id (ent_<ulid> unless chosen at creation).")},
		prop{"type", str("Entity type.")},
		prop{"tenant_id", str("Owning tenant.")},
		prop{"version", integer("Starts at 1 and grows by one with every appended fact and update; send it back for optimistic concurrency.")},
		prop{"data", data},
		prop{"metadata", freeObject("Free-form metadata.")},
		prop{"created_at", millis("When the entity was created")},
		prop{"updated_at", millis("When it last changed")},
	)
}

// page is the listing shape {items, cursor?, hasMore}.
func page(desc string, item *openapi3.SchemaRef) *openapi3.Schema {
	return object(desc, []string{"items", "hasMore"}, false,
		prop{"items", arrayOf("This page's items.", item)},
		prop{"cursor", str("Pass as cursor to get the next page; absent on the last page.")},
		prop{"hasMore", boolean("Whether another page follows.")},
	)
}

// entityTypeSchemas defines <type>.Fields and <type>.Entity for every
// entity type of the merged domain.
func (b *builder) entityTypeSchemas() {
	for _, name := range b.domain.EntityTypeNames() {
		t := b.domain.Entities[name]
		b.define(name+entityFieldsSuffix, fieldsSchema(t))
		desc := "An entity of type " + name + "."
		if t.Description != "" {
			desc = "An entity of type " + name + ": " + t.Description
		}
		b.define(name+entityObjectSuffix, b.entityObject(desc, b.schema(name+entityFieldsSuffix)))
	}
}

// fieldsSchema is the data of an entity type: its declared fields with
// their types and enums, the required ones listed. Undeclared members are
// allowed: the platform stores them without validating or indexing them.
func fieldsSchema(t *manifest.EntityType) *openapi3.Schema {
	s := typed(openapi3.TypeObject, "Fields of "+article(t.Name)+". Fields the manifest does not declare are stored as sent but neither validated nor indexed.")
	s.Properties = openapi3.Schemas{}
	s.AdditionalProperties = openapi3.AdditionalProperties{Has: ptr(true)}
	for _, f := range t.Fields {
		s.Properties[f.Name] = inline(fieldSchema(f))
		if f.Required {
			s.Required = append(s.Required, f.Name)
		}
	}
	return s
}

// fieldSchema is one declared field.
func fieldSchema(f manifest.Field) *openapi3.Schema {
	desc := ""
	if f.Storage != "" {
		desc = "Indexed: lists filter on it."
	}
	s := typed(f.Type, desc)
	switch f.Type {
	case manifest.TypeInteger:
		s.Format = "int64"
	case manifest.TypeString:
		for _, v := range f.Enum {
			s.Enum = append(s.Enum, v)
		}
	}
	return s
}

// Page sizes, shared with the platform.
var (
	defaultPageSize = platform.DefaultPageSize
	maxPageSize     = platform.MaxPageSize
)
