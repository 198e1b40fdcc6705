package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Diagnostic is one problem in a manifest, located at a line and column
// (1-based). Every problem the loaders find in a file's content has both;
// they are 0 only for a problem with the file as a whole, such as failing
// to read it.
type Diagnostic struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

func (d Diagnostic) String() string {
	if d.Line == 0 {
		return fmt.Sprintf("%s: %s", d.File, d.Message)
	}
	return fmt.Sprintf("%s:%d:%d: %s", d.File, d.Line, d.Column, d.Message)
}

// Error is returned when a manifest has problems; it lists all of them.
type Error struct {
	Diagnostics []Diagnostic
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Diagnostics))
	for i, d := range e.Diagnostics {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// Diagnostics extracts the diagnostics from an error returned by a loader;
// an unrelated error becomes a single diagnostic without position.
func Diagnostics(file string, err error) []Diagnostic {
	if err == nil {
		return nil
	}
	var me *Error
	if errors.As(err, &me) {
		return me.Diagnostics
	}
	return []Diagnostic{{File: file, Message: err.Error()}}
}

// checker collects diagnostics for one file.
type checker struct {
	file  string
	diags []Diagnostic
	// factSets caches entity types' fact types as sets (see factSet).
	factSets map[string]map[string]bool
	// wrongKind are the nodes reported as not being the kind of node they
	// should be (a mapping, a string): what else is said of them (its
	// keys missing, its value not one of those allowed) follows from that
	// and is not said again.
	wrongKind map[*yaml.Node]bool
	// misspelt are, by mapping, the keys an unknown key of the mapping
	// was taken for ("did you mean"): that the key is missing is the
	// same mistake and is not said again.
	misspelt map[*yaml.Node]map[string]bool
	// domainLater is set when a gateway manifest is checked before the
	// domain model it is served with is known (see PrecheckGateway): the
	// problems a domain manifest could resolve are left to the check
	// with the model.
	domainLater bool
}

func (c *checker) at(n *yaml.Node, format string, args ...any) {
	if n != nil && c.wrongKind[n] {
		return
	}
	d := Diagnostic{File: c.file, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		d.Line, d.Column = n.Line, n.Column
	}
	c.diags = append(c.diags, d)
}

// notKind reports n as not being the kind of node it should be; nothing
// more is said of n.
func (c *checker) notKind(n *yaml.Node, format string, args ...any) {
	c.at(n, format, args...)
	if c.wrongKind == nil {
		c.wrongKind = map[*yaml.Node]bool{}
	}
	c.wrongKind[n] = true
}

// missing reports a required key missing from the mapping parent, unless
// an unknown key of parent was taken for it: "unknown key "Routes" (did
// you mean "routes"?)" says all there is to say.
func (c *checker) missing(parent *yaml.Node, what, key string) {
	if c.misspelt[parent][key] {
		return
	}
	c.at(parent, "%s: missing required key %q", what, key)
}

// pos is the position of a node in the file being checked.
func (c *checker) pos(n *yaml.Node) Diagnostic {
	return Diagnostic{File: c.file, Line: n.Line, Column: n.Column}
}

func (c *checker) err() error {
	if len(c.diags) == 0 {
		return nil
	}
	SortDiagnostics(c.diags)
	return &Error{Diagnostics: c.diags}
}

// SortDiagnostics orders diagnostics by file, the files in the order of
// their first diagnostic, and within a file by line, then column; those
// at one place keep their order. A report gathered from several checks
// (the parse, then the command routes against their ledgers) then reads
// each file from top to bottom.
func SortDiagnostics(diags []Diagnostic) {
	rank := map[string]int{}
	for _, d := range diags {
		if _, ok := rank[d.File]; !ok {
			rank[d.File] = len(rank)
		}
	}
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i], diags[j]
		switch {
		case a.File != b.File:
			return rank[a.File] < rank[b.File]
		case a.Line != b.Line:
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// parseDocument parses YAML and returns the top mapping node. Every
// problem found here gets a real line and column: bytes YAML cannot hold,
// an empty file, syntax errors and a second document.
func (c *checker) parseDocument(src []byte) *yaml.Node {
	if off, msg := badText(src); off >= 0 {
		line, col := position(src, off)
		c.diags = append(c.diags, Diagnostic{File: c.file, Line: line, Column: col, Message: msg})
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			c.diags = append(c.diags, Diagnostic{File: c.file, Line: 1, Column: 1, Message: "empty manifest"})
		} else {
			c.syntax(err, src)
		}
		return nil
	}
	// A file is one document: a second one would otherwise be ignored
	// without a word. The first is still checked.
	var next yaml.Node
	if err := dec.Decode(&next); err != nil && !errors.Is(err, io.EOF) {
		c.syntax(err, src)
	} else if err == nil {
		c.at(&next, "a manifest file holds one YAML document; a second starts here")
	}
	if len(doc.Content) == 0 {
		c.diags = append(c.diags, Diagnostic{File: c.file, Line: 1, Column: 1, Message: "empty manifest"})
		return nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		c.at(top, "manifest must be a mapping, got %s", kindName(top))
		return nil
	}
	c.aliasKeys(top)
	return top
}

// aliasKeys refuses an alias used as a mapping key anywhere: the checks
// read a key's text, which for an alias is the anchor's name, not the
// key it stands for (a second "status" would pass as a field "f").
func (c *checker) aliasKeys(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml.AliasNode {
				c.at(k, "an alias (*%s) cannot be a key: write the key itself", k.Value)
			}
			c.aliasKeys(n.Content[i+1])
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			c.aliasKeys(item)
		}
	}
}

