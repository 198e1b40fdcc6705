package manifest

import (
	"fmt"
	"os"
	"regexp"
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/factline/factline/internal/host/store"
)

// Field types of a domain manifest.
const (
	TypeString  = "string"
	TypeNumber  = "number"
	TypeInteger = "integer"
	TypeBoolean = "boolean"
)

var fieldTypes = []string{TypeString, TypeNumber, TypeInteger, TypeBoolean}

// Domain is a validated domain manifest: the entity types the platform
// knows, their fields and fact types, and the subscriptions.
type Domain struct {
	Name          string
	Version       string
	Entities      map[string]*EntityType
	Subscriptions []Subscription

	// routes are the routes: lists of the manifest and of the layers
	// merged into it, in order (see LayerRoutes).
	routes []routeSource
}

// EntityType is one declared entity type.
type EntityType struct {
	Name        string
	Ledger      string
	Description string
	// Fields in declaration order.
	Fields []Field
	// Facts names the fact types in declaration order; FactTypes holds
	// their declarations (with their schemas, if any) by name.
	Facts     []string
	FactTypes map[string]*FactType

	// pos and factPos locate the declaration and its fact types, for the
	// problems of merging layers (see Layer).
	pos     Diagnostic
	factPos []Diagnostic
	// ledgerSound is set when the type's name and ledger parsed without
	// a problem (see ParseDomainLedgers).
	ledgerSound bool
}

// Field is one declared entity field.
type Field struct {
	Name     string
	Type     string
	Required bool
	// Storage is the index slot column ("ix_s_2", "ix_n_1"), or "" when
	// the field lives only in the entity's data.
	Storage string
	// Enum, when non-empty, lists the allowed values of a string field.
	Enum []string

	pos Diagnostic
}

// Subscription routes facts matching Patterns ("<type>.<subtype>") to a
// named handler.
type Subscription struct {
	Name     string
	Patterns []string
	Handler  string

	pos Diagnostic
}

