package projection

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ParseConfig parses a projection configuration from YAML (JSON is YAML
// too). Invalid YAML gives a *ConfigParseError with the line; a
// configuration with problems gives a *ConfigValidationError listing every
// issue. A rollup object is accepted as in the settings form.
func ParseConfig(src []byte) (*Config, error) {
	return parseConfig(src, false)
}

// ParseSettings parses the settings form of a configuration: the same
// fields with storageVersion required, plus an optional rollup object.
func ParseSettings(src []byte) (*Config, error) {
	return parseConfig(src, true)
}

func parseConfig(src []byte, settings bool) (*Config, error) {
	root, err := parseYAML(src)
	if err != nil {
		return nil, err
	}
	p := &nodeParser{v: &validator{lines: map[string]int{}, bad: map[string]bool{}}, present: map[string]bool{}}
	c := p.config(root, "")
	if c != nil {
		p.v.config(c, "", settings, p.present)
	}
	if err := p.v.err("invalid projection config"); err != nil {
		return nil, err
	}
	return c, nil
}

// ParseVersioned parses the versioned wrapper of projection settings
// (id, type "projection", scope "platform", version, tenant_id, settings,
// effective_at) from YAML or JSON.
func ParseVersioned(src []byte) (*VersionedConfig, error) {
	root, err := parseYAML(src)
	if err != nil {
		return nil, err
	}
	p := &nodeParser{v: &validator{lines: map[string]int{}, bad: map[string]bool{}}, present: map[string]bool{}}
	vc := p.versioned(root)
	if vc != nil {
		p.v.versioned(vc, p.present)
	}
	if err := p.v.err("invalid versioned projection config"); err != nil {
		return nil, err
	}
	return vc, nil
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// parseYAML returns the top node of a single-document YAML source.
func parseYAML(src []byte) (n *yaml.Node, err error) {
	defer func() {
		// yaml.v3 has had panics on hostile input; never let one escape.
		if r := recover(); r != nil {
			n, err = nil, &ConfigParseError{Message: fmt.Sprint("invalid YAML: ", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ConfigValidationError{Message: "invalid projection config: 1 issue", Issues: []string{"the document is empty"}}
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &ConfigParseError{Message: "more than one YAML document", Line: extra.Line}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlError(err)
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return doc.Content[0], nil
	}
	return &doc, nil
}

func yamlError(err error) *ConfigParseError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimSpace(strings.Replace(msg, m[0]+":", "", 1))
	}
	return &ConfigParseError{Message: msg, Line: line}
}

// nodeParser turns YAML nodes into structs, recording type problems and
// the line of every path.
type nodeParser struct {
	v       *validator
	present map[string]bool
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return "a number"
		}
		return "a string"
	}
	return "a value"
}

// fields walks a mapping node, calling fn for each known key, and records
// unknown keys as issues.
func (p *nodeParser) fields(n *yaml.Node, path string, known []string, fn func(key string, val *yaml.Node, vpath string)) bool {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		p.v.lines[path] = n.Line
		p.v.add(path, "must be an object (got %s)", kindName(n))
		return false
	}
	p.v.lines[path] = n.Line
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := resolve(n.Content[i]), resolve(n.Content[i+1])
		key := kn.Value
		vpath := join(path, key)
		p.v.lines[vpath] = kn.Line
		if kn.Kind != yaml.ScalarNode {
			p.v.add(path, "line %d: keys must be strings", kn.Line)
			continue
		}
		if seen[key] {
			p.v.add(vpath, "duplicate key")
			continue
		}
		seen[key] = true
		if !contains(known, key) {
			if s := suggest(key, known); s != "" {
				p.v.add(vpath, "unknown field (did you mean %q?)", s)
			} else {
				p.v.add(vpath, "unknown field (known: %s)", strings.Join(known, ", "))
			}
			continue
		}
		p.present[vpath] = true
		fn(key, vn, vpath)
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// suggest returns the known key closest to key when it is close enough.
func suggest(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return k
		}
		if d := editDistance(strings.ToLower(k), strings.ToLower(key)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (p *nodeParser) str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Tag == "!!bool" || n.Tag == "!!int" || n.Tag == "!!float" {
		if n.Kind == yaml.ScalarNode && n.Tag != "!!null" && n.Style != 0 {
			return n.Value, true // quoted scalar
		}
		p.v.add(path, "must be a string (got %s)", kindName(n))
		p.v.bad[path] = true
		return "", false
	}
	return n.Value, true
}

func (p *nodeParser) boolean(n *yaml.Node, path string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.v.add(path, "must be true or false (got %s)", kindName(n))
		p.v.bad[path] = true
		return false, false
	}
	b, err := strconv.ParseBool(strings.ToLower(n.Value))
	if err != nil {
		p.v.add(path, "must be true or false (got %q)", n.Value)
		return false, false
	}
	return b, true
}