// syntax turns a yaml.v3 error ("yaml: line 3: ...") into a diagnostic.
// yaml.v3 gives no column, and for an error inside a construct it gives
// the line where the construct starts; the line at fault is found again
// (firstBadLine) and the column read from its text (syntaxColumn).
// Errors without a line are located in src where possible, else at 1:1.
func (c *checker) syntax(err error, src []byte) {
	msg := err.Error()
	line, col := 0, 1
	// yaml.v3 counts a lone CR as a line break too.
	norm := bytes.ReplaceAll(bytes.ReplaceAll(src, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
	if rest, ok := strings.CutPrefix(msg, "yaml: line "); ok {
		if i := strings.Index(rest, ":"); i > 0 {
			_, _ = fmt.Sscanf(rest[:i], "%d", &line) // no number: line stays 0
			msg = "YAML syntax error:" + rest[i+1:]
			// yaml.v3 reports an unclosed flow collection at the line
			// before the one that opens it.
			if strings.Contains(msg, "did not find expected") {
				line++
			}
			// Inside a construct it reports where the construct starts
			// (the enclosing mapping of a missing key, for one); the line
			// at fault is the first one the document cannot take.
			if at := firstBadLine(norm, line-1, syntaxProblem(err.Error())); at > line {
				switch {
				case strings.Contains(msg, "did not find expected key"):
					msg += fmt.Sprintf(" (in the mapping that starts at line %d)", line)
				case strings.Contains(msg, "did not find expected '-'"):
					msg += fmt.Sprintf(" (in the sequence that starts at line %d)", line)
				}
				line = at
			}
			// At the end of the input it may name the line after the last.
			if n := lineCount(norm); line > n {
				line = n
			}
			// A blank line (the end of the input after blank lines) gives
			// no clue: the last line with text before it does.
			for line > 1 && strings.TrimSpace(lineText(norm, line)) == "" {
				line--
			}
			col = syntaxColumn(lineText(norm, line), msg)
		}
	} else {
		msg = "YAML syntax error: " + strings.TrimPrefix(msg, "yaml: ")
		var name string
		if _, e := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "unknown anchor %s referenced", &name); e == nil {
			if off := aliasOffset(src, strings.Trim(name, "'")); off >= 0 {
				line, col = position(src, off)
			}
		}
	}
	if line < 1 {
		line, col = 1, 1
	}
	c.diags = append(c.diags, Diagnostic{File: c.file, Line: line, Column: col, Message: msg})
}

// syntaxProblem is a yaml.v3 error message without its "yaml: line N:"
// prefix.
func syntaxProblem(msg string) string {
	rest, ok := strings.CutPrefix(msg, "yaml: line ")
	if !ok {
		return msg
	}
	if i := strings.Index(rest, ":"); i > 0 {
		return rest[i+1:]
	}
	return rest
}

// lineText is line n (1-based) of src without its line break, or "".
func lineText(src []byte, n int) string {
	lines := bytes.SplitAfter(src, []byte("\n"))
	if n < 1 || n > len(lines) {
		return ""
	}
	return strings.TrimRight(string(lines[n-1]), "\r\n")
}

// lineCount is the number of lines in src, a final line break ending the
// last line rather than starting another.
func lineCount(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

// syntaxColumn is the column (1-based, in characters) of what a yaml.v3
// syntax error of message msg most likely stands for in text, the line it
// is on: a tab or a character no token starts with, a second ': ' on the
// line, an opening quote or bracket never closed, else the line's first
// character that is not a space. 1 when the line gives no clue.
func syntaxColumn(text, msg string) int {
	at := -1
	startsToken := func(i int) bool {
		return i == 0 || strings.ContainsRune(" \t[{,:-", rune(text[i-1]))
	}
	lastAtTokenStart := func(chars string) int {
		for i := len(text) - 1; i >= 0; i-- {
			if strings.IndexByte(chars, text[i]) >= 0 && startsToken(i) {
				return i
			}
		}
		return -1
	}
	switch {
	case strings.Contains(msg, "cannot start any token") || strings.Contains(msg, "tab"):
		if i := strings.IndexByte(text, '\t'); i >= 0 && strings.TrimLeft(text[:i], " ") == "" {
			at = i
			break
		}
		for i := range len(text) {
			if (text[i] == '@' || text[i] == '`') && startsToken(i) {
				at = i
				break
			}
		}
	case strings.Contains(msg, "mapping values are not allowed"):
		sep := func(from int) int {
			for i := from; i < len(text); i++ {
				if text[i] == ':' && (i+1 == len(text) || text[i+1] == ' ' || text[i+1] == '\t') {
					return i
				}
			}
			return -1
		}
		if first := sep(0); first >= 0 {
			at = sep(first + 1)
		}
	case strings.Contains(msg, "end of stream") || strings.Contains(msg, "quoted scalar"):
		at = lastAtTokenStart(`"'`)
	case strings.Contains(msg, "expected ',' or") || strings.Contains(msg, "expected node content"):
		at = lastAtTokenStart("[{")
	}
	if at < 0 {
		at = len(text) - len(strings.TrimLeft(text, " "))
		if at == len(text) {
			return 1
		}
	}
	return utf8.RuneCountInString(text[:at]) + 1
}

// field is one key/value pair of a mapping.
type field struct {
	key   *yaml.Node
	value *yaml.Node
}

// fields returns the pairs of a mapping, reporting unknown and duplicate
// keys. allowed lists the known keys; nil accepts any key.
func (c *checker) fields(n *yaml.Node, what string, allowed ...string) map[string]field {
	out := map[string]field{}
	if n == nil {
		return out
	}
	if n.Kind != yaml.MappingNode {
		c.notKind(n, "%s must be a mapping, got %s", what, kindName(n))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if _, dup := out[k.Value]; dup {
			c.at(k, "duplicate key %q in %s", k.Value, what)
			continue
		}
		if allowed != nil && !contains(allowed, k.Value) {
			hint := ""
			if s := closest(k.Value, allowed); s != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", s)
				if c.misspelt == nil {
					c.misspelt = map[*yaml.Node]map[string]bool{}
				}
				if c.misspelt[n] == nil {
					c.misspelt[n] = map[string]bool{}
				}
				c.misspelt[n][s] = true
			}
			c.at(k, "unknown key %q in %s%s", k.Value, what, hint)
			continue
		}
		out[k.Value] = field{k, v}
	}
	return out
}

// str reads a required or optional scalar string.
func (c *checker) str(f map[string]field, key, what string, required bool, parent *yaml.Node) (string, *yaml.Node) {
	p, ok := f[key]
	if !ok {
		if required {
			c.missing(parent, what, key)
		}
		return "", nil
	}
	if p.value.Kind != yaml.ScalarNode || p.value.Tag == "!!null" {
		c.notKind(p.value, "%s.%s must be a string, got %s", what, key, kindName(p.value))
		return "", p.value
	}
	if required && strings.TrimSpace(p.value.Value) == "" {
		c.at(p.value, "%s.%s must not be empty", what, key)
	}
	return p.value.Value, p.value
}

// boolean reads an optional boolean.
func (c *checker) boolean(f map[string]field, key, what string) bool {
	p, ok := f[key]
	if !ok {
		return false
	}
	var b bool
	if p.value.Kind != yaml.ScalarNode || p.value.Tag != "!!bool" || p.value.Decode(&b) != nil {
		c.at(p.value, "%s.%s must be true or false", what, key)
		return false
	}
	return b
}

// strings reads a sequence of scalar strings.
func (c *checker) strList(n *yaml.Node, what string) ([]string, []*yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		c.at(n, "%s must be a list, got %s", what, kindName(n))
		return nil, nil
	}
	var out []string
	var nodes []*yaml.Node
	for _, item := range n.Content {
		if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
			c.at(item, "%s items must be strings, got %s", what, kindName(item))
			continue
		}
		out = append(out, item.Value)
		nodes = append(nodes, item)
	}
	return out, nodes
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		}
		return "a string"
	}
	return "nothing"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// closest returns the allowed word within edit distance 2 of s, if any.
