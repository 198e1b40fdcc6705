package openapi

import (
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Tags of the platform endpoints. Entity type names are lowercase, so
// these never coincide with a route's tag.
const (
	TagEntities    = "Entities"
	TagFacts       = "Facts"
	TagConfigs     = "Configs"
	TagAdmin       = "Admin"
	TagProjections = "Projections"
	TagWebhooks    = "Webhooks"
	TagPlugins     = "Plugins"
	TagHealth      = "Health"
	TagReference   = "Reference"
)

// platformTags are the platform's tags, new for every document.
func platformTags() []*openapi3.Tag {
	return []*openapi3.Tag{
		{Name: TagEntities, Description: "Platform API: entities of every type the domain manifest declares."},
		{Name: TagFacts, Description: "Platform API: facts, the immutable records appended to entity ledgers."},
		{Name: TagConfigs, Description: "Platform API: versioned configs; every update writes a new immutable version."},
		{Name: TagProjections, Description: "Platform API: projections (configs of type projection) and their results."},
		{Name: TagAdmin, Description: "Platform API: API keys and the fact stream. Admin keys only."},
		{Name: TagWebhooks, Description: "Platform API: webhook deliveries, dead letters, pausing and signing secrets."},
		{Name: TagPlugins, Description: "Platform API: WebAssembly plugins and the ledgers they serve. Admin keys only."},
		{Name: TagHealth, Description: "Server health."},
		{Name: TagReference, Description: "This API's description, its reference page and the pages of its problem types."},
	}
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

// platformSchemas defines the request schemas of the platform API, which
// depend on the domain's entity types.
func (b *builder) platformSchemas() {
	typeSchema := b.typeSchema
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
			{"scope", str("Another name of scope_type, as the webhook document names a webhook config's scope (campaign, account or asset).")},
			{"applies_to", str("Another name of scope_id, as the webhook document names what a webhook config applies to.")},
			{"category", enum("A webhook config's category; only logic.", "logic")},
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
