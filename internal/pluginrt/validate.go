package pluginrt

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/factline/factline/sdk/abi"
)

var (
	// pluginNameRe: plugin names appear in URLs, metrics and file names.
	pluginNameRe = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	// versionRe: semantic versions, an optional leading v.
	versionRe = regexp.MustCompile(`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	// identRe: entity types, fact types, handlers and commands, as in the
	// domain manifest.
	identRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	// pathRe: a command path, mounted under /v1/entities/:id.
	pathRe = regexp.MustCompile(`^(/([A-Za-z0-9._~-]+|:[A-Za-z_][A-Za-z0-9_]*))+$`)
)

var methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// ValidPluginName reports whether name can name a plugin: a lowercase
// letter, then up to 63 lowercase letters, digits, _ or -.
func ValidPluginName(name string) bool { return pluginNameRe.MatchString(name) }

// reservedPaths are platform routes under /v1/entities/:id.
var reservedPaths = []string{"/facts"}

// export is a required export's signature.
type export struct {
	name            string
	params, results []api.ValueType
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// requiredExports are the functions of sdk/ABI.md, in the order problems
// are reported.
var requiredExports = []export{
	{abi.ExportInit, nil, nil},
	{abi.ExportVersion, nil, []api.ValueType{i32}},
	{abi.ExportAlloc, []api.ValueType{i32}, []api.ValueType{i32}},
	{abi.ExportFree, []api.ValueType{i32, i32}, nil},
	{abi.ExportDescribe, nil, []api.ValueType{i64}},
	{abi.ExportDecide, []api.ValueType{i32, i32}, []api.ValueType{i64}},
	{abi.ExportEvolve, []api.ValueType{i32, i32}, []api.ValueType{i64}},
	{abi.ExportHandle, []api.ValueType{i32, i32}, []api.ValueType{i64}},
}

// essentialExports are needed to instantiate a module and ask for its
// version and description; without them Load stops early.
var essentialExports = []string{abi.ExportInit, abi.ExportVersion, abi.ExportAlloc, abi.ExportDescribe}

const wasiModule = "wasi_snapshot_preview1"

// checkModule checks the imports and exports of a compiled module. fatal
// is true when the module cannot even be instantiated and described.
func checkModule(cm wazero.CompiledModule) (reasons []string, fatal bool) {
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch {
		case mod == wasiModule:
			// wazero provides the whole of WASI preview 1; the sandbox is in
			// the module config (no FS, env, network).
		case mod == abi.HostModule && name == "log":
			if !sameSig(f.ParamTypes(), []api.ValueType{i32, i32, i32}) || len(f.ResultTypes()) != 0 {
				reasons = append(reasons, fmt.Sprintf("import %s.log has signature %s, want (i32, i32, i32) -> ()", mod, sig(f)))
				fatal = true
			}
		default:
			reasons = append(reasons, fmt.Sprintf("imports %s.%s, which the host does not provide (only %s and %s.log)", mod, name, wasiModule, abi.HostModule))
			fatal = true
		}
	}
	for _, m := range cm.ImportedMemories() {
		mod, name, _ := m.Import()
		reasons = append(reasons, fmt.Sprintf("imports memory %s.%s; a plugin defines and exports its own memory", mod, name))
		fatal = true
	}
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		reasons = append(reasons, `does not export its linear memory as "memory"`)
		fatal = true
	}
	exports := cm.ExportedFunctions()
	for _, want := range requiredExports {
		f, ok := exports[want.name]
		switch {
		case !ok:
			reasons = append(reasons, "missing export "+want.name)
		case !sameSig(f.ParamTypes(), want.params) || !sameSig(f.ResultTypes(), want.results):
			reasons = append(reasons, fmt.Sprintf("export %s has signature %s, want %s", want.name, sig(f), sigOf(want.params, want.results)))
		default:
			continue
		}
		if slices.Contains(essentialExports, want.name) {
			fatal = true
		}
	}
	return reasons, fatal
}

func sameSig(a, b []api.ValueType) bool { return slices.Equal(a, b) }

func sig(f api.FunctionDefinition) string { return sigOf(f.ParamTypes(), f.ResultTypes()) }

func sigOf(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	return names(params) + " -> " + names(results)
}

// checkDescription returns every rule of sdk/ABI.md the describe document
// d breaks.
func checkDescription(d abi.Description) []string {
	var r []string
	add := func(format string, args ...any) { r = append(r, "describe: "+fmt.Sprintf(format, args...)) }

	if d.ABI != abi.Version {
		add("abi is %d, want %d", d.ABI, abi.Version)
	}
	if !pluginNameRe.MatchString(d.Name) {
		add("name %q: want lowercase letters, digits, _ and -, starting with a letter, at most 64", d.Name)
	}
	if !versionRe.MatchString(d.Version) {
		add("version %q: want a semantic version such as 1.2.0", d.Version)
	}
	idents := func(what string, names []string) {
		seen := map[string]bool{}
		for _, n := range names {
			if !identRe.MatchString(n) {
				add("%s %q: want lowercase letters, digits and _, starting with a letter", what, n)
			}
			if seen[n] {
				add("%s %q is listed twice", what, n)
			}
			seen[n] = true
		}
	}
	// emits lists fact types, or is abi.AnyFactType alone (a ledger's).
	emits := func(what string, names []string) {
		if slices.Contains(names, abi.AnyFactType) {
			if len(names) > 1 {
				add("%s lists %q beside other fact types; it allows them all", what, abi.AnyFactType)
			}
			if d.Kind != abi.KindLedger {
				add("%s %q: only a ledger records any fact type", what, abi.AnyFactType)
			}
			return
		}
		idents("fact type", names)
	}
	switch d.Kind {
	case abi.KindLedger:
		if len(d.EntityTypes) == 0 {
			add("a ledger lists the entity types it serves in entity_types")
		}
		if len(d.Handlers) > 0 {
			add("a ledger has no handlers (handlers lists %d)", len(d.Handlers))
		}
	case abi.KindSubscription:
		if len(d.Handlers) == 0 {
			add("a subscription lists its handler names in handlers")
		}
		if len(d.EntityTypes) > 0 {
			add("a subscription serves no entity types (entity_types lists %d)", len(d.EntityTypes))
		}
		if len(d.Commands) > 0 {
			add("a subscription serves no commands (commands lists %d)", len(d.Commands))
		}
	default:
		add("kind %q: want %q or %q", d.Kind, abi.KindLedger, abi.KindSubscription)
	}
	idents("entity type", d.EntityTypes)
	idents("handler", d.Handlers)
	emits("emits", d.Emits)
	// The description is published (/openapi.json, /docs) and checked on
	// every model change: its size is bounded.
	for _, l := range []struct {
		what string
		n    int
	}{{"commands", len(d.Commands)}, {"entity_types", len(d.EntityTypes)}, {"handlers", len(d.Handlers)}, {"emits", len(d.Emits)}} {
		if l.n > MaxDescribed {
			add("%s lists %d; at most %d", l.what, l.n, MaxDescribed)
		}
	}

	names := map[string]bool{}
	routes := map[string]string{}
	for i, c := range d.Commands {
		label := fmt.Sprintf("command %d", i+1)
		if c.Name != "" {
			label = fmt.Sprintf("command %q", c.Name)
		}
		switch {
		case c.Name == "":
			add("%s has no name", label)
		case !identRe.MatchString(c.Name):
			add("%s: want a name of lowercase letters, digits and _, starting with a letter", label)
		case names[c.Name]:
			add("%s is declared twice", label)
		}
		names[c.Name] = true
		if c.Name == abi.CommandAppend && c.Path != "" {
			add("%s is the built-in raw append and has no path", label)
		}
		switch {
		case c.Path == "" && c.Method != "":
			add("%s has a method but no path", label)
		case c.Path != "":
			if !slices.Contains(methods, c.Method) {
				add("%s: method %q, want one of %s", label, c.Method, strings.Join(methods, ", "))
			}
			if !pathRe.MatchString(c.Path) {
				add("%s: path %q: want /segment[/segment...] (segments of letters, digits, . _ ~ - or :param)", label, c.Path)
			}
			if slices.Contains(reservedPaths, c.Path) {
				add("%s: path %s is a platform route", label, c.Path)
			}
			if strings.Contains(c.Path+"/", "/:id/") {
				add("%s: path %q reuses :id, the entity's id parameter", label, c.Path)
			}
			key := c.Method + " " + c.Path
			if other, ok := routes[key]; ok {
				add("%s: %s is already served by command %q", label, key, other)
			} else {
				routes[key] = c.Name
			}
			if c.Method == "GET" && !c.ReadOnly {
				add("%s: a GET command must be read_only", label)
			}
		}
		if c.ReadOnly && len(c.Emits) > 0 {
			add("%s is read_only but emits %s", label, strings.Join(c.Emits, ", "))
		}
		if len(c.Description) > MaxCommandDescription {
			add("%s: description of %d bytes; at most %d", label, len(c.Description), MaxCommandDescription)
		}
		if !slices.Contains(d.Emits, abi.AnyFactType) {
			for _, ft := range c.Emits {
				if ft != abi.AnyFactType && identRe.MatchString(ft) && !slices.Contains(d.Emits, ft) {
					add("%s emits %q, which the top-level emits does not list", label, ft)
				}
			}
		}
		// Schemas are shown in the OpenAPI document as they are, so they
		// must be JSON objects.
		for _, s := range []struct {
			key string
			v   []byte
		}{{"input_schema", c.InputSchema}, {"result_schema", c.ResultSchema}} {
			if len(s.v) > 0 && !isObject(s.v) {
				add("%s: %s must be a JSON Schema object", label, s.key)
				continue
			}
			if len(s.v) > MaxSchemaBytes {
				add("%s: %s of %d bytes; at most %d", label, s.key, len(s.v), MaxSchemaBytes)
				continue
			}
			if len(s.v) > 0 {
				if problem := schemaProblem(s.v); problem != "" {
					add("%s: %s %s", label, s.key, problem)
				}
			}
		}
		if !c.ReadOnly && len(c.ResultSchema) > 0 {
			add("%s: only a read_only command has a result_schema (a write answers its facts)", label)
		}
		if slices.Contains(c.Emits, abi.AnyFactType) {
			emits(label+" emits", c.Emits)
		} else {
			for _, ft := range c.Emits {
				if !identRe.MatchString(ft) {
					add("%s emits %q: want lowercase letters, digits and _, starting with a letter", label, ft)
				}
			}
		}
	}
	return r
}

// isObject reports whether b is a JSON object.
func isObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// Bounds of a describe document, which is published in /openapi.json and
// /docs and held against the model at every change.
const (
	// MaxDescribed bounds each list: commands, entity types, handlers,
	// fact types emitted.
	MaxDescribed = 256
	// MaxCommandDescription bounds a command's description, in bytes.
	MaxCommandDescription = 4096
	// MaxSchemaBytes bounds a command's input or result schema.
	MaxSchemaBytes = 64 << 10
	// MaxSchemaDepth bounds how deep subschemas nest (a command input may
	// nest 32 levels; its schema describes every one).
	MaxSchemaDepth = 32
)

// schemaProblem says what keeps a schema out of the API document, or "":
// subschemas nested deeper than MaxSchemaDepth (an object's properties
// are one level below it), any JSON nesting deeper than maxJSONDepth, or
// a $ref, which the document inlines nothing for (it would point into
// nowhere, or to another host). A property named $ref and values
// (default, examples, enum, const) are no references.
func schemaProblem(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "is not valid JSON"
	}
	var walk func(v any, level, depth int, schema bool) string
	walk = func(v any, level, depth int, schema bool) string {
		if depth > maxJSONDepth {
			return fmt.Sprintf("nests deeper than %d JSON levels", maxJSONDepth)
		}
		switch x := v.(type) {
		case map[string]any:
			if schema && level > MaxSchemaDepth {
				return fmt.Sprintf("nests subschemas deeper than %d levels", MaxSchemaDepth)
			}
			if !schema {
				for _, k := range slices.Sorted(maps.Keys(x)) {
					if p := walk(x[k], level, depth+1, false); p != "" {
						return p
					}
				}
				return ""
			}
			if _, ok := x["$ref"]; ok {
				return "uses $ref; describe schemas inline"
			}
			for _, k := range slices.Sorted(maps.Keys(x)) {
				switch k {
				case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
					// A map of names to subschemas.
					if m, ok := x[k].(map[string]any); ok {
						for _, name := range slices.Sorted(maps.Keys(m)) {
							if p := walk(m[name], level+1, depth+2, true); p != "" {
								return p
							}
						}
						continue
					}
				case "default", "example", "examples", "enum", "const":
					if p := walk(x[k], level, depth+1, false); p != "" {
						return p
					}
					continue
				}
				if p := walk(x[k], level+1, depth+1, true); p != "" {
					return p
				}
			}
		case []any:
			for _, e := range x {
				// A list of subschemas (allOf, items) is one level with them.
				if p := walk(e, level, depth+1, schema); p != "" {
					return p
				}
			}
		}
		return ""
	}
	return walk(v, 1, 1, true)
}

// maxJSONDepth bounds any nesting in a schema, values included.
const maxJSONDepth = 128
