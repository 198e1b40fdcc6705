package manifest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// Layer merges domain manifests over a base: each layer adds entity types
// and may add fact types to a type an earlier layer declares. A layer that
// re-declares a type repeats its ledger and fields exactly (so passing the
// base manifest again is a no-op) and keeps every fact type; anything else
// is a conflict, reported at the layer's line and column with the position
// of the earlier declaration. On conflicts it returns an *Error listing all
// of them and no domain.
func Layer(base *Domain, layers ...*Domain) (*Domain, error) {
	out := &Domain{Name: base.Name, Version: base.Version, Entities: map[string]*EntityType{}}
	for k, v := range base.Entities {
		out.Entities[k] = v
	}
	out.Subscriptions = append(out.Subscriptions, base.Subscriptions...)
	out.routes = slices.Clone(base.routes)
	var all []Diagnostic
	for _, l := range layers {
		out.routes = append(out.routes, l.routes...)
		c := &checker{}
		for _, name := range l.EntityTypeNames() {
			t := l.Entities[name]
			prev, ok := out.Entities[name]
			if !ok {
				out.Entities[name] = t
				continue
			}
			if merged := c.redeclare(prev, t); merged != nil {
				out.Entities[name] = merged
			}
		}
		for _, s := range l.Subscriptions {
			i := slices.IndexFunc(out.Subscriptions, func(o Subscription) bool { return o.Name == s.Name })
			switch {
			case i < 0:
				out.Subscriptions = append(out.Subscriptions, s)
			case !slices.Equal(out.Subscriptions[i].Patterns, s.Patterns) || out.Subscriptions[i].Handler != s.Handler:
				at := s.pos
				at.Message = fmt.Sprintf("subscription %q differs from the one declared at %s", s.Name, out.Subscriptions[i].pos.at())
				c.diags = append(c.diags, at)
			}
		}
		sort.SliceStable(c.diags, func(i, j int) bool {
			if c.diags[i].Line != c.diags[j].Line {
				return c.diags[i].Line < c.diags[j].Line
			}
			return c.diags[i].Column < c.diags[j].Column
		})
		all = append(all, c.diags...)
	}
	if len(all) > 0 {
		return nil, &Error{Diagnostics: all}
	}
	return out, nil
}

// redeclare checks a later declaration t of an already declared type and
// returns the merged type, or nil with problems recorded in c.
func (c *checker) redeclare(prev, t *EntityType) *EntityType {
	n := len(c.diags)
	what := "entities." + t.Name
	problem := func(at Diagnostic, format string, args ...any) {
		at.Message = fmt.Sprintf(format, args...)
		c.diags = append(c.diags, at)
	}
	if t.Ledger != prev.Ledger {
		problem(t.pos, "%s.ledger: %q differs from ledger %q declared at %s", what, t.Ledger, prev.Ledger, prev.pos.at())
	}
	for _, pf := range prev.Fields {
		f, ok := t.Field(pf.Name)
		switch {
		case !ok:
			problem(t.pos, "%s: removes field %q declared at %s", what, pf.Name, pf.pos.at())
		case f.Type != pf.Type:
			problem(f.pos, "%s.fields.%s: retypes field from %s to %s (declared at %s)", what, f.Name, pf.Type, f.Type, pf.pos.at())
		case f.Storage != pf.Storage:
			problem(f.pos, "%s.fields.%s: moves field from slot %q to %q (declared at %s)", what, f.Name, pf.Storage, f.Storage, pf.pos.at())
		case f.Required != pf.Required || !slices.Equal(f.Enum, pf.Enum):
			problem(f.pos, "%s.fields.%s: differs from the field declared at %s", what, f.Name, pf.pos.at())
		}
	}
	for _, f := range t.Fields {
		if _, ok := prev.Field(f.Name); !ok {
			problem(f.pos, "%s.fields.%s: adds a field to a type declared at %s; a later manifest may add fact types to it, not fields", what, f.Name, prev.pos.at())
		}
	}
	for i, ft := range prev.Facts {
		if !t.AllowsFact(ft) {
			at := t.pos
			if i < len(prev.factPos) {
				problem(at, "%s.facts: removes fact type %q declared at %s", what, ft, prev.factPos[i].at())
			} else {
				problem(at, "%s.facts: removes fact type %q", what, ft)
			}
		}
	}
	c.redeclareFactTypes(prev, t)
	if len(c.diags) > n {
		return nil
	}
	merged := *prev
	merged.FactTypes = make(map[string]*FactType, len(prev.FactTypes)+len(t.FactTypes))
	for k, v := range prev.FactTypes {
		merged.FactTypes[k] = v
	}
	for k, v := range t.FactTypes {
		if _, ok := merged.FactTypes[k]; !ok {
			merged.FactTypes[k] = v
		}
	}
	merged.Facts = slices.Clone(prev.Facts)
	merged.factPos = slices.Clone(prev.factPos)
	for i, ft := range t.Facts {
		if !merged.AllowsFact(ft) {
			merged.Facts = append(merged.Facts, ft)
			if i < len(t.factPos) {
				merged.factPos = append(merged.factPos, t.factPos[i])
			}
		}
	}
	return &merged
}

