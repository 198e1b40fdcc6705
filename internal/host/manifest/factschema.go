package manifest

import (
	"context"
	"fmt"
	"math/big"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/factline/factline/internal/host/store"
)

// Fact field types beyond the entity field types. A decimal is an exact
// decimal (money) sent as a JSON string or number.
const (
	TypeObject  = "object"
	TypeArray   = "array"
	TypeDecimal = "decimal"
)

var factFieldTypes = []string{TypeString, TypeNumber, TypeInteger, TypeBoolean, TypeObject, TypeArray, TypeDecimal}

// FactType is one fact type of an entity type. Schema is nil when the
// manifest lists the type by name only: its data is any object.
type FactType struct {
	Name        string
	Description string
	Schema      *FactSchema

	pos Diagnostic
}

// FactSchema describes the data of a fact type.
type FactSchema struct {
	// Fields in declaration order.
	Fields []FactField
	// AdditionalFields allows members the schema does not declare; by
	// default they are refused.
	AdditionalFields bool
}

// FactField is one declared member of a fact's data.
type FactField struct {
	Name        string
	Type        string
	Required    bool
	Description string
	// Enum, when non-empty, lists the allowed values (string, number or
	// integer fields) as written in the manifest.
	Enum []string

	pos Diagnostic
}

// Field returns the named field declaration.
func (s *FactSchema) Field(name string) (FactField, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return FactField{}, false
}

// FactType returns the declaration of a fact type of t, or nil when t does
// not declare it.
func (t *EntityType) FactType(name string) *FactType {
	if ft, ok := t.FactTypes[name]; ok {
		return ft
	}
	return nil
}

// FactSchema returns the schema of a fact type of t, or nil when the type
// has none (or t does not declare it).
func (t *EntityType) FactSchema(name string) *FactSchema {
	if ft := t.FactType(name); ft != nil {
		return ft.Schema
	}
	return nil
}

// sameSchema reports whether two schemas declare the same fields, in any
// order, and the same policy for other members.
func sameSchema(a, b *FactSchema) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.AdditionalFields != b.AdditionalFields || len(a.Fields) != len(b.Fields) {
		return false
	}
	for _, fa := range a.Fields {
		fb, ok := b.Field(fa.Name)
		if !ok || fa.Type != fb.Type || fa.Required != fb.Required || fa.Description != fb.Description || !slices.Equal(fa.Enum, fb.Enum) {
			return false
		}
	}
	return true
}

// factTypes reads an entity type's facts: a list of names (no schemas) or
// a mapping of name to {description, fields, additionalFields}.
func (c *checker) factTypes(t *EntityType, n *yaml.Node, what string) {
	t.FactTypes = map[string]*FactType{}
	add := func(name string, key *yaml.Node) *FactType {
		if name == PlatformFactType {
			c.at(key, "%s.facts: fact type %q is the platform's own (the webhook deliveries' audit facts)", what, name)
		}
		switch {
		case !identRe.MatchString(name):
			c.at(key, "%s.facts: fact type %.80q must be lowercase letters, digits and underscores", what, name)
		case len(name) > MaxTypeName:
			c.at(key, "%s.facts: fact type %.80q is %d characters; at most %d", what, name, len(name), MaxTypeName)
		}
		if _, dup := t.FactTypes[name]; dup {
			c.at(key, "%s.facts: duplicate fact type %q", what, name)
			return nil
		}
		ft := &FactType{Name: name, pos: c.pos(key)}
		t.FactTypes[name] = ft
		t.Facts = append(t.Facts, name)
		t.factPos = append(t.factPos, ft.pos)
		return ft
	}
	if n.Kind != yaml.MappingNode {
		names, nodes := c.strList(n, what+".facts")
		for i, name := range names {
			add(name, nodes[i])
		}
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if ft := add(k.Value, k); ft != nil {
			c.factType(ft, what+".facts."+k.Value, v)
		}
	}
}

// factType reads one fact type's mapping; a mapping without fields
// declares no schema.
func (c *checker) factType(ft *FactType, what string, n *yaml.Node) {
	f := c.fields(n, what, "description", "fields", "additionalFields")
	var descNode *yaml.Node
	ft.Description, descNode = c.str(f, "description", what, false, n)
	c.text(descNode, what+".description", true)
	ff, ok := f["fields"]
	if !ok {
		if _, set := f["additionalFields"]; set {
			c.at(f["additionalFields"].key, "%s.additionalFields needs fields: a fact type without fields accepts any object", what)
		}
		return
	}
	s := &FactSchema{AdditionalFields: c.boolean(f, "additionalFields", what)}
	ft.Schema = s
	if ff.value.Kind != yaml.MappingNode {
		c.at(ff.value, "%s.fields must be a mapping, got %s", what, kindName(ff.value))
		return
	}
	for i := 0; i+1 < len(ff.value.Content); i += 2 {
		k, v := ff.value.Content[i], ff.value.Content[i+1]
		s.Fields = append(s.Fields, c.factField(what+".fields."+k.Value, k, v))
	}
}

