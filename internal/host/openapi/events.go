package openapi

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/factline/factline/internal/host/manifest"
)

// factDataSuffix names the component schema of a fact type's data:
// <entity type>.<fact type>.Data. Fact types are named within their
// entity type (an asset's outcome is not a contact's), so both are in it.
const factDataSuffix = ".Data"

// extEventCatalog is the document extension listing every entity type and
// its fact types, with a link to the data schema of those that have one.
// The /docs page renders it as the event catalog.
const extEventCatalog = "x-event-catalog"

// EventCatalog is the value of the x-event-catalog extension.
type EventCatalog struct {
	EntityTypes []CatalogEntityType `json:"entityTypes"`
}

// CatalogEntityType is one entity type of the catalog.
type CatalogEntityType struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Facts       []CatalogFactType `json:"facts"`
}

// CatalogFactType is one fact type; Schema is the $ref of its data schema,
// empty when its data is any object.
type CatalogFactType struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Schema      string `json:"schema,omitempty"`
}

// factTypeSchemas defines <type>.<fact>.Data for every fact type with a
// schema and records the event catalog on the document.
func (b *builder) factTypeSchemas() {
	var cat EventCatalog
	for _, name := range b.domain.EntityTypeNames() {
		t := b.domain.Entities[name]
		ce := CatalogEntityType{Name: name, Description: t.Description, Facts: []CatalogFactType{}}
		for _, fact := range t.Facts {
			cf := CatalogFactType{Name: fact}
			if ft := t.FactType(fact); ft != nil {
				cf.Description = ft.Description
				if ft.Schema != nil {
					b.define(name+"."+fact+factDataSuffix, factDataSchema(name, ft))
					cf.Schema = "#/components/schemas/" + name + "." + fact + factDataSuffix
				}
			}
			ce.Facts = append(ce.Facts, cf)
		}
		cat.EntityTypes = append(cat.EntityTypes, ce)
	}
	if b.doc.Extensions == nil {
		b.doc.Extensions = map[string]any{}
	}
	b.doc.Extensions[extEventCatalog] = cat
}

// factData is the schema of the data of a fact type: its component when
// it has a schema, else any object.
func (b *builder) factData(entityType, factType string) *openapi3.SchemaRef {
	name := entityType + "." + factType + factDataSuffix
	if _, ok := b.doc.Components.Schemas[name]; ok {
		return b.schema(name)
	}
	return freeObject("The fact's payload.")
}

// factDataSchema is the data of one fact type. A member that is not
// required may be null (the platform treats null as absent).
func factDataSchema(entityType string, ft *manifest.FactType) *openapi3.Schema {
	desc := fmt.Sprintf("Data of %s fact of %s.", article(ft.Name), article(entityType))
	if ft.Description != "" {
		desc += " " + ft.Description
	}
	if ft.Schema.AdditionalFields {
		desc += " Members not listed are accepted as sent."
	}
	s := typed(openapi3.TypeObject, desc)
	s.Properties = openapi3.Schemas{}
	s.AdditionalProperties = openapi3.AdditionalProperties{Has: ptr(ft.Schema.AdditionalFields)}
	for _, f := range ft.Schema.Fields {
		fs := factFieldSchema(f)
		if f.Required {
			s.Required = append(s.Required, f.Name)
		} else {
			fs.Nullable = true
		}
		s.Properties[f.Name] = inline(fs)
	}
	return s
}

func factFieldSchema(f manifest.FactField) *openapi3.Schema {
	if f.Type == manifest.TypeDecimal {
		desc := strings.TrimSpace("An exact decimal, as a JSON string or number. " + f.Description)
		s := &openapi3.Schema{Description: desc, OneOf: openapi3.SchemaRefs{
			inline(&openapi3.Schema{Type: &openapi3.Types{openapi3.TypeString}, Format: "decimal", Pattern: `^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`}),
			inline(typed(openapi3.TypeNumber, "")),
		}}
		return s
	}
	s := typed(f.Type, f.Description)
	switch f.Type {
	case manifest.TypeInteger:
		s.Format = "int64"
	case manifest.TypeObject:
		s.AdditionalProperties = openapi3.AdditionalProperties{Has: ptr(true)}
	case manifest.TypeArray:
		s.Items = inline(&openapi3.Schema{})
	}
	for _, v := range f.Enum {
		if f.Type == manifest.TypeString {
			s.Enum = append(s.Enum, v)
		} else {
			s.Enum = append(s.Enum, json.Number(v))
		}
	}
	return s
}

// eventCatalog reads the x-event-catalog extension of a document, built
// here or read back from JSON.
func eventCatalog(doc *openapi3.T) *EventCatalog {
	v, ok := doc.Extensions[extEventCatalog]
	if !ok {
		return nil
	}
	if c, ok := v.(EventCatalog); ok {
		return &c
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var c EventCatalog
	if json.Unmarshal(raw, &c) != nil {
		return nil
	}
	return &c
}

// eventView is an entity type of the /docs page's event catalog.
type eventView struct {
	Name, Anchor, Description string
	Facts                     []eventFactView
}

type eventFactView struct {
	Name, Description string
	Schema            *schemaView // nil: any object
}

func eventViews(doc *openapi3.T) []eventView {
	cat := eventCatalog(doc)
	if cat == nil {
		return nil
	}
	var out []eventView
	for _, e := range cat.EntityTypes {
		ev := eventView{Name: e.Name, Anchor: "events-" + e.Name, Description: e.Description}
		for _, f := range e.Facts {
			fv := eventFactView{Name: f.Name, Description: f.Description}
			if name := refName(f.Schema); f.Schema != "" && doc.Components != nil && doc.Components.Schemas[name] != nil {
				fv.Schema = view(doc.Components.Schemas[name], 0, 1)
			}
			ev.Facts = append(ev.Facts, fv)
		}
		out = append(out, ev)
	}
	return out
}