func closest(s string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := distance(strings.ToLower(s), strings.ToLower(a)); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// firstBadLine is the first line after line from such that the document up to
// and including it no longer parses, for the reason problem, or 0 when the whole document parses
// up to every line. A prefix that fails stays failing as lines are added
// (the bad token is in it), so a binary search finds the line in a few
// parses, whatever the file's length.
func firstBadLine(src []byte, from int, problem string) int {
	lines := bytes.SplitAfter(src, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // the final line break starts no line
	}
	if from < 0 || from >= len(lines) {
		return 0
	}
	// A prefix counts as failing when it fails with the document's own
	// problem: one cut inside a valid construct spanning lines (a flow
	// collection, a quoted scalar) fails too, with a problem of its own.
	fails := func(k int) bool {
		var n yaml.Node
		err := yaml.Unmarshal(bytes.Join(lines[:k], nil), &n)
		return err != nil && syntaxProblem(err.Error()) == problem
	}
	k := from + 1 + sort.Search(len(lines)-from, func(i int) bool { return fails(from + 1 + i) })
	// A construct spanning lines (a flow collection, a quoted scalar) can
	// make a shorter prefix fail too; then the search proves nothing.
	if k > len(lines) || (k-1 > from && fails(k-1)) {
		return 0
	}
	return k
}