// at formats a position as file:line:col.
func (d Diagnostic) at() string {
	if d.File == "" {
		return "an earlier manifest"
	}
	return fmt.Sprintf("%s:%d:%d", d.File, d.Line, d.Column)
}

// DomainFiles expands domain sources: a file stands for itself, a
// directory for its *.yaml and *.yml files in name order.
func DomainFiles(sources []string) ([]string, error) {
	var out []string
	for _, src := range sources {
		fi, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("domain manifest: %w", err)
		}
		if !fi.IsDir() {
			out = append(out, src)
			continue
		}
		var files []string
		for _, pat := range []string{"*.yaml", "*.yml"} {
			m, err := filepath.Glob(filepath.Join(src, pat))
			if err != nil {
				return nil, fmt.Errorf("domain manifest directory %s: %w", src, err)
			}
			files = append(files, m...)
		}
		sort.Strings(files)
		out = append(out, files...)
	}
	return out, nil
}

// Source is one domain manifest to layer: where it comes from (a file
// path, or a name for one stored elsewhere) and its content.
type Source struct {
	File string
	Src  []byte
}

// ReadSources reads the files of sources (see DomainFiles).
func ReadSources(sources []string) ([]Source, error) {
	files, err := DomainFiles(sources)
	if err != nil {
		return nil, err
	}
	out := make([]Source, 0, len(files))
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("domain manifest: %w", err)
		}
		out = append(out, Source{File: f, Src: src})
	}
	return out, nil
}

// LoadLayered parses the base manifest and the files of sources (see
// DomainFiles), and merges them with Layer.
func LoadLayered(baseFile string, base []byte, sources []string) (*Domain, error) {
	srcs, err := ReadSources(sources)
	if err != nil {
		return nil, err
	}
	return LayerSources(baseFile, base, srcs)
}

// LayerSources parses the base manifest and the layers, and merges them
// with Layer. Problems of every source are reported together, each at its
// file:line:col. A layer identical to the base is the base itself (make
// run names manifests/domain.yaml) and is skipped wherever it comes; so is
// a layer identical to an earlier one (a file also stored through the
// admin API).
func LayerSources(baseFile string, base []byte, layers []Source) (*Domain, error) {
	var diags []Diagnostic
	b, err := ParseDomain(baseFile, base)
	if err != nil {
		diags = append(diags, Diagnostics(baseFile, err)...)
	}
	var parsed []*Domain
	seen := [][]byte{base}
	for _, l := range layers {
		if RepeatsLayer(l.Src, seen) {
			continue
		}
		seen = append(seen, l.Src)
		d, err := ParseDomain(l.File, l.Src)
		if err != nil {
			diags = append(diags, Diagnostics(l.File, err)...)
			continue
		}
		parsed = append(parsed, d)
	}
	if len(diags) > 0 {
		return nil, &Error{Diagnostics: diags}
	}
	return Layer(b, parsed...)
}

// RepeatsLayer reports whether src is byte for byte one of the layers
// seen before it: layering the same manifest twice changes nothing.
func RepeatsLayer(src []byte, seen [][]byte) bool {
	return slices.ContainsFunc(seen, func(b []byte) bool { return bytes.Equal(b, src) })
}
