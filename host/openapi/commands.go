package openapi

import (
	"net/http"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/factline/factline/host/ledger"
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
		op := platformOp{
			method: k.method, path: "/v1/entities/{id}" + k.path, id: "ledger" + pascal(c.Name) + pascal(strings.Join(types, "_")),
			tag: tagEntities, summary: cmpOr(c.Description, c.Name), params: []*openapi3.ParameterRef{idParam("entity")},
			errs: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity},
		}
		if c.ReadOnly {
			op.description = desc + " Read-only: answers the command's result and records nothing."
			op.status, op.okDesc, op.data = http.StatusOK, "The command's result.", described(c.ResultSchema, "The command's result, as the ledger computes it from the entity's state.")
		} else {
			op.description = desc + " Records the facts the ledger decides (" + strings.Join(c.Emits, ", ") + ") and answers the recorded fact (or {facts} when several)."
			op.status, op.okDesc, op.data = http.StatusCreated, "The recorded fact.", b.schema(schemaFact)
			op.idempotent = true
			op.errs = append(op.errs, http.StatusConflict)
		}
		if k.method != http.MethodGet && k.method != http.MethodDelete {
			op.body = described(c.InputSchema, "The command's input, as the ledger defines it.")
			op.errs = append(op.errs, http.StatusUnsupportedMediaType, http.StatusRequestEntityTooLarge)
		}
		b.platformOperation(op)
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
