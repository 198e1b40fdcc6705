package openapi

import (
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/factline/factline/internal/host/ledger"
	"github.com/factline/factline/sdk/abi"
)

// ledgerCommands describes the routes ledger plugins declare, mounted at
// <method> /v1/entities/{id}<path>. Commands several entity types share
// (the same method and path) are one operation naming every type.
func (b *builder) ledgerCommands(commands map[string][]ledger.CommandSpec) {
	type key struct{ method, path string }
	byRoute := map[key][]string{}
	spec := map[key]ledger.CommandSpec{}
	for typ, cmds := range commands {
		for _, c := range cmds {
			if c.Path == "" || c.Method == "" {
				continue
			}
			k := key{strings.ToUpper(c.Method), c.Path}
			byRoute[k] = append(byRoute[k], typ)
			spec[k] = c
		}
	}
	keys := make([]key, 0, len(byRoute))
	for k := range byRoute {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].path != keys[j].path {
			return keys[i].path < keys[j].path
		}
		return keys[i].method < keys[j].method
	})
	for _, k := range keys {
		types := byRoute[k]
		sort.Strings(types)
		c := spec[k]
		desc := c.Description
		if desc == "" {
			desc = "The " + c.Name + " command of the entity's ledger."
		}
		desc += " Served for entities of type " + strings.Join(types, ", ") + " by their ledger plugin."
		op := Endpoint{
			Method: k.method, Path: "/v1/entities/{id}" + k.path, ID: "ledger" + pascal(c.Name) + pascal(strings.Join(types, "_")),
			Tag: TagEntities, Summary: cmpOr(c.Description, c.Name), Params: []Param{IDParam("entity")},
			Problems: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity},
		}
		if c.ReadOnly {
			op.Description = desc + " Read-only: answers the command's result and records nothing."
			op.Status, op.OK, op.Data = http.StatusOK, "The command's result.", fixed(described(c.ResultSchema, "The command's result, as the ledger computes it from the entity's state."))
		} else {
			emits := strings.Join(c.Emits, ", ")
			if slices.Contains(c.Emits, abi.AnyFactType) {
				emits = "any fact type the entity's type declares"
			}
			op.Description = desc + " Records the facts the ledger decides (" + emits + ") and answers the recorded fact (or {facts} when several)."
			op.Status, op.OK, op.Data = http.StatusCreated, "The recorded fact.", Ref(schemaFact)
			op.Idempotent = true
			op.Problems = append(op.Problems, http.StatusConflict)
		}
		if k.method != http.MethodGet && k.method != http.MethodDelete {
			op.Body = fixed(described(c.InputSchema, "The command's input, as the ledger defines it."))
		}
		b.endpoint(op)
	}
}

// described is the JSON Schema a plugin describes (see sdk/ABI.md), or a
// free object when it describes none or one this document cannot hold.
func described(schema []byte, desc string) *openapi3.SchemaRef {
	if len(schema) == 0 {
		return freeObject(desc)
	}
	s := openapi3.NewSchema()
	if err := s.UnmarshalJSON(schema); err != nil {
		return freeObject(desc)
	}
	if s.Description == "" {
		s.Description = desc
	}
	return inline(s)
}

// command is the command name of entity type typ's ledger; ok is false
// when its ledger's commands are not known here.
func (b *builder) command(typ, name string) (c ledger.CommandSpec, ok bool) {
	for _, c := range b.commands[typ] {
		if c.Name == name {
			return c, true
		}
	}
	return ledger.CommandSpec{}, false
}

// fixed is a schema already built.
func fixed(r *openapi3.SchemaRef) Schema { return func(Doc) *openapi3.SchemaRef { return r } }
