package projection

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// schema is a configuration compiled for processing.
type schema struct {
	cfg    *Config
	types  []string
	window Window   // "" without a time window
	levels []Window // levels[0] is the base window (windowAll without one); then the rollup windows
	// retention per level in days (0 forever); only with rollups
	retention []int
	groups    []fieldPath
	fields    []fieldSpec
	aggs      []aggSpec
	hasNum    bool
	hasDist   bool
	// fingerprint identifies what the configuration aggregates; cached
	// state records it so that a different configuration is refused.
	fingerprint string
	// hashFields are the Redis hash fields of a bucket, by name.
	hashFields map[string]hashField
}

// fieldSpec is one fact field that aggregations read.
type fieldSpec struct {
	path fieldPath
	name string // the <field> of result keys
	// Redis hash field names: c|<name>, lo|<name>, hi|<name>, and
	// s|<name>|<scale>|<limb> for scales up to 18 and limbs up to 2.
	cName, loName, hiName string
	sNames                [19][3]string
	numeric               bool // sum, avg, min or max
	sum                   bool // sum or avg
	minmax                bool // min or max
	distinct              bool
}

type aggSpec struct {
	fn    Function
	field int // index into fields; -1 for count
	key   string
}

func compile(c *Config) *schema {
	s := &schema{cfg: c, types: c.FactTypes, window: c.TimeWindow}
	if c.TimeWindow == "" {
		s.levels = []Window{windowAll}
	} else if c.rollupEnabled() {
		s.levels = append([]Window(nil), windowOrder[c.TimeWindow.rank():]...)
	} else {
		s.levels = []Window{c.TimeWindow}
	}
	s.retention = make([]int, len(s.levels))
	if c.rollupEnabled() {
		for i, w := range s.levels {
			s.retention[i] = c.Rollup.Retention.days(w)
		}
	}
	for _, g := range c.GroupBy {
		s.groups = append(s.groups, compilePath(g))
	}
	fieldIdx := map[string]int{}
	for _, a := range c.Aggregations {
		if a.Function == Count {
			s.aggs = append(s.aggs, aggSpec{fn: Count, field: -1, key: a.ResultKey()})
			continue
		}
		i, ok := fieldIdx[a.Field]
		if !ok {
			i = len(s.fields)
			fieldIdx[a.Field] = i
			name := resultField(a.Field)
			fs := fieldSpec{path: compilePath(a.Field), name: name, cName: "c|" + name, loName: "lo|" + name, hiName: "hi|" + name}
			for sc := range fs.sNames {
				for li := range fs.sNames[sc] {
					fs.sNames[sc][li] = sumField(name, sc, li)
				}
			}
			s.fields = append(s.fields, fs)
		}
		f := &s.fields[i]
		switch a.Function {
		case Sum, Avg:
			f.numeric, f.sum = true, true
		case Min, Max:
			f.numeric, f.minmax = true, true
		case CountDistinct:
			f.distinct = true
		}
		s.aggs = append(s.aggs, aggSpec{fn: a.Function, field: i, key: a.ResultKey()})
	}
	for _, f := range s.fields {
		s.hasNum = s.hasNum || f.numeric
		s.hasDist = s.hasDist || f.distinct
	}
	s.hashFields = hashFieldsOf(s)
	// The order of fact types and aggregations does not change what a
	// bucket holds; the order of groupBy does (it orders keys).
	types := slices.Sorted(slices.Values(c.FactTypes))
	aggs := slices.SortedFunc(slices.Values(c.Aggregations), func(a, b Aggregation) int {
		return strings.Compare(string(a.Function)+"\x00"+a.Field, string(b.Function)+"\x00"+b.Field)
	})
	// D names how distinct values are kept (exact values in base buckets
	// since format "values"); state that kept sketches everywhere is
	// another meaning, so it is rebuilt rather than mixed in.
	distinctForm := ""
	if s.hasDist {
		distinctForm = "values"
	}
	fp, _ := json.Marshal(struct {
		T []string
		W Window
		G []string
		A []Aggregation
		R bool
		D string `json:",omitempty"`
	}{types, c.TimeWindow, c.GroupBy, aggs, c.rollupEnabled(), distinctForm})
	sum := sha256.Sum256(fp)
	s.fingerprint = hex.EncodeToString(sum[:8])
	return s
}