// Field returns the named field declaration.
func (t *EntityType) Field(name string) (Field, bool) {
	for _, f := range t.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// AllowsFact reports whether the type declares the fact type.
func (t *EntityType) AllowsFact(factType string) bool { return contains(t.Facts, factType) }

// Slots computes the index slots of an entity's data from the field
// declarations. Values of the wrong type are left out (validation reports
// them before data reaches the store).
func (t *EntityType) Slots(data map[string]any) store.Slots {
	var s store.Slots
	for _, f := range t.Fields {
		if f.Storage == "" {
			continue
		}
		idx, number, ok := store.ParseSlotColumn(f.Storage)
		if !ok {
			continue
		}
		v, present := data[f.Name]
		if !present || v == nil {
			continue
		}
		if number {
			if n, ok := toFloat(v); ok {
				s.N[idx] = &n
			}
			continue
		}
		if str, ok := v.(string); ok {
			s.S[idx] = &str
		}
	}
	return s
}

// EntityTypeNames returns the declared type names, sorted.
func (d *Domain) EntityTypeNames() []string {
	names := make([]string, 0, len(d.Entities))
	for n := range d.Entities {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// MaxTypeName bounds entity and fact type names: the stores keep them in
// their indexes beside the tenant, the id and an index slot's value, and
// an index entry has a size limit (about 2.7 KB on Postgres).
const MaxTypeName = 64

var (
	identRe   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	patternRe = regexp.MustCompile(`^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$`)
)

// LoadDomainFile reads and validates a domain manifest file.
func LoadDomainFile(path string) (*Domain, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read domain manifest: %w", err)
	}
	return ParseDomain(path, src)
}

// ParseDomain validates a domain manifest. On problems it returns an *Error
// listing all of them.
func ParseDomain(file string, src []byte) (*Domain, error) {
	c := &checker{file: file}
	top := c.parseDocument(src)
	if top == nil {
		return nil, c.err()
	}
	d := c.domain(top)
	if err := c.err(); err != nil {
		return nil, err
	}
	return d, nil
}

// ParseDomainLedgers is, for a domain manifest ParseDomain refuses, the
// entity types whose name and ledger are sound whatever their other
// problems, each with its name, ledger and position only, for the checks
// of a type against its ledger plugin (CheckLedgerPlugins): `factline
// check` then lists those problems beside the parse's rather than after
// the parse's are fixed. Nil when the document does not parse at all.
func ParseDomainLedgers(file string, src []byte) *Domain {
	c := &checker{file: file}
	top := c.parseDocument(src)
	if top == nil {
		return nil
	}
	parsed := c.domain(top)
	d := &Domain{Name: parsed.Name, Version: parsed.Version, Entities: map[string]*EntityType{}}
	for name, t := range parsed.Entities {
		if t.ledgerSound {
			d.Entities[name] = &EntityType{Name: name, Ledger: t.Ledger, pos: t.pos, ledgerSound: true}
		}
	}
	return d
}

// CheckDomainName reports, as a manifest Error at its name, a domain
// manifest whose top-level name is a text other than want: a manifest
// installed under one name that says it is another is most likely sent
// to the wrong place. A document that does not parse, or has no name,
// passes here and is left to ParseDomain.
func CheckDomainName(file string, src []byte, want string) error {
	var doc yaml.Node
	parsed := yaml.Unmarshal(src, &doc) == nil
	if !parsed || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if k.Value != "name" || v.Kind != yaml.ScalarNode || v.Value == want {
			continue
		}
		c := &checker{file: file}
		c.at(v, "name: %q, but the manifest is installed as %q; the two must match", v.Value, want)
		return c.err()
	}
	return nil
}

// At is a diagnostic at the type's declaration (its key), saying msg.
func (t *EntityType) At(msg string) Diagnostic {
	d := t.pos
	d.Message = msg
	return d
}

func (c *checker) domain(top *yaml.Node) *Domain {
	f := c.fields(top, "manifest", "name", "version", "entities", "subscriptions", "routes")
	d := &Domain{Entities: map[string]*EntityType{}}
	var nameNode, versionNode *yaml.Node
	d.Name, nameNode = c.str(f, "name", "manifest", true, top)
	d.Version, versionNode = c.str(f, "version", "manifest", true, top)
	c.text(nameNode, "manifest.name", false)
	c.text(versionNode, "manifest.version", false)
	// A manifest may declare subscriptions or routes and no entity type:
	// a layer that adds a subscription plugin's subscriptions, or command
	// routes for types other layers declare, to the model.
	subs, hasSubs := f["subscriptions"]
	rs, hasRoutes := f["routes"]
	nonEmpty := func(n *yaml.Node) bool { return n.Kind == yaml.SequenceNode && len(n.Content) > 0 }
	extendsOnly := hasSubs && nonEmpty(subs.value) || hasRoutes && nonEmpty(rs.value)
	ents, ok := f["entities"]
	if !ok {
		if !extendsOnly {
			c.missing(top, "manifest", "entities")
		}
	} else {
		for name, ef := range c.fields(ents.value, "entities") {
			before := len(c.diags)
			switch {
			case !identRe.MatchString(name):
				c.at(ef.key, "entity type %.80q must be lowercase letters, digits and underscores, starting with a letter", name)
			case len(name) > MaxTypeName:
				c.at(ef.key, "entity type %.80q is %d characters; at most %d", name, len(name), MaxTypeName)
			}
			if name == SystemEntity {
				c.at(ef.key, "entity type %q is the gateway's own status entity; choose another name", name)
			}
			nameSound := len(c.diags) == before
			t := c.entityType(name, ef.value)
			t.ledgerSound = t.ledgerSound && nameSound
			t.pos = c.pos(ef.key)
			d.Entities[name] = t
		}
		if len(ents.value.Content) == 0 && ents.value.Kind == yaml.MappingNode && !extendsOnly {
			c.at(ents.value, "entities must declare at least one entity type, unless the manifest declares subscriptions or routes")
		}
	}
	if hasSubs {
		d.Subscriptions = c.subscriptions(subs.value)
	}
	if hasRoutes {
		if rs.value.Kind != yaml.SequenceNode {
			c.at(rs.value, "routes must be a list, got %s", kindName(rs.value))
		} else {
			d.routes = []routeSource{{file: c.file, node: rs.value}}
		}
	}
	return d
}

func (c *checker) entityType(name string, n *yaml.Node) *EntityType {
	what := "entities." + name
	f := c.fields(n, what, "ledger", "description", "fields", "facts")
	t := &EntityType{Name: name}
	var ledgerNode, descNode *yaml.Node
	before := len(c.diags)
	t.Ledger, ledgerNode = c.str(f, "ledger", what, true, n)
	c.text(ledgerNode, what+".ledger", false)
	t.ledgerSound = len(c.diags) == before && t.Ledger != ""
	t.Description, descNode = c.str(f, "description", what, false, n)
	c.text(descNode, what+".description", true)
	if ff, ok := f["fields"]; ok {
		usedSlots := map[string]string{}
		if ff.value.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(ff.value.Content); i += 2 {
				k, v := ff.value.Content[i], ff.value.Content[i+1]
				fl := c.entityField(what+".fields."+k.Value, k, v)
				fl.pos = c.pos(k)
				if fl.Storage != "" {
					if other, dup := usedSlots[fl.Storage]; dup {
						c.at(v, "%s: slot %s is already used by field %q", what+".fields."+k.Value, fl.Storage, other)
					}
					usedSlots[fl.Storage] = fl.Name
				}
				t.Fields = append(t.Fields, fl)
			}
		} else {
			c.at(ff.value, "%s.fields must be a mapping, got %s", what, kindName(ff.value))
		}
	} else {
		c.missing(n, what, "fields")
	}
	if ff, ok := f["facts"]; ok {
		c.factTypes(t, ff.value, what)
	} else {
		c.missing(n, what, "facts")
	}
	return t
}