func (p *nodeParser) integer(n *yaml.Node, path string, bits int) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!float" {
			f, err := strconv.ParseFloat(n.Value, 64)
			if err == nil && f == float64(int64(f)) && f < 1e15 && f > -1e15 {
				return int64(f), true
			}
			if err == nil && f == math.Trunc(f) || errors.Is(err, strconv.ErrRange) {
				p.v.add(path, "is out of range (got %s)", n.Value)
				p.v.bad[path] = true
				return 0, false
			}
		}
		p.v.add(path, "must be an integer (got %s)", kindName(n))
		p.v.bad[path] = true
		return 0, false
	}
	i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, bits)
	if errors.Is(err, strconv.ErrRange) {
		p.v.add(path, "is out of range (got %s)", n.Value)
		p.v.bad[path] = true
		return 0, false
	}
	if err != nil {
		p.v.add(path, "must be an integer (got %q)", n.Value)
		p.v.bad[path] = true
		return 0, false
	}
	return i, true
}

func (p *nodeParser) strings(n *yaml.Node, path string) []string {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.v.add(path, "must be a list of strings (got %s)", kindName(n))
		p.v.bad[path] = true
		return nil
	}
	out := []string{}
	for i, e := range n.Content {
		e = resolve(e)
		ep := fmt.Sprintf("%s[%d]", path, i)
		p.v.lines[ep] = e.Line
		if s, ok := p.str(e, ep); ok {
			out = append(out, s)
		}
	}
	return out
}

var configKeys = []string{"source", "factTypes", "timeWindow", "groupBy", "aggregations", "materialize", "storageVersion", "rollup"}

func (p *nodeParser) config(n *yaml.Node, path string) *Config {
	c := &Config{}
	ok := p.fields(n, path, configKeys, func(key string, val *yaml.Node, vp string) {
		switch key {
		case "source":
			c.Source, _ = p.str(val, vp)
		case "factTypes":
			c.FactTypes = p.strings(val, vp)
		case "timeWindow":
			if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
				return
			}
			s, ok := p.str(val, vp)
			if ok {
				if s == "" {
					p.v.add(vp, "must be one of minute, hour, day, month (got \"\")")
				}
				c.TimeWindow = Window(s)
			}
		case "groupBy":
			c.GroupBy = p.strings(val, vp)
		case "aggregations":
			if val.Kind != yaml.SequenceNode {
				p.v.add(vp, "must be a list of aggregations (got %s)", kindName(val))
				c.Aggregations = []Aggregation{{Field: "count", Function: Count}} // avoid a second "required" issue
				return
			}
			c.Aggregations = []Aggregation{}
			for i, e := range val.Content {
				ep := fmt.Sprintf("%s[%d]", vp, i)
				a := Aggregation{}
				if !p.fields(e, ep, []string{"field", "function"}, func(k string, v *yaml.Node, kp string) {
					switch k {
					case "field":
						a.Field, _ = p.str(v, kp)
					case "function":
						if s, ok := p.str(v, kp); ok {
							a.Function = Function(s)
						}
					}
				}) {
					continue
				}
				c.Aggregations = append(c.Aggregations, a)
			}
			if len(val.Content) > 0 && len(c.Aggregations) == 0 {
				c.Aggregations = []Aggregation{{Field: "count", Function: Count}}
			}
		case "materialize":
			c.Materialize, _ = p.boolean(val, vp)
		case "storageVersion":
			if i, ok := p.integer(val, vp, 32); ok {
				if i == 0 {
					p.v.add(vp, "must be 1 or 2 (got 0)")
					c.StorageVersion = 1
				} else {
					c.StorageVersion = int(i)
				}
			}
		case "rollup":
			r := &RollupConfig{}
			p.fields(val, vp, []string{"enabled", "retention"}, func(k string, v *yaml.Node, kp string) {
				switch k {
				case "enabled":
					r.Enabled, _ = p.boolean(v, kp)
				case "retention":
					p.fields(v, kp, []string{"minute", "hour", "day", "month"}, func(w string, d *yaml.Node, wp string) {
						i, ok := p.integer(d, wp, 32)
						if !ok {
							return
						}
						if i < 0 {
							p.v.add(wp, "must be a number of days >= 0 (0 keeps forever), got %d", i)
							return
						}
						switch Window(w) {
						case Minute:
							r.Retention.Minute = int(i)
						case Hour:
							r.Retention.Hour = int(i)
						case Day:
							r.Retention.Day = int(i)
						case Month:
							r.Retention.Month = int(i)
						}
					})
				}
			})
			c.Rollup = r
		}
	})
	if !ok {
		return nil
	}
	return c
}

var versionedKeys = []string{"id", "type", "scope", "version", "tenant_id", "settings", "effective_at"}

func (p *nodeParser) versioned(n *yaml.Node) *VersionedConfig {
	vc := &VersionedConfig{}
	ok := p.fields(n, "", versionedKeys, func(key string, val *yaml.Node, vp string) {
		switch key {
		case "id":
			vc.ID, _ = p.str(val, vp)
		case "type":
			vc.Type, _ = p.str(val, vp)
		case "scope":
			vc.Scope, _ = p.str(val, vp)
		case "version":
			if i, ok := p.integer(val, vp, 32); ok {
				vc.Version = int(i)
			} else {
				vc.Version = 1
			}
		case "tenant_id":
			vc.TenantID, _ = p.str(val, vp)
		case "effective_at":
			vc.EffectiveAt, _ = p.integer(val, vp, 64)
		case "settings":
			vc.Settings = p.config(val, vp)
		}
	})
	if !ok {
		return nil
	}
	return vc
}