func (s *schema) wants(typ string) bool {
	for _, t := range s.types {
		if t == typ {
			return true
		}
	}
	return false
}

// flat reports whether results are one flat object.
func (s *schema) flat() bool { return s.window == "" && len(s.groups) == 0 }

// groupKey returns the escaped group values of a fact joined by ':'.
func (s *schema) groupKey(f *Fact) string {
	switch len(s.groups) {
	case 0:
		return ""
	case 1:
		v, ok := s.groups[0].lookup(f)
		return escapeGroup(groupValue(v, ok))
	}
	var b strings.Builder
	for i := range s.groups {
		if i > 0 {
			b.WriteByte(':')
		}
		v, ok := s.groups[i].lookup(f)
		b.WriteString(escapeGroup(groupValue(v, ok)))
	}
	return b.String()
}

// member returns the result key (and sparse storage suffix) of a bucket:
// the bucket key of the level, then the group values.
func member(w Window, start int64, groups string, hasGroups bool) string {
	if w == windowAll {
		return groups
	}
	k := w.key(start)
	if hasGroups {
		return k + ":" + groups
	}
	return k
}

// memberGroups returns the group part of a member of level window w.
func memberGroups(w Window, m string) string {
	if w == windowAll {
		return m
	}
	n := w.bucketLen()
	if len(m) <= n {
		return ""
	}
	return m[n+1:]
}

// fieldVal is the value of one field of one fact.
type fieldVal struct {
	num     number
	isNum   bool
	elem    string
	hasElem bool
}

// values extracts the fields of a fact into dst.
func (s *schema) values(f *Fact, dst []fieldVal) []fieldVal {
	dst = dst[:0]
	for i := range s.fields {
		fs := &s.fields[i]
		v, ok := fs.path.lookup(f)
		var fv fieldVal
		if ok && v != nil {
			if fs.numeric {
				fv.num, fv.isNum = numberOf(v)
			}
			if fs.distinct {
				fv.elem, fv.hasElem = distinctValue(v, true)
			}
		}
		dst = append(dst, fv)
	}
	return dst
}

// sparseKey is the storage key of a bucket in format 2:
// <base>:<window>:<bucket key>[:<group value>...], where base is the
// state prefix and projection key. A projection without a window uses
// "all" as its window; a flat one is <base>:all.
func sparseKey(base string, w Window, mem string) string {
	if mem == "" {
		return base + ":" + string(w)
	}
	return base + ":" + string(w) + ":" + mem
}

// appendSparseKey appends sparseKey(base, w, mem).
func appendSparseKey(dst []byte, base string, w Window, mem string) []byte {
	dst = append(dst, base...)
	dst = append(dst, ':')
	dst = append(dst, w...)
	if mem != "" {
		dst = append(dst, ':')
		dst = append(dst, mem...)
	}
	return dst
}

// renderLoaded renders what a query loaded (see Result).
func (s *schema) renderLoaded(ld *loaded, aggregate bool) Result {
	if aggregate {
		agg := ld.agg
		if agg == nil {
			agg = newCell(s)
		}
		return Result{"aggregated": agg.render(s)}
	}
	if s.flat() {
		for _, b := range ld.buckets {
			if b.member == "" {
				return Result(b.c.render(s))
			}
		}
		return newCell(s).render(s)
	}
	out := make(Result, len(ld.buckets))
	for _, b := range ld.buckets {
		if b.out != nil {
			out[b.member] = b.out
		} else {
			out[b.member] = b.c.render(s)
		}
	}
	return out
}

// sumField is the Redis hash field of limb li of the sum of the values of
// a field with scale digits after the point.
func sumField(name string, scale, li int) string {
	return "s|" + name + "|" + strconv.Itoa(scale) + "|" + strconv.Itoa(li)
}

func (fs *fieldSpec) sumName(scale int32, li int) string {
	if scale < int32(len(fs.sNames)) && li < 3 {
		return fs.sNames[scale][li]
	}
	return sumField(fs.name, int(scale), li)
}
