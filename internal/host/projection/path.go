package projection

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
)

// A field path names a value of a fact: data.<key>[.<key>...] reaches into
// the fact's data object; id, type, subtype and timestamp name the fact's
// own fields.

// topFields are the fact fields a path may name without "data.".
var topFields = []string{"id", "type", "subtype", "timestamp"}

// checkPath returns a description of what is wrong with a path, or "".
func checkPath(p string) string {
	if p == "" {
		return "must not be empty"
	}
	segs := strings.Split(p, ".")
	for _, s := range segs {
		if s == "" {
			return "field " + strconv.Quote(p) + ": empty path segment"
		}
		for _, r := range s {
			if r == ':' || r == '|' || r < 0x20 || r == 0x7f {
				return "field " + strconv.Quote(p) + ": path segments must not contain ':', '|' or control characters"
			}
		}
	}
	if segs[0] == "data" {
		if len(segs) == 1 {
			return "field \"data\": name a field inside data, such as data.amount"
		}
		return ""
	}
	for _, t := range topFields {
		if segs[0] == t {
			if len(segs) > 1 {
				return "field " + strconv.Quote(p) + ": " + t + " has no nested fields"
			}
			return ""
		}
	}
	return "field " + strconv.Quote(p) + ": must start with \"data.\" (a field of the fact's data) or be one of id, type, subtype, timestamp"
}

// fieldPath is a compiled, valid path.
type fieldPath struct {
	top  string   // "data", "id", "type", "subtype" or "timestamp"
	data []string // keys below data
}

func compilePath(p string) fieldPath {
	segs := strings.Split(p, ".")
	return fieldPath{top: segs[0], data: segs[1:]}
}

// lookup returns the value at the path; ok is false when it is missing.
func (p *fieldPath) lookup(f *Fact) (any, bool) {
	switch p.top {
	case "id":
		return f.ID, true
	case "type":
		return f.Type, true
	case "subtype":
		if f.Subtype == "" {
			return nil, false
		}
		return f.Subtype, true
	case "timestamp":
		return f.Timestamp, true
	}
	var cur any = f.Data
	for _, k := range p.data {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[k]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// groupValue renders a groupBy value: strings as they are, numbers in
// canonical decimal form, booleans as true/false, objects and arrays as
// compact JSON with sorted keys; missing and null values are "".
func groupValue(v any, ok bool) string {
	if !ok || v == nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	}
	if n, isNum := numberOf(v); isNum {
		if _, isStr := v.(string); !isStr {
			return n.String()
		}
	}
	if s, isNum := v.(json.Number); isNum {
		return string(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// distinctValue renders a count_distinct value: strings as they are,
// numbers in canonical decimal form (so 1, 1.0 and "1" are one value),
// booleans as true/false, objects and arrays as compact JSON. Missing and
// null values are not counted.
func distinctValue(v any, ok bool) (string, bool) {
	if !ok || v == nil {
		return "", false
	}
	if s, isStr := v.(string); isStr {
		if n, isNum := parseNumber(s); isNum {
			return distinctText(n.String()), true
		}
		return distinctText(s), true
	}
	return distinctText(groupValue(v, true)), true
}

// distinctKeep is the longest distinct value a base bucket keeps as it
// is.
const distinctKeep = 64

// distinctText is how a distinct value is kept: as it is up to
// distinctKeep bytes, else (and when it starts with NUL, the mark) a NUL
// and its SHA-256 in base64, so a bucket's set holds at most 64 bytes per
// value and two values are one only when equal (or their hashes collide).
func distinctText(s string) string {
	if len(s) <= distinctKeep && (s == "" || s[0] != 0) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "\x00" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// escapeGroup makes a group value safe inside keys joined by ':': '%'
// becomes %25 and ':' becomes %3A.
func escapeGroup(s string) string {
	if !strings.ContainsAny(s, ":%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '%':
			b.WriteString("%25")
		case ':':
			b.WriteString("%3A")
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// UnescapeGroup returns the group value of one ':'-separated part of a
// result key.
func UnescapeGroup(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	r := strings.NewReplacer("%3A", ":", "%3a", ":", "%25", "%")
	return r.Replace(s)
}