func (c *checker) factField(what string, key, n *yaml.Node) FactField {
	fl := FactField{Name: key.Value, pos: c.pos(key)}
	if !identRe.MatchString(fl.Name) {
		c.at(key, "field name %q must be lowercase letters, digits and underscores", fl.Name)
	}
	f := c.fields(n, what, "type", "required", "enum", "description")
	var typeNode *yaml.Node
	fl.Type, typeNode = c.str(f, "type", what, true, n)
	known := contains(factFieldTypes, fl.Type)
	if typeNode != nil && fl.Type != "" && !known {
		hint := ""
		if s := closest(fl.Type, factFieldTypes); s != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
		c.at(typeNode, "%s.type: %q is not one of %v%s", what, fl.Type, factFieldTypes, hint)
	}
	fl.Required = c.boolean(f, "required", what)
	var descNode *yaml.Node
	fl.Description, descNode = c.str(f, "description", what, false, n)
	c.text(descNode, what+".description", true)
	if ev, ok := f["enum"]; ok {
		values, nodes := c.strList(ev.value, what+".enum")
		if len(values) == 0 && ev.value.Kind == yaml.SequenceNode {
			c.at(ev.value, "%s.enum must list at least one value", what)
		}
		switch fl.Type {
		case TypeString, TypeNumber, TypeInteger:
			for i, v := range values {
				if !enumValueFits(fl.Type, nodes[i]) {
					c.at(nodes[i], "%s.enum: %q is not %s", what, v, article(fl.Type))
				}
				c.text(nodes[i], what+".enum", false)
			}
		default:
			if known {
				c.at(ev.key, "%s.enum applies to string, number and integer fields, not %s", what, fl.Type)
			}
		}
		fl.Enum = values
	}
	return fl
}

// enumValueFits reports whether a YAML scalar is a value of a field type.
func enumValueFits(typ string, n *yaml.Node) bool {
	switch typ {
	case TypeString:
		return n.Tag == "!!str"
	case TypeInteger:
		return n.Tag == "!!int"
	case TypeNumber:
		if n.Tag != "!!int" && n.Tag != "!!float" {
			return false
		}
		_, ok := new(big.Rat).SetString(n.Value)
		return ok
	}
	return false
}

func article(typ string) string {
	switch typ[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + typ
	}
	return "a " + typ
}

// redeclareFactTypes checks the fact types a later declaration t of an
// already declared type repeats: one listed by name only refers to the
// earlier declaration; one declared with a schema must declare the same
// schema as before.
func (c *checker) redeclareFactTypes(prev, t *EntityType) {
	for _, name := range t.Facts {
		ft, pft := t.FactType(name), prev.FactType(name)
		if ft == nil || ft.Schema == nil || pft == nil || sameSchema(ft.Schema, pft.Schema) {
			continue
		}
		at := ft.pos
		if pft.Schema == nil {
			at.Message = fmt.Sprintf("entities.%s.facts.%s: declares a schema for a fact type declared without one at %s", t.Name, name, pft.pos.at())
		} else {
			at.Message = fmt.Sprintf("entities.%s.facts.%s: schema differs from the one declared at %s", t.Name, name, pft.pos.at())
		}
		c.diags = append(c.diags, at)
	}
}

// checkFactSchemaChange checks the fact schemas of t against the ones of
// old and the stored facts: a field of a schema that stored facts of the
// type have is not removed or retyped. Dropping a whole schema loosens it
// (any object) and is accepted; adding one governs new appends only.
func checkFactSchemaChange(ctx context.Context, old, t *EntityType, usage store.DomainUsageStore) ([]Diagnostic, error) {
	var diags []Diagnostic
	for _, name := range old.Facts {
		was, now := old.FactSchema(name), t.FactSchema(name)
		if was == nil || now == nil || sameSchema(was, now) {
			continue
		}
		var keys map[string]int64
		for _, of := range was.Fields {
			nf, ok := now.Field(of.Name)
			if ok && nf.Type == of.Type {
				continue
			}
			if keys == nil {
				var err error
				if keys, err = usage.FactTypeKeys(ctx, t.Name, name); err != nil {
					return nil, err
				}
			}
			n := keys[of.Name]
			if n == 0 {
				continue
			}
			what := "entities." + t.Name + ".facts." + name
			if !ok {
				at := t.FactType(name).pos
				at.Message = fmt.Sprintf("%s: removes field %q, which %d stored facts have", what, of.Name, n)
				diags = append(diags, at)
				continue
			}
			at := nf.pos
			at.Message = fmt.Sprintf("%s.fields.%s: retypes field from %s to %s, which %d stored facts have", what, of.Name, of.Type, nf.Type, n)
			diags = append(diags, at)
		}
	}
	return diags, nil
}
