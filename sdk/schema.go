package sdk

import (
	"encoding/json"
	"reflect"
	"strings"
)

// Schemer is implemented by types whose JSON shape reflection cannot see,
// such as those with their own DecodeJSON or EncodeJSON: JSONSchema
// returns the JSON Schema of their JSON form.
type Schemer interface {
	JSONSchema() json.RawMessage
}

// SchemaOf returns the JSON Schema of T's JSON form, as Write and Read
// describe a command's input and result to the host (the OpenAPI document
// shows them). It follows encoding/json: exported struct fields by their
// json tag (omitempty: not required; "-": skipped; embedded structs
// inlined), basic types, slices, arrays, maps with string keys, pointers
// and nested structs. A Decimal is a number of format decimal (exact), a json.RawMessage or
// an interface any value, and a Schemer describes itself. The SDK keeps
// this small reflector rather than a schema library so that plugin
// modules depend on nothing but the SDK.
func SchemaOf[T any]() json.RawMessage {
	b, err := json.Marshal(schemaOf(reflect.TypeFor[T](), map[reflect.Type]bool{}))
	if err != nil {
		return nil
	}
	return b
}

var (
	schemerType = reflect.TypeFor[Schemer]()
	decimalType = reflect.TypeFor[Decimal]()
	rawType     = reflect.TypeFor[json.RawMessage]()
	appendType  = reflect.TypeFor[AppendInput]()
)

// appendSchema is the input of the built-in append command.
const appendSchema = `{"type":"object","properties":{"type":{"type":"string"},"subtype":{"type":"string"},` +
	`"timestamp":{"type":"integer"},"data":{"type":"object"}},"required":["type"]}`

// schema is a JSON Schema object; its keys marshal in sorted order, so a
// derivation is stable.
type schema = map[string]any

// schemaOf describes t; seen holds the struct types being described, so a
// recursive type ends in an open schema instead of looping.
func schemaOf(t reflect.Type, seen map[reflect.Type]bool) any {
	for t.Kind() == reflect.Pointer && !t.Implements(schemerType) {
		t = t.Elem()
	}
	switch {
	case t.Implements(schemerType):
		return reflect.Zero(t).Interface().(Schemer).JSONSchema()
	case reflect.PointerTo(t).Implements(schemerType):
		return reflect.New(t).Interface().(Schemer).JSONSchema()
	case t == decimalType:
		// Amounts travel as JSON numbers (README.md, "The platform API"); the decoder takes
		// a decimal string too.
		return schema{"type": "number", "format": "decimal"}
	case t == rawType:
		return schema{}
	case t == appendType:
		return json.RawMessage(appendSchema)
	}
	switch t.Kind() {
	case reflect.Bool:
		return schema{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return schema{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return schema{"type": "number"}
	case reflect.String:
		return schema{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return schema{"type": "string", "format": "byte"} // base64, as encoding/json writes []byte
		}
		return schema{"type": "array", "items": schemaOf(t.Elem(), seen)}
	case reflect.Map:
		return schema{"type": "object", "additionalProperties": schemaOf(t.Elem(), seen)}
	case reflect.Struct:
		if seen[t] {
			return schema{"type": "object"}
		}
		seen[t] = true
		defer delete(seen, t)
		props := schema{}
		var required []string
		structFields(t, seen, props, &required)
		s := schema{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	return schema{} // interfaces and anything encoding/json would write freely
}

// structFields adds the JSON members of struct t to props.
func structFields(t reflect.Type, seen map[reflect.Type]bool, props schema, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				structFields(ft, seen, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = schemaOf(ft, seen)
		if !strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,") {
			*required = append(*required, name)
		}
	}
}