func (c *checker) entityField(what string, key, n *yaml.Node) Field {
	fl := Field{Name: key.Value}
	if !identRe.MatchString(fl.Name) {
		c.at(key, "field name %q must be lowercase letters, digits and underscores", fl.Name)
	}
	f := c.fields(n, what, "type", "required", "storage", "enum", "indexed", "description")
	var typeNode, storageNode *yaml.Node
	fl.Type, typeNode = c.str(f, "type", what, true, n)
	if typeNode != nil && fl.Type != "" && !contains(fieldTypes, fl.Type) {
		c.at(typeNode, "%s.type: %q is not one of %v", what, fl.Type, fieldTypes)
	}
	fl.Required = c.boolean(f, "required", what)
	_, descNode := c.str(f, "description", what, false, n)
	c.text(descNode, what+".description", true)
	fl.Storage, storageNode = c.str(f, "storage", what, false, n)
	if storageNode != nil && reservedFilter(fl.Name) {
		c.at(key, "%s: %q cannot have a storage slot: listings use it as a query parameter", what, fl.Name)
	}
	if storageNode != nil {
		_, number, ok := store.ParseSlotColumn(fl.Storage)
		switch {
		case !ok:
			c.at(storageNode, "%s.storage: %q is not a slot (ix_s_1..ix_s_%d or ix_n_1..ix_n_%d)", what, fl.Storage, store.StringSlots, store.NumberSlots)
		case number && fl.Type != TypeNumber && fl.Type != TypeInteger:
			c.at(storageNode, "%s.storage: number slot %s needs a number or integer field, not %s", what, fl.Storage, fl.Type)
		case !number && fl.Type != TypeString:
			c.at(storageNode, "%s.storage: string slot %s needs a string field, not %s", what, fl.Storage, fl.Type)
		}
	}
	if ev, ok := f["enum"]; ok {
		fl.Enum, _ = c.strList(ev.value, what+".enum")
		if ev.value.Kind == yaml.SequenceNode {
			for _, n := range ev.value.Content {
				c.text(n, what+".enum", false)
			}
		}
		if fl.Type != TypeString {
			c.at(ev.value, "%s.enum applies to string fields only", what)
		}
		if len(fl.Enum) == 0 && ev.value.Kind == yaml.SequenceNode {
			c.at(ev.value, "%s.enum must list at least one value", what)
		}
	}
	// A filter reads the field's slot: indexed without one filters nothing.
	if iv, ok := f["indexed"]; ok && c.boolean(f, "indexed", what) && storageNode == nil {
		c.at(iv.key, "%s.indexed: an indexed field needs a storage slot (ix_s_1..ix_s_%d or ix_n_1..ix_n_%d); listings filter on the slot", what, store.StringSlots, store.NumberSlots)
	}
	return fl
}

// maxSubscriptionName bounds a subscription's name, maxSubscriptions the
// subscriptions of one manifest.
const (
	maxSubscriptionName = 100
	maxSubscriptions    = 100
)

func (c *checker) subscriptions(n *yaml.Node) []Subscription {
	if n.Kind != yaml.SequenceNode {
		c.at(n, "subscriptions must be a list, got %s", kindName(n))
		return nil
	}
	if len(n.Content) > maxSubscriptions {
		// Each is a reader of the stream of its own.
		c.at(n, "subscriptions: %d declared, at most %d per manifest", len(n.Content), maxSubscriptions)
		return nil
	}
	var out []Subscription
	names := map[string]bool{}
	for i, item := range n.Content {
		what := fmt.Sprintf("subscriptions[%d]", i)
		f := c.fields(item, what, "name", "patterns", "handler")
		s := Subscription{pos: c.pos(item)}
		var nameNode *yaml.Node
		s.Name, nameNode = c.str(f, "name", what, true, item)
		switch {
		case s.Name != "" && (!identRe.MatchString(s.Name) || len(s.Name) > maxSubscriptionName):
			// The name is a stream consumer's, in checkpoints, logs and
			// metric labels.
			c.at(nameNode, "%s.name %.80q must be lowercase letters, digits and underscores, starting with a letter, at most %d characters", what, s.Name, maxSubscriptionName)
		case s.Name != "" && names[s.Name]:
			c.at(nameNode, "%s: duplicate subscription name %q", what, s.Name)
		}
		names[s.Name] = true
		var handlerNode *yaml.Node
		s.Handler, handlerNode = c.str(f, "handler", what, true, item)
		c.text(handlerNode, what+".handler", false)
		if pf, ok := f["patterns"]; ok {
			pats, nodes := c.strList(pf.value, what+".patterns")
			if len(pats) == 0 && pf.value.Kind == yaml.SequenceNode {
				c.at(pf.value, "%s.patterns must list at least one pattern", what)
			}
			for j, p := range pats {
				if !patternRe.MatchString(p) {
					c.at(nodes[j], "%s.patterns: %q is not of the form <type>.<subtype>", what, p)
				}
			}
			s.Patterns = pats
		} else {
			c.missing(item, what, "patterns")
		}
		out = append(out, s)
	}
	return out
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case interface{ Float64() (float64, error) }:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}
