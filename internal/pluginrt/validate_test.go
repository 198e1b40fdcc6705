package pluginrt

import (
	"fmt"
	"strings"
	"testing"

	"github.com/factline/factline/sdk/abi"
)

func validLedger() abi.Description {
	return abi.Description{
		ABI: 1, Name: "account", Version: "1.2.0", Kind: abi.KindLedger, EntityTypes: []string{"account"},
		Commands: []abi.Command{
			{Name: "deposit", Method: "POST", Path: "/deposit", Emits: []string{"deposit"}},
			{Name: "budget", Method: "GET", Path: "/budget", ReadOnly: true},
			{Name: "line", Method: "GET", Path: "/lines/:line", ReadOnly: true},
			{Name: "internal"},
		},
		Emits: []string{"deposit", "charge"},
	}
}

func TestCheckDescription(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*abi.Description)
		want   string // "" when valid
	}{
		{"valid ledger", func(*abi.Description) {}, ""},
		{"valid subscription", func(d *abi.Description) {
			*d = abi.Description{ABI: 1, Name: "notify", Version: "v0.3.0-rc.1+build.5", Kind: abi.KindSubscription, Handlers: []string{"followup"}}
		}, ""},
		{"abi", func(d *abi.Description) { d.ABI = 2 }, "abi is 2"},
		{"name", func(d *abi.Description) { d.Name = "" }, `name ""`},
		{"version", func(d *abi.Description) { d.Version = "1.2" }, `version "1.2"`},
		{"kind", func(d *abi.Description) { d.Kind = "" }, `kind ""`},
		{"ledger without types", func(d *abi.Description) { d.EntityTypes = nil }, "lists the entity types"},
		{"ledger with handlers", func(d *abi.Description) { d.Handlers = []string{"h"} }, "a ledger has no handlers"},
		{"bad entity type", func(d *abi.Description) { d.EntityTypes = []string{"Account"} }, `entity type "Account"`},
		{"duplicate entity type", func(d *abi.Description) { d.EntityTypes = []string{"a", "a"} }, `entity type "a" is listed twice`},
		{"bad fact type", func(d *abi.Description) { d.Emits = []string{"deposit made"} }, `fact type "deposit made"`},
		{"any fact type", func(d *abi.Description) {
			d.Emits, d.Commands[0].Emits = []string{abi.AnyFactType}, []string{abi.AnyFactType}
		}, ""},
		{"any fact type and more", func(d *abi.Description) { d.Emits = []string{abi.AnyFactType, "deposit"} }, `emits lists "*" beside other fact types`},
		{"command any fact type and more", func(d *abi.Description) { d.Commands[0].Emits = []string{"deposit", abi.AnyFactType} }, `command "deposit" emits lists "*" beside`},
		{"subscription any fact type", func(d *abi.Description) {
			*d = abi.Description{ABI: 1, Name: "notify", Version: "1.0.0", Kind: abi.KindSubscription, Handlers: []string{"followup"}, Emits: []string{abi.AnyFactType}}
		}, `only a ledger records any fact type`},
		{"subscription without handlers", func(d *abi.Description) {
			d.Kind, d.EntityTypes, d.Commands = abi.KindSubscription, nil, nil
		}, "lists its handler names"},
		{"subscription with commands", func(d *abi.Description) {
			d.Kind, d.EntityTypes, d.Handlers = abi.KindSubscription, nil, []string{"h"}
		}, "serves no commands"},
		{"command without name", func(d *abi.Description) { d.Commands[0].Name = "" }, "command 1 has no name"},
		{"duplicate command", func(d *abi.Description) { d.Commands[1].Name = "deposit" }, `command "deposit" is declared twice`},
		{"method without path", func(d *abi.Description) { d.Commands[3].Method = "POST" }, "has a method but no path"},
		{"bad method", func(d *abi.Description) { d.Commands[0].Method = "post" }, `method "post"`},
		{"bad path", func(d *abi.Description) { d.Commands[0].Path = "/a b" }, `path "/a b"`},
		{"trailing slash", func(d *abi.Description) { d.Commands[0].Path = "/deposit/" }, `path "/deposit/"`},
		{"platform path", func(d *abi.Description) { d.Commands[1].Path = "/facts" }, "/facts is a platform route"},
		{"id parameter", func(d *abi.Description) { d.Commands[2].Path = "/x/:id" }, "reuses :id"},
		{"same route", func(d *abi.Description) { d.Commands[2].Path = "/budget" }, "GET /budget is already served"},
		{"GET that writes", func(d *abi.Description) { d.Commands[1].ReadOnly = false }, "a GET command must be read_only"},
		{"read-only emits", func(d *abi.Description) { d.Commands[1].Emits = []string{"deposit"} }, "is read_only but emits"},
		{"append with path", func(d *abi.Description) { d.Commands[0].Name = abi.CommandAppend }, "built-in raw append"},
		{"schemas", func(d *abi.Description) {
			d.Commands[0].InputSchema = []byte(`{"type":"object"}`)
			d.Commands[1].ResultSchema = []byte(`{"type":"integer"}`)
		}, ""},
		{"input schema not an object", func(d *abi.Description) { d.Commands[0].InputSchema = []byte(`"object"`) }, "input_schema must be a JSON Schema object"},
		{"result schema null", func(d *abi.Description) { d.Commands[1].ResultSchema = []byte(`null`) }, "result_schema must be a JSON Schema object"},
		{"result schema on a write", func(d *abi.Description) { d.Commands[0].ResultSchema = []byte(`{}`) }, "only a read_only command has a result_schema"},
		{"command emits what the plugin does not", func(d *abi.Description) { d.Commands[0].Emits = []string{"refund"} }, `command "deposit" emits "refund", which the top-level emits does not list`},
		{"too many commands", func(d *abi.Description) {
			for i := range MaxDescribed {
				d.Commands = append(d.Commands, abi.Command{Name: fmt.Sprintf("c%d", i)})
			}
		}, "commands lists 260; at most 256"},
		{"long description", func(d *abi.Description) { d.Commands[0].Description = strings.Repeat("x", MaxCommandDescription+1) }, "description of 4097 bytes"},
		{"large schema", func(d *abi.Description) {
			d.Commands[0].InputSchema = []byte(`{"description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`)
		}, "input_schema of 65554 bytes; at most 65536"},
		{"deep schema", func(d *abi.Description) {
			d.Commands[0].InputSchema = []byte(strings.Repeat(`{"items":`, 40) + `{}` + strings.Repeat(`}`, 40))
		}, "input_schema nests subschemas deeper than 32 levels"},
		{"schema as deep as allowed", func(d *abi.Description) {
			d.Commands[0].InputSchema = []byte(strings.Repeat(`{"items":`, 31) + `{}` + strings.Repeat(`}`, 31))
		}, ""},
		{"nested object fields as deep as an input may be", func(d *abi.Description) {
			d.Commands[0].InputSchema = []byte(strings.Repeat(`{"type":"object","properties":{"f":`, 31) + `{"type":"string"}` + strings.Repeat(`}}`, 31))
		}, ""},
		{"nested object fields deeper than an input may be", func(d *abi.Description) {
			d.Commands[0].InputSchema = []byte(strings.Repeat(`{"type":"object","properties":{"f":`, 32) + `{"type":"string"}` + strings.Repeat(`}}`, 32))
		}, "input_schema nests subschemas deeper than 32 levels"},
		{"schema with a $ref", func(d *abi.Description) {
			d.Commands[1].ResultSchema = []byte(`{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1:9/evil.json"}}}`)
		}, "result_schema uses $ref"},
		{"schema with a $ref in a list of subschemas", func(d *abi.Description) {
			d.Commands[1].ResultSchema = []byte(`{"anyOf":[{"type":"string"},{"$ref":"#/x"}]}`)
		}, "result_schema uses $ref"},
		{"a property named $ref and $ref in values", func(d *abi.Description) {
			d.Commands[0].InputSchema = []byte(`{"type":"object","properties":{"$ref":{"type":"string","default":{"$ref":"x"},"enum":[{"$ref":"y"}]}}}`)
		}, ""},
		{"a deep default value", func(d *abi.Description) {
			d.Commands[0].InputSchema = []byte(`{"default":` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `}`)
		}, "input_schema nests deeper than 128 JSON levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := validLedger()
			d.Commands = append([]abi.Command(nil), d.Commands...)
			tt.change(&d)
			got := checkDescription(d)
			switch {
			case tt.want == "" && len(got) > 0:
				t.Errorf("refused: %v", got)
			case tt.want != "" && !strings.Contains(strings.Join(got, "\n"), tt.want):
				t.Errorf("reasons %v lack %q", got, tt.want)
			}
		})
	}
}

func TestLoadRefusesForeignImports(t *testing.T) {
	t.Parallel()
	h := newHost(t, Options{PoolSize: 1})
	// (module (import "env" "foo" (func))): no memory, no exports.
	wasm := []byte("\x00asm\x01\x00\x00\x00" +
		"\x01\x04\x01\x60\x00\x00" + // type section: () -> ()
		"\x02\x0b\x01\x03env\x03foo\x00\x00") // import section: env.foo, type 0
	_, err := h.Load(t.Context(), wasm)
	for _, want := range []string{"imports env.foo, which the host does not provide", `does not export its linear memory as "memory"`,
		"missing export _initialize", "missing export factline_describe", "missing export factline_handle"} {
		if !isLoadError(err, want) {
			t.Errorf("Load = %v; want a reason %q", err, want)
		}
	}
	if err != nil && strings.Count(err.Error(), "missing export") != len(requiredExports) {
		t.Errorf("reasons: %v", err)
	}
}
